package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestPersistence reads each persistence setting back as serve's check,
// the fsync metric and the benchmark see it.
func TestPersistence(t *testing.T) {
	t.Parallel()
	for _, aof := range []string{"off", "everysec", "always"} {
		t.Run(aof, func(t *testing.T) {
			t.Parallel()
			r := testenv.NewRedis(t, redisserver.Options{AOF: aof})
			p, err := redisstore.Persistence(context.Background(), r.Client)
			require.NoError(t, err)
			require.Equal(t, aof, p)
		})
	}
}
