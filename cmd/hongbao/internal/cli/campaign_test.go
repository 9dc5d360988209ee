package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
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
		{"close without an id", nil, append(key, "close"), "close: want a campaign id"},
		{"list with an id", nil, append(key, "list", "c1"), `list takes no operand, not "c1"`},
		{"a create flag on pause", nil, append(key, "pause", "c1", "--total", "1.00"), "--total is a flag of create, not of pause"},
		{"create without a spec", nil, append(key, "create"), "give --total and --count (a red packet rain), --budget and --quota"},
		{"create of both kinds", nil, append(key, "create", "--total", "1.00", "--budget", "1.00"), "give the flags of one (or --kind)"},
		{"create of a kind with the other's flag", nil, append(key, "--kind", "discount", "create", "--budget", "1.00", "--quota", "1", "--count", "2"),
			"--count is not a discount campaign's"},
		{"create without count", nil, append(key, "create", "--total", "1.00"), "needs --total and --count"},
		{"create with a bad amount", nil, append(key, "create", "--total", "1.005", "--count", "1"), "--total"},
		{"create of a spec the engine refuses", nil, append(key, "create", "--total", "0.01", "--count", "5"), "total"},
		{"create with a bad time", nil, append(key, "create", "--total", "1.00", "--count", "1", "--closes", "tomorrow"), "--closes: want an RFC 3339 time"},
		{"create with a time from now", nil, append(key, "create", "--total", "1.00", "--count", "1", "--opens", "+1h"), "--opens: want an RFC 3339 time"},
		{"create with a bad seed", nil, append(key, "create", "--total", "1.00", "--count", "1", "--seed", "-1"), "--seed"},
		{"create with a bad key", nil, append(key, "create", "--total", "1.00", "--count", "1", "--idempotency-key", "a b"), "--idempotency-key"},
		{"create with a short hold", nil, append(key, "create", "--budget", "1.00", "--quota", "1", "--hold", "1ms"), "hold"},
		{"create unlimited and limited", nil, append(key, "create", "--budget", "1.00", "--quota", "1", "--per-user-unlimited", "--per-user-count", "2"),
			"not both"},
		{"create from a missing file", nil, append(key, "create", "--spec", filepath.Join(dir, "nope.json")), "--spec"},
		{"create from a file that is no object", nil, append(key, "create", "--spec", writeFile(t, dir, "list.json", `[1]`)), "not a JSON object"},
		{"create from a file of no kind", nil, append(key, "create", "--spec", writeFile(t, dir, "shards.json", `{"shards":2}`)), "give --kind"},
		{"create from a file and flags", nil, append(key, "create", "--spec", writeFile(t, dir, "rain.json", `{"total":"1.00","count":1}`), "--shards", "2"),
			"not with --shards"},
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

