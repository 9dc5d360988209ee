package rebuild_test

import (
	"os"
	"testing"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/ledgertest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, ledgertest.StopPostgres)) }
