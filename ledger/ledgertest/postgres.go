package ledgertest

import (
	"testing"

	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// PostgresDSN returns the DSN of a fresh, empty PostgreSQL schema for the
// test, dropped when it ends, so that packages outside the ledger's run
// their tests against both ledgers. The server is HONGBAO_TEST_POSTGRES
// (default postgres://postgres@127.0.0.1:5432/test), else a private one
// started with the Debian binaries; the test skips (fails under CI=true)
// when neither is possible. Call StopPostgres after the tests (testenv.Main
// takes it as a cleanup).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return pgtest.DSN(t)
}

// StopPostgres stops the private PostgreSQL server PostgresDSN started, if
// any.
func StopPostgres() { pgtest.StopPrivate() }
