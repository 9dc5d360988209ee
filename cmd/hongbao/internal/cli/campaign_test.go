package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// runCampaign runs "hongbao campaign args..." in-process, its calls to
// serve checked against openapi.json.
func runCampaign(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"campaign"}, args...), &IO{
		Stdout: &out, Stderr: &errb,
		Getenv:     func(k string) string { return env[k] },
		HTTPClient: openapitest.Client(t),
	})
	return code, out.String(), errb.String()
}

// TestCampaignCommand: against a running serve, the command pauses and
// resumes, blocks, lists and unblocks, on a red packet campaign and on a
// discount campaign, and each takes effect on the next grab (reserve).
func TestCampaignCommand(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1")...)
	api := fx.api(t, p.URL)
	key := []string{"--api", p.URL, "--admin-key-file", fx.adminFile}

	t.Run("red packet", func(t *testing.T) {
		id := api.create(t, p.URL, `{"total":"10.00","count":5,"shards":2}`)
		grab := func(user string) string {
			t.Helper()
			code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, user), "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, "%v", m)
			return m["outcome"].(string)
		}
		code, out, errs := runCampaign(t, nil, append(key, "status", id)...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "red packet campaign "+id+": open, not paused, 0 users blocked")
		require.Contains(t, out, "granted 0 of 5 packets (0.00 of 10.00)")

		code, out, errs = runCampaign(t, nil, append(key, "pause", id, "--json")...)
		require.Equal(t, 0, code, errs)
		var st client.CampaignStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.True(t, st.Paused)
		require.Equal(t, 2, st.PausedShards)
		require.Equal(t, client.Paused, grab("ann"))

		code, out, errs = runCampaign(t, nil, append(key, "resume", id)...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "open, not paused")
		require.Equal(t, client.Granted, grab("ann"))

		// The key from the environment, the flags too; flags before the
		// operands.
		env := map[string]string{"HONGBAO_ADMIN_KEY": readKey(t, fx.adminFile), "HONGBAO_API": p.URL, "HONGBAO_KIND": "red-packet"}
		code, out, errs = runCampaign(t, env, "block", id, "bob", "cy")
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "blocked 2 users, 2 of them not blocked before")
		require.Equal(t, client.Blocked, grab("bob"))
		require.Equal(t, client.Blocked, grab("cy"))

		code, out, errs = runCampaign(t, nil, append(key, "blocked", id)...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "2 users blocked")
		require.Regexp(t, `(?m)^  bob +since 20`, out)

		code, out, errs = runCampaign(t, env, "--json", "unblock", id, "bob", "dee")
		require.Equal(t, 0, code, errs)
		var ch client.BlockChange
		require.NoError(t, json.Unmarshal([]byte(out), &ch))
		require.Equal(t, 1, ch.Removed)
		require.Equal(t, client.Granted, grab("bob"))
		require.Equal(t, client.Blocked, grab("cy"))

		code, out, errs = runCampaign(t, nil, append(key, "blocked", id, "--json")...)
		require.Equal(t, 0, code, errs)
		var list client.BlockedList
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		require.Len(t, list.Users, 1)
		require.Equal(t, "cy", list.Users[0].User)

		// The wrong kind named: no such discount campaign.
		code, _, errs = runCampaign(t, nil, append(key, "--kind", "discount", "pause", id)...)
		require.Equal(t, 1, code, errs)
		require.Contains(t, errs, "no such discount campaign")
	})

	t.Run("discount", func(t *testing.T) {
		code, m, err := api.call("POST", p.URL+"/v1/discounts", api.admin, `{"budget":"10.00","quota":10}`)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, code, "%v", m)
		id := m["id"].(string)
		order := 0
		reserve := func(user string) string {
			t.Helper()
			order++
			body := fmt.Sprintf(`{"user_id":%q,"order_id":"o-%d","order_amount":"100.00"}`, user, order)
			code, m, err := api.call("POST", p.URL+"/v1/discounts/"+id+"/reserve", api.admin, body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, "%v", m)
			return m["outcome"].(string)
		}
		code, out, errs := runCampaign(t, nil, append(key, "pause", id)...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "discount campaign "+id+": open, paused, 0 users blocked")
		require.Equal(t, client.Paused, reserve("ann"))
		code, _, errs = runCampaign(t, nil, append(key, "resume", id)...)
		require.Equal(t, 0, code, errs)
		require.Equal(t, client.Reserved, reserve("ann"))

		code, out, errs = runCampaign(t, nil, append(key, "block", id, "bob")...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "blocked 1 users, 1 of them not blocked before")
		require.Equal(t, client.Blocked, reserve("bob"))
		code, out, errs = runCampaign(t, nil, append(key, "blocked", id)...)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, "discount campaign "+id+": 1 users blocked")
		require.Contains(t, out, "bob")
		code, _, errs = runCampaign(t, nil, append(key, "unblock", id, "bob")...)
		require.Equal(t, 0, code, errs)
		require.Equal(t, client.Reserved, reserve("bob"))

		code, out, errs = runCampaign(t, nil, append(key, "status", id, "--json")...)
		require.Equal(t, 0, code, errs)
		var st client.DiscountStatus
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, 2, st.ReservedCount)
		require.False(t, st.Paused)
		require.Zero(t, st.BlockedUsers)
	})

	t.Run("API errors exit 1", func(t *testing.T) {
		code, _, errs := runCampaign(t, nil, append(key, "pause", "cnosuchcampaign")...)
		require.Equal(t, 1, code, errs)
		require.Contains(t, errs, "no such campaign, neither a red packet nor a discount campaign")
		wrong := writeSecret(t, t.TempDir(), "other.key")
		code, _, errs = runCampaign(t, nil, "--api", p.URL, "--admin-key-file", wrong, "status", "c1")
		require.Equal(t, 1, code, errs)
		require.Contains(t, errs, "unauthorized")
	})
}

