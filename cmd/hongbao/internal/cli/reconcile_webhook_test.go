package cli

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/webhook"
	"github.com/hongbao/hongbao/webhook/webhooktest"
)

// TestReconcileWebhook: grants settled into a host's wallet by settle
// --webhook reconcile against Redis with reconcile --webhook, as text and
// JSON; a grant the wallet lost is a difference and exit status 1.
func TestReconcileWebhook(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String() + "/hongbao"
	name, err := webhook.DefaultName(url) // the settle command sets no name
	require.NoError(t, err)
	wallet := webhooktest.New(name, []byte(strings.Repeat("h", 32)))
	srv.Config.Handler = wallet
	srv.Start()
	defer srv.Close()
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(strings.Repeat("h", 32)+"\n"), 0o600))

	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--settle=false", "--packets", "400", "--users", "250", "--json")
	require.Equal(t, 0, code, errs)
	var demo demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &demo))
	id := demo.Campaign
	code, _, errs = run(t, nil, "settle", "--redis", r.Addr, "--webhook", url, "--webhook-secret-file", secretFile,
		"--campaigns", id, "--consumer", "cli-hook", "--drain")
	require.Equal(t, 0, code, errs)

	code, out, errs = run(t, nil, "reconcile", "--webhook", url, "--webhook-secret-file", secretFile, "--redis", r.Addr, id)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Reconcile "+id+" (settled) against "+name)
	require.Contains(t, out, "OK: Redis and the wallet agree to the cent")

	code, out, errs = run(t, nil, "reconcile", id, "--json", "--redis", r.Addr, "--webhook", url, "--webhook-secret-file", secretFile)
	require.Equal(t, 0, code, errs)
	var rep sinkReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, name, rep.Sink)
	require.True(t, rep.OK)
	require.EqualValues(t, 250, rep.GrantedLedger)
	require.Equal(t, demo.GrantedCents, rep.GrantedCentsLedger)
	require.Equal(t, demo.TotalCents-demo.GrantedCents, rep.RefundCents)

	for seq := range wallet.Grants(id) {
		require.True(t, wallet.Drop(id, seq))
		break
	}
	code, out, errs = run(t, nil, "reconcile", "--webhook", url, "--webhook-secret-file", secretFile, "--redis", r.Addr, "--campaign", id)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "grants: Redis granted 250 (")
	require.Contains(t, out, "the sink holds 249 (")
	require.Contains(t, errs, "differences")
}

func TestReconcileWebhookUsage(t *testing.T) {
	t.Parallel()
	hook := []string{"--webhook", "http://127.0.0.1:1/h", "--redis", "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"c1"}, hook...), "--webhook needs --webhook-secret-file"},
		{append([]string{"c1", "--webhook-secret-file", "f", "--ledger", "sqlite:x"}, hook...), "not both"},
		{append([]string{"--discount", "d1", "--webhook-secret-file", "f"}, hook...), "no discount campaign"},
		{append([]string{"--webhook-secret-file", "f"}, hook...), "--campaign"},
		{append([]string{"c1", "c2", "--webhook-secret-file", "f"}, hook...), `unexpected argument "c2"`},
		{append([]string{"c1", "--campaign", "c2", "--webhook-secret-file", "f"}, hook...), "give the campaign once"},
		{[]string{"c1", "--webhook", "http://127.0.0.1:1/h", "--webhook-secret-file", "f"}, "--redis is required"},
		{[]string{"c1", "--webhook", "http://127.0.0.1:1/h", "--webhook-secret-file", filepath.Join(t.TempDir(), "none"), "--redis", "127.0.0.1:1"}, "--webhook-secret-file"},
		{[]string{"--balances", "c1", "--ledger", "sqlite:x"}, "not both"},
	} {
		code, _, errs := run(t, nil, append([]string{"reconcile"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.want, "%v", tc.args)
	}
	code, _, errs := run(t, nil, "reconcile", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, errs, "hongbao reconcile --webhook URL --webhook-secret-file FILE --redis URL [--json] ID")
}
