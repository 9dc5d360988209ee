package metrics

import (
	"os"
	"testing"

	"github.com/hongbao/hongbao/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