func readKey(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestCampaignCommandBadInput: bad input exits 2 with a message, before
// any call (no serve runs here), and never shows a key.
func TestCampaignCommandBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := writeSecret(t, dir, "admin.key")
	key := []string{"--api", "http://127.0.0.1:1", "--admin-key-file", keyFile}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no action", nil, key, "want an action"},
		{"unknown action", nil, append(key, "delete", "c1"), `unknown action "delete"`},
		{"missing id", nil, append(key, "pause"), "pause: want a campaign id"},
		{"bad id", nil, append(key, "pause", "a b"), "campaign"},
		{"block without users", nil, append(key, "block", "c1"), "give 1 to 1000 user ids"},
		{"bad user", nil, append(key, "unblock", "c1", "a b"), "user"},
		{"users on a pause", nil, append(key, "pause", "c1", "ann"), `pause takes only a campaign id, not "ann"`},
		{"bad kind", nil, append(key, "--kind", "coupon", "status", "c1"), "--kind must be"},
		{"bad timeout", nil, append(key, "--timeout", "0s", "status", "c1"), "--timeout must be positive"},
		{"bad api", nil, []string{"--api", "ftp://x", "--admin-key-file", keyFile, "status", "c1"}, "--api"},
		{"no key", nil, []string{"--data-dir", filepath.Join(dir, "none"), "status", "c1"}, "no admin key: give --admin-key-file FILE or set HONGBAO_ADMIN_KEY"},
		{"short key in env", map[string]string{"HONGBAO_ADMIN_KEY": "sekrit-short"}, []string{"status", "c1"}, "HONGBAO_ADMIN_KEY: the key is 12 bytes"},
		{"missing key file", nil, []string{"--admin-key-file", filepath.Join(dir, "nope"), "status", "c1"}, "--admin-key-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCampaign(t, tc.env, tc.args...)
			require.Equal(t, 2, code, "%s %s", out, errs)
			require.Contains(t, errs, tc.want)
			require.NotContains(t, errs, "sekrit")
			require.NotContains(t, errs, readKey(t, keyFile))
		})
	}
	// -h prints the actions and exits 0.
	code, _, errs := runCampaign(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errs, "block ID USER...")
	// An unreachable serve is not bad input: 1.
	code, _, errs = runCampaign(t, nil, append(key, "--timeout", "2s", "status", "c1")...)
	require.Equal(t, 1, code, errs)
}

// TestParseOperands: flags and operands in any order; "--" ends the
// flags, so an operand may start with a dash; the environment fills the
// flags not given.
func TestParseOperands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, ops []string
		json      bool
		api       string
	}{
		{[]string{"block", "c1", "ann"}, []string{"block", "c1", "ann"}, false, "env"},
		{[]string{"--json", "block", "c1", "--api", "u", "ann"}, []string{"block", "c1", "ann"}, true, "u"},
		{[]string{"block", "c1", "--", "-ann", "--json"}, []string{"block", "c1", "-ann", "--json"}, false, "env"},
		{[]string{"--", "--json"}, []string{"--json"}, false, "env"},
		{nil, nil, false, "env"},
	} {
		env := &IO{Getenv: func(k string) string { return map[string]string{"HONGBAO_API": "env"}[k] }}
		fs := newFlagSet("t", &IO{Stderr: &bytes.Buffer{}})
		asJSON := fs.Bool("json", false, "")
		api := fs.String("api", "", "")
		ops, err := parseOperands(fs, env, tc.args)
		require.NoError(t, err, "%q", tc.args)
		require.Equal(t, tc.ops, ops, "%q", tc.args)
		require.Equal(t, tc.json, *asJSON, "%q", tc.args)
		require.Equal(t, tc.api, *api, "%q", tc.args)
	}
}

// TestCampaignPrintsOvertaken: the answer of a pause or resume that a
// later one overtook says so, and what the campaign is now.
func TestCampaignPrintsOvertaken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		action string
		out    any
		want   string // the second line; "" for none about it
	}{
		{"resume", &client.CampaignStatus{Campaign: client.Campaign{State: "open", Shards: 2}, Paused: true, PausedShards: 2, Overtaken: true},
			"  overtaken: a pause or resume that started after this resume wrote first; the campaign is paused, as that one wants\n"},
		{"pause", &client.DiscountStatus{Discount: client.Discount{State: "open", Shards: 2}, Overtaken: true},
			"  overtaken: a pause or resume that started after this pause wrote first; the campaign is not paused, as that one wants\n"},
		{"pause", &client.CampaignStatus{Campaign: client.Campaign{State: "open", Shards: 2}, Paused: true, PausedShards: 2}, ""},
	} {
		var out bytes.Buffer
		cmd := &campaignCmd{base: base{env: &IO{Stdout: &out}}, action: c.action, id: "c1"}
		cmd.print("red packet", c.out)
		lines := strings.SplitAfter(out.String(), "\n")
		if c.want == "" {
			require.NotContains(t, out.String(), "overtaken")
			continue
		}
		require.Equal(t, c.want, lines[1], out.String())
	}
}
