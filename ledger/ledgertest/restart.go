package ledgertest

import (
	"context"
	"os"
	"testing"

	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// PostgresServer is a private PostgreSQL server of one test, which the
// test may crash and start again (Restart), for the fault tests of
// packages outside the ledger's.
type PostgresServer struct {
	// DSN connects to its database.
	DSN string
	c   *pgtest.Cluster
}

// StartPostgres starts a private server with the Debian binaries, stopped
// when the test ends. Without them the test skips (fails under CI=true).
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	c, err := pgtest.StartCluster(context.Background())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no private PostgreSQL to restart: %v", err)
		}
		t.Skipf("no private PostgreSQL to restart: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return &PostgresServer{DSN: c.DSN, c: c}
}

// Restart stops the server at once, as a crash would, and starts it again
// on the same port; it returns once it takes connections.
func (p *PostgresServer) Restart(ctx context.Context) error { return p.c.Restart(ctx) }
