package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStartCluster exercises the fallback that machines without a server
// rely on, even where a server is running.
func TestStartCluster(t *testing.T) {
	t.Parallel()
	if _, err := binDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	conn, err := pgx.Connect(ctx, c.DSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, `SELECT 1`).Scan(&one))
	require.Equal(t, 1, one)
}

func TestDSNSchema(t *testing.T) {
	t.Parallel()
	dsn := DSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var schema string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	require.Regexp(t, `^hbtest_[0-9a-f]{16}$`, schema)
}

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h:1/db?sslmode=disable", "postgres://u@h:1/db?search_path=s&sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db?search_path=s"},
		{"host=h dbname=db", "host=h dbname=db search_path=s"},
	} {
		got, err := WithSearchPath(tc.in, "s")
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}
