package rebuild_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/rebuild"
)

// TestRebuildLogs: Config.Logger hears what the rebuild restored, with
// the campaign, and that a healthy campaign was left alone.
func TestRebuildLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(30, 1)
	grabAll(t, e.eng, c.ID, "u", 10)
	e.settleAll(e.r.Client, c.ID)
	quiet(t, e.eng)
	flushAll(t, e.r.Client)

	var buf bytes.Buffer
	cfg := rebuild.Config{Redis: e.r.Client, Ledger: e.l, Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	_, err := rebuild.Rebuild(ctx, cfg, c.ID)
	require.NoError(t, err)
	require.Contains(t, buf.String(), `msg="campaign rebuilt"`)
	require.Contains(t, buf.String(), "campaign="+c.ID)
	require.Contains(t, buf.String(), "restored_claims=10")

	buf.Reset()
	_, err = rebuild.Rebuild(ctx, cfg, c.ID)
	require.ErrorIs(t, err, rebuild.ErrHealthy)
	require.Contains(t, buf.String(), "nothing rebuilt")
}