// TestCampaignCreateListClose: against a running serve (settlement off,
// so a closed campaign stays listed), the command creates campaigns of
// both kinds from flags and from a file, a create run again with its key
// answers the same campaign, list pages through every campaign of both
// kinds (more than a page), and close closes one of each kind.
func TestCampaignCreateListClose(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--settle=false")...)
	key := []string{"--api", p.URL, "--admin-key-file", fx.adminFile}
	idOf := regexp.MustCompile(`campaign ([A-Za-z0-9_-]+):`)
	created := func(out string) string {
		t.Helper()
		m := idOf.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		return m[1]
	}

	closes := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code, out, errs := runCampaign(t, nil, append(key, "create", "--total", "10.00", "--count", "5", "--shards", "2",
		"--closes", closes, "--idempotency-key", "rain-1")...)
	require.Equal(t, 0, code, errs)
	rain := created(out)
	require.Contains(t, out, "red packet campaign "+rain+": open, 10.00 in 5 packets (double-average), 2 shards")
	require.Contains(t, out, "idempotency key rain-1")
	code, out, errs = runCampaign(t, nil, append(key, "create", "--total", "10.00", "--count", "5", "--shards", "2",
		"--closes", closes, "--idempotency-key", "rain-1", "--json")...)
	require.Equal(t, 0, code, errs)
	var c client.Campaign
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Equal(t, rain, c.ID, "the same key answers the same campaign")
	code, _, errs = runCampaign(t, nil, append(key, "create", "--total", "11.00", "--count", "5", "--idempotency-key", "rain-1")...)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "idempotency_mismatch")
	code, _, errs = runCampaign(t, nil, append(key, "create", "--total", "100000.00", "--count", "2000000")...)
	require.Equal(t, 1, code, "a spec beyond what serve takes is its refusal: %s", errs)
	require.Contains(t, errs, "invalid_request")

	code, out, errs = runCampaign(t, nil, append(key, "create", "--budget", "20.00", "--quota", "10", "--per-user-count", "2",
		"--hold", "2m", "--json")...)
	require.Equal(t, 0, code, errs)
	var d client.Discount
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.EqualValues(t, 2000, d.BudgetCents)
	require.Equal(t, 2, d.PerUserCount)
	require.Equal(t, client.Duration(2*time.Minute), d.Hold)

	dir := t.TempDir()
	code, out, errs = runCampaign(t, nil, append(key, "create", "--spec", writeFile(t, dir, "d.json", `{"budget":"5.00","quota":5,"per_user_unlimited":true}`))...)
	require.Equal(t, 0, code, errs)
	fileDiscount := created(out)
	require.Contains(t, out, "discount campaign "+fileDiscount+": open, 5.00 over 5 discounts of 0.01 to 5.00, no per-user limit, hold 5m0s, 1 shard")
	code, out, errs = runCampaign(t, nil, append(key, "--kind", "red-packet", "create", "--spec", writeFile(t, dir, "r.json", `{"total_cents":300,"count":3}`))...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "3.00 in 3 packets")

	// More than a page of campaigns: list reads them all.
	api := fx.api(t, p.URL)
	for i := 0; i < client.MaxListPage; i++ {
		api.create(t, p.URL, `{"total":"0.01","count":1}`)
	}
	code, out, errs = runCampaign(t, nil, append(key, "close", rain)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "red packet campaign "+rain+": closed (operator), not paused")
	code, out, errs = runCampaign(t, nil, append(key, "--kind", "discount", "close", d.ID)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "discount campaign "+d.ID+": closed (operator)")

	code, out, errs = runCampaign(t, nil, append(key, "list")...)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, `(?m)^KIND +ID +STATE +PAUSED +LEFT +AMOUNT LEFT +GIVEN +CLOSES$`, out)
	require.Regexp(t, `(?m)^red packet +`+rain+` +closed \(operator\) +no +5 of 5 +10\.00 of 10\.00 +0 granted, 0\.00 `, out)
	require.Regexp(t, `(?m)^discount +`+d.ID+` +closed \(operator\) +no +10 of 10 +20\.00 of 20\.00 +0 confirmed, 0\.00; 0 reserved `, out)
	require.Regexp(t, `(?m)^discount +`+fileDiscount+` +open `, out)
	require.Contains(t, out, fmt.Sprintf("%d campaigns not yet settled", client.MaxListPage+4))

	code, out, errs = runCampaign(t, nil, append(key, "list", "--json")...)
	require.Equal(t, 0, code, errs)
	var l struct {
		Campaigns []client.CampaignStatus `json:"campaigns"`
		Discounts []client.DiscountStatus `json:"discounts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Len(t, l.Campaigns, client.MaxListPage+2, "every page")
	require.Len(t, l.Discounts, 2)
	code, out, errs = runCampaign(t, nil, append(key, "--kind", "discount", "list", "--json")...)
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, `"campaigns"`)
	require.Contains(t, out, fileDiscount)

	code, _, errs = runCampaign(t, nil, append(key, "close", "cnosuchcampaign")...)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "no such campaign")
}
