package web_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/browsertest"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/split"
)

// The browser tests run the real service (httpapi on a real Redis) behind
// a loopback HTTP server, and drive its pages in headless Chromium: one
// browser for the test binary, a fresh tab and browser context per test.
// Screenshots go to browsertest.ScreenshotDir().

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, browsertest.Close)) }

var (
	userSecret = httpapi.Secret{Key: []byte("user-secret-of-the-browser-tests-0123456789")}
	adminKey   = "admin-key-of-the-browser-tests-0123456789abc"
)

// site is a running service with the pages.
type site struct {
	URL    string
	Engine *hongbao.Engine
	Server *httpapi.Server
	log    *lockedBuffer

	mu   sync.Mutex
	demo string // the demo's current campaign
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newSite serves the API and the pages, in demo mode when demo is true.
// At the end of the test the admin key must not be in its log.
func newSite(t *testing.T, demo bool) *site { t.Helper(); return newSiteWith(t, demo, nil) }

// newSiteWith is newSite with an engine that records its campaigns in
// ledger l (nil: none).
func newSiteWith(t *testing.T, demo bool, l ledger.Ledger) *site {
	t.Helper()
	r := testenv.SharedRedis(t)
	ecfg := hongbao.Config{Redis: r.Client}
	if l != nil {
		ecfg.Packets = l
	}
	eng, err := hongbao.New(ecfg)
	require.NoError(t, err)
	s := &site{Engine: eng, log: &lockedBuffer{}}
	cfg := httpapi.Config{
		Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""), UserSecrets: []httpapi.Secret{userSecret}, AdminKeys: [][]byte{[]byte(adminKey)},
		Logger:       slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LiveInterval: 150 * time.Millisecond,
		UserRate:     -1,
	}
	if os.Getenv("HONGBAO_SCREENSHOT_RAIN") != "" {
		cfg.LiveInterval = time.Second // as served: one reading a second
	}
	if demo {
		cfg.Demo = &httpapi.Demo{Campaign: func() string { s.mu.Lock(); defer s.mu.Unlock(); return s.demo }}
	}
	s.Server, err = httpapi.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(s.Server)
	s.URL = hs.URL
	t.Cleanup(func() {
		require.NotContains(t, s.log.String(), adminKey, "the admin key reached the log")
	})
	t.Cleanup(hs.Close)
	t.Cleanup(s.Server.Stopping) // ends the live views first, so Close has nothing to wait for
	return s
}

// create makes a campaign through the engine.
func (s *site) create(t *testing.T, total int64, count int, alg split.Algorithm) string {
	t.Helper()
	c, err := s.Engine.Create(context.Background(), hongbao.Spec{ID: testenv.UniqueID(t), Total: total, Count: count, Split: alg})
	require.NoError(t, err)
	s.mu.Lock()
	s.demo = c.ID
	s.mu.Unlock()
	return c.ID
}

// grab grabs through the API as user, and returns the outcome.
func (s *site) grab(t *testing.T, id, user string) string {
	t.Helper()
	tok, err := httpapi.MintToken(userSecret, user, time.Hour, time.Now())
	require.NoError(t, err)
	req, err := http.NewRequest("POST", s.URL+"/v1/campaigns/"+id+"/grab", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", b.Bytes())
	_, out, _ := strings.Cut(b.String(), `"outcome":"`)
	out, _, _ = strings.Cut(out, `"`)
	return out
}

// js evaluates expr in the tab.
func js[T any](t *testing.T, tab *browsertest.Tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// waitFor waits until expr is true in the page, polled in the page at
// each frame, up to a deadline.
func waitFor(t *testing.T, tab *browsertest.Tab, expr, what string) {
	t.Helper()
	_, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(45*time.Second)))
	require.NoError(t, err, "waiting for %s (%s)", what, expr)
}

func do(t *testing.T, tab *browsertest.Tab, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(tab.Ctx, steps...))
}

// clickRow clicks the element sel names in a list the console redraws
// while it runs (each refresh replaces its rows): a click whose node was
// replaced between finding it and pressing it is tried again on the new
// one, which stands at the same place.
func clickRow(t *testing.T, tab *browsertest.Tab, sel string) {
	t.Helper()
	for try := 1; ; try++ {
		err := chromedp.Do(tab.Ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil || try == 5 || !strings.Contains(err.Error(), "Could not find node") {
			require.NoError(t, err, "click %s", sel)
			return
		}
	}
}

// setValue sets the value of the field with the given id, as a paste
// would (chromedp's SetValue cannot set an empty value).
func setValue(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).value = %q`, id, v))
}

// phone is a 390x844 phone screen with touch, at twice the pixels (the
// iPhone 12 has three; two keep the screenshots small).
func phone() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)
}

func desktop() chromedp.Action[chromedp.Void] { return chromedp.EmulateViewport(1280, 860) }

// noHorizontalScroll checks that the page is no wider than the screen.
func noHorizontalScroll(t *testing.T, tab *browsertest.Tab, what string) {
	t.Helper()
	w := js[[]float64](t, tab, `[document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]`)
	require.LessOrEqual(t, w[0], w[2], "%s: the page scrolls sideways (%v)", what, w)
	require.LessOrEqual(t, w[1], w[2], "%s: the body scrolls sideways (%v)", what, w)
}

// signIn opens the console and signs in with key; it does not wait for
// the outcome.
func signIn(t *testing.T, tab *browsertest.Tab, url, key string) {
	t.Helper()
	do(t, tab,
		chromedp.Navigate(url+"/console/"),
		chromedp.WaitVisible(chromedp.ID("login-key")),
		chromedp.SendKeys(chromedp.ID("login-key"), key),
		chromedp.Click(chromedp.CSS("#login-form button")),
	)
}

// tap taps a packet falling in the middle of the screen, again until the
// page has shown n answers (a tap that comes while a grab is on its way
// is ignored by the page, so a retried tap never doubles an answer it
// waits for).
func tap(t *testing.T, tab *browsertest.Tab, n int, touch bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		waitFor(t, tab, `document.querySelectorAll('.packet:not(.caught)').length > 0`, "a falling packet")
		xy := js[[]float64](t, tab, `(() => {
			for (const p of document.querySelectorAll('.packet:not(.caught)')) {
				const r = p.getBoundingClientRect();
				if (r.top > 140 && r.bottom < innerHeight - 180) return [r.left + r.width / 2, r.top + r.height / 2];
			}
			return [];
		})()`)
		if len(xy) == 2 {
			if touch {
				do(t, tab, chromedp.TapXY(xy[0], xy[1]))
			} else {
				do(t, tab, chromedp.MouseClickXY(xy[0], xy[1]))
			}
			ok, _ := chromedp.Run(tab.Ctx, chromedp.Poll[bool](
				fmt.Sprintf(`Number(document.getElementById('result').dataset.answers || 0) >= %d`, n),
				chromedp.WithPollingTimeout(3*time.Second)))
			if ok {
				return
			}
			// One evaluation reads both, so the answer cannot land between
			// the two reads (the page runs no script during it).
			switch js[string](t, tab, fmt.Sprintf(`(() => { const r = document.getElementById('result');
				return Number(r.dataset.answers || 0) >= %d ? 'answered' : r.dataset.outcome === 'opening' ? 'in flight' : 'missed'; })()`, n)) {
			case "answered":
				return // answered just after the poll gave up
			case "in flight":
				// The tap caught a packet and its grab is still in flight
				// (a slow machine): wait for its answer rather than tap
				// again, or the next grab would be the one shown.
				waitFor(t, tab, fmt.Sprintf(`Number(document.getElementById('result').dataset.answers || 0) >= %d`, n), "the answer to the tap")
				return
			}
			continue // the packet fell away under the finger: another one
		}
		waitFor(t, tab, `[...document.querySelectorAll('.packet:not(.caught)')].some(p => {
			const r = p.getBoundingClientRect(); return r.top > 140 && r.bottom < innerHeight - 180; })`, "a packet mid-screen")
	}
	t.Fatalf("no answer %d after tapping packets for 60s", n)
}

// answer is what the play page shows of its last answer.
type answer struct {
	Outcome, Amount, Cents, Packet, User string
}

func shown(t *testing.T, tab *browsertest.Tab) answer {
	t.Helper()
	v := js[[]string](t, tab, `(() => { const r = document.getElementById('result');
		return [r.dataset.outcome, document.getElementById('result-amount').textContent,
			document.getElementById('result-amount').dataset.cents || '', r.dataset.packet || '',
			document.getElementById('user').textContent]; })()`)
	return answer{v[0], v[1], v[2], v[3], v[4]}
}

// TestPlayOnPhone: on a phone, with touch, the demo page gets a player, a
// tap grabs through the API and shows the amount the engine granted, a
// second tap shows the same packet again; nothing scrolls sideways.
func TestPlayOnPhone(t *testing.T) {
	t.Parallel()
	s := newSite(t, true)
	id := s.create(t, 10000, 50, "")
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, phone(), chromedp.Navigate(s.URL+"/play/"+id))
	waitFor(t, tab, `document.getElementById('user').textContent.startsWith('demo-')`, "a demo player")
	noHorizontalScroll(t, tab, "play")

	tap(t, tab, 1, true)
	first := shown(t, tab)
	require.Equal(t, "granted", first.Outcome, "%+v", first)
	held, err := s.Engine.Held(context.Background(), id, first.User)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(held.Cents, 10), first.Cents)
	require.Equal(t, hongbao.FormatCents(held.Cents), first.Amount)
	require.Equal(t, held.PacketID(), first.Packet)
	settled(t, tab, "#result")
	tab.Screenshot(t, "play-phone")

	tap(t, tab, 2, true)
	second := shown(t, tab)
	require.Equal(t, "already_granted", second.Outcome, "%+v", second)
	require.Equal(t, first.Packet, second.Packet, "the same packet")
	require.Equal(t, first.Cents, second.Cents)
	require.Equal(t, first.Amount, js[string](t, tab, `document.getElementById('mine-amount').textContent`))
	st, err := s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.GrantedCount, "one packet for the player")
	noHorizontalScroll(t, tab, "play after two taps")
}

// settled waits until no animation runs in the element sel, for a
// screenshot that shows it as people see it.
func settled(t *testing.T, tab *browsertest.Tab, sel string) {
	t.Helper()
	waitFor(t, tab, `document.querySelector('`+sel+`').getAnimations({subtree: true}).every(a => a.playState !== 'running')`, sel+" at rest")
}

// TestPlayWithTokenInFragment: without the demo, the page asks for a
// token; given one in the URL fragment it plays as that user and takes
// the token out of the address bar.
func TestPlayWithTokenInFragment(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 50000, 100, split.LineCut)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop(), chromedp.Navigate(s.URL+"/play/"+id))
	waitFor(t, tab, `!document.getElementById('gate').hidden`, "the page to ask for a token")
	require.Zero(t, js[int](t, tab, `document.querySelectorAll('.packet').length`), "no rain without a player")

	tok, err := httpapi.MintToken(userSecret, "fragment-user", time.Hour, time.Now())
	require.NoError(t, err)
	do(t, tab, chromedp.Navigate(s.URL+"/play/"+id+"#token="+tok), chromedp.Reload())
	waitFor(t, tab, `document.getElementById('user').textContent === 'fragment-user'`, "the player of the token")
	require.NotContains(t, js[string](t, tab, `location.href`), tok, "the token stays in the address bar")
	require.True(t, js[bool](t, tab, `document.getElementById('gate').hidden`))
	tap(t, tab, 1, false)
	a := shown(t, tab)
	require.Equal(t, "granted", a.Outcome)
	held, err := s.Engine.Held(context.Background(), id, "fragment-user")
	require.NoError(t, err)
	require.Equal(t, held.PacketID(), a.Packet)
	settled(t, tab, "#result")
	tab.Screenshot(t, "play-desktop")
}

// TestPlayChecksMyPacket: the play page shows the root the campaign
// committed to, and, once the player holds a packet, checks it in the
// browser against that root with the proof the API serves.
func TestPlayChecksMyPacket(t *testing.T) {
	t.Parallel()
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	s := newSiteWith(t, false, l)
	id := s.create(t, 50000, 100, split.LineCut)
	body, err := s.Engine.Commitment(context.Background(), id)
	require.NoError(t, err)
	var c struct{ Root string }
	require.NoError(t, json.Unmarshal(body, &c))
	tab := browsertest.NewTab(t, 3*time.Minute)
	tok, err := httpapi.MintToken(userSecret, "checker", time.Hour, time.Now())
	require.NoError(t, err)
	do(t, tab, desktop(), chromedp.Navigate(s.URL+"/play/"+id+"#token="+tok))
	waitFor(t, tab, `!document.getElementById('fair').hidden`, "the commitment")
	require.Equal(t, c.Root, js[string](t, tab, `document.getElementById('fair-root').title`))
	tap(t, tab, 1, false)
	require.Equal(t, "granted", shown(t, tab).Outcome)
	waitFor(t, tab, `!document.getElementById('fair-check').hidden`, "the check button")
	do(t, tab, chromedp.Click(chromedp.CSS("#fair-check")))
	waitFor(t, tab, `!!document.getElementById('fair-result').dataset.verdict`, "the check")
	require.Equal(t, "holds", js[string](t, tab, `document.getElementById('fair-result').dataset.verdict`),
		js[string](t, tab, `document.getElementById('fair-result').textContent`))

	// An operator's tampered answers, each a valid inclusion path to the
	// root it goes with: the page holds the proof to the committed count
	// and to leaf seq-1, not only to the root. The answers are swapped in
	// the page's fetch, and the page loaded again (it finds the packet
	// held).
	held, err := s.Engine.Held(context.Background(), id, "checker")
	require.NoError(t, err)
	_, err = chromedp.Call(tab.Ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fakeFairFetch})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		order   []int64 // the seqs at leaves 0..n-1
		count   int64   // the count the commitment states
		verdict string
	}{
		{"a tree in seq order (the check of the swap itself)", []int64{1, 2, 3, 4}, 4, "holds"},
		{"a tree of one packet more than committed", []int64{1, 2, 3, 4, 5}, 4, "fails"},
		{"packet 1 at leaf 1", []int64{2, 1, 3, 4}, 4, "fails"},
	} {
		c, p := craftedProof(t, id, tc.order, held.Cents)
		c["count"] = tc.count
		fake, err := json.Marshal(map[string]any{"commitment": c, "proof": p})
		require.NoError(t, err)
		require.True(t, js[bool](t, tab, fmt.Sprintf(`(sessionStorage.setItem('fake-fair', %q), true)`, fake)))
		do(t, tab, chromedp.Reload())
		waitFor(t, tab, fmt.Sprintf(`document.getElementById('fair-root').title === %q`, c["root"]), "the swapped commitment")
		waitFor(t, tab, `!document.getElementById('fair-check').hidden`, "the check button")
		do(t, tab, chromedp.Click(chromedp.CSS("#fair-check")))
		waitFor(t, tab, `!!document.getElementById('fair-result').dataset.verdict`, "the check")
		require.Equal(t, tc.verdict, js[string](t, tab, `document.getElementById('fair-result').dataset.verdict`),
			"%s: %s", tc.name, js[string](t, tab, `document.getElementById('fair-result').textContent`))
	}
}

// fakeFairFetch answers the commitment and proof routes in the page with
// sessionStorage's "fake-fair" ({commitment, proof}) when it is set.
const fakeFairFetch = `(() => {
  const real = window.fetch;
  window.fetch = function (input, init) {
    const fake = JSON.parse(sessionStorage.getItem('fake-fair') || 'null');
    const url = String(input && input.url ? input.url : input);
    if (fake) {
      const body = url.endsWith('/commitment') ? fake.commitment : url.endsWith('/grants/me/proof') ? fake.proof : null;
      if (body) return Promise.resolve(new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } }));
    }
    return real.apply(this, arguments);
  };
})();`

// craftedProof builds, with package fairness's hashes, a tree of campaign
// whose leaf i is packet order[i] (packet 1 of cents held, the others of
// 1 cent), and returns its commitment (root) and the proof of packet 1:
// a valid inclusion path, at the leaf where order put it.
func craftedProof(t *testing.T, campaign string, order []int64, held int64) (map[string]any, fairness.Proof) {
	t.Helper()
	salt := func(seq int64) []byte { return bytes.Repeat([]byte{byte(seq)}, fairness.SaltSize) }
	leaves := make([]fairness.Hash, len(order))
	at := -1
	for i, seq := range order {
		cents := int64(1)
		if seq == 1 {
			cents, at = held, i
		}
		leaves[i] = fairness.LeafHash(fairness.Leaf(campaign, seq, cents, salt(seq)))
	}
	var hash func(ls []fairness.Hash) fairness.Hash
	var path func(ls []fairness.Hash, i int) []fairness.Hash
	split := func(n int) int { // the largest power of two below n
		k := 1
		for k*2 < n {
			k *= 2
		}
		return k
	}
	hash = func(ls []fairness.Hash) fairness.Hash {
		if len(ls) == 1 {
			return ls[0]
		}
		k := split(len(ls))
		return fairness.NodeHash(hash(ls[:k]), hash(ls[k:]))
	}
	path = func(ls []fairness.Hash, i int) []fairness.Hash {
		if len(ls) == 1 {
			return nil
		}
		k := split(len(ls))
		if i < k {
			return append(path(ls[:k], i), hash(ls[k:]))
		}
		return append(path(ls[k:], i-k), hash(ls[:k]))
	}
	root := hash(leaves)
	p := fairness.Proof{PacketID: campaign + "/1", Seq: 1, Cents: held, Salt: hex.EncodeToString(salt(1)),
		LeafIndex: int64(at), TreeSize: int64(len(order)), Root: root.String()}
	for _, h := range path(leaves, at) {
		p.Path = append(p.Path, h.String())
	}
	got, err := fairness.RootFromPath(p.LeafIndex, p.TreeSize, leaves[at], path(leaves, at))
	require.NoError(t, err)
	require.Equal(t, root, got, "a valid path")
	return map[string]any{"campaign_id": campaign, "scheme": fairness.Scheme, "root": root.String()}, p
}

// TestConsoleShowsCommitment: a campaign's live page shows the root it
// committed to and the link to its draw log.
func TestConsoleShowsCommitment(t *testing.T) {
	t.Parallel()
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	s := newSiteWith(t, false, l)
	id := s.create(t, 5000, 10, split.LineCut)
	body, err := s.Engine.Commitment(context.Background(), id)
	require.NoError(t, err)
	var c struct{ Root string }
	require.NoError(t, json.Unmarshal(body, &c))
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	consoleDetail(t, tab, s, id)
	waitFor(t, tab, `!document.getElementById('d-fair').hidden`, "the commitment")
	require.Equal(t, c.Root, js[string](t, tab, `document.getElementById('d-root').textContent`))
	require.Equal(t, "draw log", js[string](t, tab, `document.getElementById('d-drawlog').textContent`))
}

// consoleDetail signs in and opens campaign id's live page.
func consoleDetail(t *testing.T, tab *browsertest.Tab, s *site, id string) {
	t.Helper()
	signIn(t, tab, s.URL, adminKey)
	waitFor(t, tab, `!!document.querySelector('#list-body tr[data-campaign="`+id+`"]')`, "the campaign in the list")
	clickRow(t, tab, `#list-body tr[data-campaign="`+id+`"] a`)
	waitFor(t, tab, `document.getElementById('conn').textContent === 'Live'`, "the live view")
}

// leftPackets is the "packets left" the console shows.
const leftPackets = `Number(document.querySelector('#panel-left .stat-value.big')?.dataset.value)`

// TestConsoleFollowsRain: the console's numbers move while the test rains
// on the campaign in steps, through the API: packets left, the outcome
// counts, the histogram and the rates; then it shows the sold out
// campaign.
func TestConsoleFollowsRain(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 20000, 200, split.DoubleAverage)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	consoleDetail(t, tab, s, id)
	waitFor(t, tab, leftPackets+` === 200`, "200 packets left")
	require.Zero(t, js[int](t, tab, `document.querySelectorAll('.hist-bar').length`))

	// The rain comes in steps, and the page must show each one. With
	// HONGBAO_SCREENSHOT_RAIN (a duration; make screenshots sets it) it is
	// spread over that time, for a screenshot with a rate to show.
	pace, _ := time.ParseDuration(os.Getenv("HONGBAO_SCREENSHOT_RAIN"))
	tick := time.NewTicker(max(pace/200, time.Microsecond))
	defer tick.Stop()
	user := 0
	for step := 1; step <= 5; step++ {
		for i := 0; i < 40; i++ {
			user++
			require.Equal(t, "granted", s.grab(t, id, fmt.Sprint("rain-", user)))
			if pace > 0 {
				<-tick.C
			}
			if step == 4 && i == 20 { // in the middle of the rain
				settled(t, tab, "#panels")
				tab.Screenshot(t, "console-desktop")
			}
		}
		waitFor(t, tab, fmt.Sprintf(`%s === %d`, leftPackets, 200-40*step), fmt.Sprint("the console after step ", step))
		waitFor(t, tab, fmt.Sprintf(`document.getElementById('outcome-granted').dataset.value === '%d'`, 40*step), "the granted count")
	}
	for i := 0; i < 30; i++ {
		user++
		require.Equal(t, "sold_out", s.grab(t, id, fmt.Sprint("rain-", user)))
	}
	require.Equal(t, "already_granted", s.grab(t, id, "rain-1"))
	waitFor(t, tab, `document.getElementById('outcome-sold_out').dataset.value === '30'`, "the sold out count")
	waitFor(t, tab, `document.getElementById('outcome-already_granted').dataset.value === '1'`, "the already count")
	waitFor(t, tab, `document.getElementById('d-state').textContent === 'closed'`, "the state closed")
	bars := js[[]int](t, tab, `[...document.querySelectorAll('.hist-bar')].map(b => Number(b.dataset.count))`)
	require.NotEmpty(t, bars)
	sum := 0
	for _, b := range bars {
		sum += b
	}
	require.Equal(t, 200, sum, "the histogram counts every packet granted")
	require.Greater(t, js[int](t, tab, `document.querySelectorAll('#panel-rates polyline').length`), 0)
	require.Greater(t, js[float64](t, tab, `Math.max(...[...document.querySelectorAll('#panel-rates polyline.series-grants')].flatMap(l => l.getAttribute('points').split(' ').map(p => 160 - Number(p.split(',')[1]))))`), 2.0,
		"the grants line rose above zero")
	require.Equal(t, "disabled", js[string](t, tab, `document.getElementById('d-close').disabled ? 'disabled' : 'enabled'`))
}

// TestConsoleRefusesWrongKey: a wrong key is refused and kept nowhere; the
// right one is kept in the tab's session storage only, never in the URL.
func TestConsoleRefusesWrongKey(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	wrong := "not-the-admin-key-0123456789abcdefghij"
	signIn(t, tab, s.URL, wrong)
	waitFor(t, tab, `document.getElementById('login-error').textContent === 'That admin key was refused.'`, "the refusal")
	require.False(t, js[bool](t, tab, `document.getElementById('view-login').hidden`))
	require.True(t, js[bool](t, tab, `document.getElementById('view-list').hidden`))
	require.Zero(t, js[int](t, tab, `sessionStorage.length + localStorage.length`), "a refused key is not kept")
	require.Empty(t, js[string](t, tab, `document.cookie`))

	signIn(t, tab, s.URL, adminKey) // a new page load: the field is empty
	waitFor(t, tab, `!document.getElementById('view-list').hidden`, "the campaign list")
	require.Equal(t, adminKey, js[string](t, tab, `sessionStorage.getItem('hongbao.console.key')`))
	require.NotContains(t, js[string](t, tab, `location.href`), adminKey)
	require.Empty(t, js[string](t, tab, `document.getElementById('login-key').value`), "the field is emptied")
	require.Empty(t, js[string](t, tab, `document.cookie`))
	do(t, tab, chromedp.Click(chromedp.ID("signout")))
	waitFor(t, tab, `!document.getElementById('view-login').hidden`, "signed out")
	require.Zero(t, js[int](t, tab, `sessionStorage.length`))
}

// TestConsoleCloses: closing from the console (press, then confirm)
// closes the campaign in the engine, and the page shows it.
func TestConsoleCloses(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 1000, 10, split.Fixed)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	consoleDetail(t, tab, s, id)
	do(t, tab, chromedp.Click(chromedp.ID("d-close")))
	waitFor(t, tab, `document.getElementById('d-close').textContent === 'Confirm close'`, "the confirmation")
	st, err := s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateOpen, st.State, "one press does not close")
	do(t, tab, chromedp.Click(chromedp.ID("d-close")))
	waitFor(t, tab, `document.getElementById('d-state').textContent === 'closed'`, "the closed state")
	st, err = s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.CloseOperator, st.CloseReason)
	require.Equal(t, "closed", s.grab(t, id, "late"))
	waitFor(t, tab, `document.getElementById('outcome-closed').dataset.value === '1'`, "the closed answer counted")
}

// TestConsolePausesAndResumes: the pause button pauses the campaign in
// the engine (grabs answer paused, counted on the page), and the same
// button, now Resume, resumes it.
func TestConsolePausesAndResumes(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 1000, 10, split.Fixed)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	consoleDetail(t, tab, s, id)
	waitFor(t, tab, `document.getElementById('d-pause').textContent === 'Pause' && !document.getElementById('d-pause').disabled`, "the pause button")
	require.True(t, js[bool](t, tab, `document.getElementById('d-paused').hidden`))
	do(t, tab, chromedp.Click(chromedp.ID("d-pause")))
	waitFor(t, tab, `document.getElementById('d-pause').textContent === 'Resume' && !document.getElementById('d-paused').hidden`, "the paused campaign")
	st, err := s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, "paused", s.grab(t, id, "p1"))
	waitFor(t, tab, `document.getElementById('outcome-paused').dataset.value === '1'`, "the paused answer counted")
	do(t, tab, chromedp.Click(chromedp.ID("d-pause")))
	waitFor(t, tab, `document.getElementById('d-pause').textContent === 'Pause' && document.getElementById('d-paused').hidden`, "the resumed campaign")
	st, err = s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Equal(t, "granted", s.grab(t, id, "p1"))
	do(t, tab, chromedp.Click(chromedp.ID("d-close")), chromedp.Click(chromedp.ID("d-close")))
	waitFor(t, tab, `document.getElementById('d-state').textContent === 'closed' && document.getElementById('d-pause').disabled`, "no pause once closed")
}

// TestConsoleCreates: the form shows the API's refusal next to its field,
// then creates the campaign and opens its page.
func TestConsoleCreates(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, phone())
	signIn(t, tab, s.URL, adminKey)
	waitFor(t, tab, `!document.getElementById('view-list').hidden`, "the campaign list")
	do(t, tab, chromedp.Click(chromedp.CSS(`a[href="#/new"]`)))
	waitFor(t, tab, `!document.getElementById('view-create').hidden`, "the form")
	noHorizontalScroll(t, tab, "the form")
	submit := chromedp.Click(chromedp.ID("create-submit"))
	do(t, tab, chromedp.SendKeys(chromedp.ID("f-total"), "10.00"), chromedp.SendKeys(chromedp.ID("f-count"), "0"), submit)
	waitFor(t, tab, `document.getElementById('err-count').textContent !== ''`, "the error next to count")
	require.Equal(t, "count must be within 1 and 1000000", js[string](t, tab, `document.getElementById('err-count').textContent`))
	require.Equal(t, "true", js[string](t, tab, `document.getElementById('f-count').getAttribute('aria-invalid')`))

	do(t, tab, setValue("f-count", "2000"), submit)
	waitFor(t, tab, `document.getElementById('err-total').textContent !== ''`, "the engine's refusal, next to total")
	require.Equal(t, "invalid campaign: total: 1000 cents cannot give 2000 packets of at least 1 cent",
		js[string](t, tab, `document.getElementById('err-total').textContent`))
	require.Empty(t, js[string](t, tab, `document.getElementById('err-count').textContent`), "the old error is gone")

	do(t, tab, setValue("f-count", "5"), chromedp.SendKeys(chromedp.ID("f-min"), "1.00"),
		chromedp.SendKeys(chromedp.ID("f-max"), "0.50"), submit)
	waitFor(t, tab, `document.getElementById('err-max').textContent !== ''`, "the error next to max")
	require.Contains(t, js[string](t, tab, `document.getElementById('err-max').textContent`), "below min")
	noHorizontalScroll(t, tab, "the form with errors")

	do(t, tab, setValue("f-max", ""), setValue("f-shards", "999"), submit)
	waitFor(t, tab, `document.getElementById('err-shards').textContent !== ''`, "the error next to shards")
	require.True(t, js[bool](t, tab, `document.querySelector('#view-create details').open`), "the field's section opens")

	do(t, tab, setValue("f-shards", "2"), submit)
	waitFor(t, tab, `location.hash.startsWith('#/c/')`, "the new campaign's page")
	id := strings.TrimPrefix(js[string](t, tab, `location.hash`), "#/c/")
	st, err := s.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 5, st.Count)
	require.EqualValues(t, 1000, st.Total)
	require.Equal(t, 2, st.Shards)
	waitFor(t, tab, leftPackets+` === 5`, "the new campaign live")
	waitFor(t, tab, `document.querySelector('#panel-shards .stat-value')?.dataset.value === '2'`, "the shards panel")
}

// TestConsoleRedrives: dead entries show in the settlement panel, and a
// redrive from the console (press, then confirm) moves them back.
func TestConsoleRedrives(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 1000, 10, split.Fixed)
	require.Equal(t, "granted", s.grab(t, id, "first"))
	ctx := context.Background()
	rc := testenv.SharedRedis(t).Client
	require.NoError(t, rc.Do(ctx, rc.B().Xadd().Key(redisstore.Default.CampaignKeys(id).Grants).Id("*").
		FieldValue().FieldValue("mallory", "not-a-packet").Build()).Error())
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	w, err := settle.New(settle.Config{Redis: rc, Ledger: l, Consumer: "t", Only: []string{id},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, phone())
	consoleDetail(t, tab, s, id)
	dead := `document.querySelector('#panel-settlement .stat-value.dead').dataset.value`
	waitFor(t, tab, dead+` === '1'`, "one dead entry")
	require.False(t, js[bool](t, tab, `document.getElementById('redrive').disabled`))
	do(t, tab, chromedp.Click(chromedp.ID("redrive")))
	waitFor(t, tab, `document.getElementById('redrive').textContent === 'Confirm redrive'`, "the confirmation")
	do(t, tab, chromedp.Click(chromedp.ID("redrive")))
	waitFor(t, tab, `document.getElementById('d-toast').textContent.startsWith('Moved 1 ')`, "the redrive's answer")
	waitFor(t, tab, dead+` === '0'`, "no dead entry")
	b, err := settle.ReadBacklog(ctx, rc, "", id)
	require.NoError(t, err)
	require.Zero(t, b.Dead)
	require.True(t, js[bool](t, tab, `document.getElementById('redrive').disabled`))
}

// TestPhoneLayout: at 390x844 no view of the console scrolls sideways;
// the screenshots of the phone views are saved.
func TestPhoneLayout(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 88800, 100, split.DoubleAverage)
	for i := 0; i < 30; i++ {
		require.Equal(t, "granted", s.grab(t, id, fmt.Sprint("phone-", i)))
	}
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, phone())
	signIn(t, tab, s.URL, adminKey)
	waitFor(t, tab, `!!document.querySelector('#list-body tr[data-campaign="`+id+`"]')`, "the list")
	noHorizontalScroll(t, tab, "the list")
	tab.Screenshot(t, "console-list-phone")
	clickRow(t, tab, `#list-body tr[data-campaign="`+id+`"] a`)
	waitFor(t, tab, leftPackets+` === 70`, "the campaign")
	waitFor(t, tab, `document.querySelectorAll('.hist-bar').length > 0`, "the histogram")
	noHorizontalScroll(t, tab, "the campaign")
	settled(t, tab, "#panels")
	tab.Screenshot(t, "console-phone")
	do(t, tab, chromedp.Navigate(s.URL+"/console/#/new"))
	waitFor(t, tab, `!document.getElementById('view-create').hidden`, "the form")
	noHorizontalScroll(t, tab, "the form")
	// The targets a thumb presses are at least 44 px high.
	small := js[[]string](t, tab, `[...document.querySelectorAll('#view-create button, #view-create input, #view-create select, .topbar button')]
		.filter(e => e.offsetParent !== null && e.getBoundingClientRect().height < 44).map(e => e.id || e.tagName)`)
	require.Empty(t, small, "targets smaller than 44 px")
}

// TestPlayAsksBeforeSwitchingUser: a tab playing as one user that opens a
// link with another user's #token= asks who plays, and keeps its player
// unless told to switch.
func TestPlayAsksBeforeSwitchingUser(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	id := s.create(t, 50000, 100, split.LineCut)
	tab := browsertest.NewTab(t, 3*time.Minute)
	minted := 0
	mint := func(user string) string {
		minted++ // each token its own iat, so its own text
		tok, err := httpapi.MintToken(userSecret, user, time.Hour, time.Now().Add(-time.Duration(minted)*time.Second))
		require.NoError(t, err)
		return tok
	}
	do(t, tab, desktop(), chromedp.Navigate(s.URL+"/play/"+id+"#token="+mint("alice")), chromedp.Reload())
	waitFor(t, tab, `document.getElementById('user').textContent === 'alice'`, "alice to play")

	// Another user's link: the page asks; keeping stays alice.
	do(t, tab, chromedp.Navigate(s.URL+"/play/"+id+"#token="+mint("mallory")), chromedp.Reload())
	waitFor(t, tab, `!document.getElementById('switch').hidden`, "the page to ask who plays")
	require.Equal(t, "alice", js[string](t, tab, `document.getElementById('switch-kept').textContent`))
	require.Equal(t, "mallory", js[string](t, tab, `document.getElementById('switch-link').textContent`))
	require.True(t, js[bool](t, tab, `document.getElementById('user-line').hidden`), "nobody plays while the page asks")
	tab.Screenshot(t, "play-switch-user")
	do(t, tab, chromedp.Click(chromedp.ID("switch-keep")))
	waitFor(t, tab, `document.getElementById('user').textContent === 'alice' && document.getElementById('switch').hidden`, "alice to play on")
	require.Equal(t, "alice", js[string](t, tab, `JSON.parse(atob(sessionStorage.getItem('hongbao.play.token').split('.')[1].replace(/-/g,'+').replace(/_/g,'/'))).sub`))

	// Asked again, switching plays as the link's user.
	do(t, tab, chromedp.Navigate(s.URL+"/play/"+id+"#token="+mint("bob")), chromedp.Reload())
	waitFor(t, tab, `!document.getElementById('switch').hidden`, "the page to ask who plays")
	do(t, tab, chromedp.Click(chromedp.ID("switch-take")))
	waitFor(t, tab, `document.getElementById('user').textContent === 'bob'`, "bob to play")

	// The same user's fresh token replaces the old one without a question.
	fresh := mint("bob")
	do(t, tab, chromedp.Navigate(s.URL+"/play/"+id+"#token="+fresh), chromedp.Reload())
	waitFor(t, tab, `sessionStorage.getItem('hongbao.play.token') === '`+fresh+`'`, "bob's fresh token")
	require.True(t, js[bool](t, tab, `document.getElementById('switch').hidden`))
	require.Equal(t, "bob", js[string](t, tab, `document.getElementById('user').textContent`))
}

// createDiscount makes a discount campaign through the engine.
func (s *site) createDiscount(t *testing.T, spec hongbao.DiscountSpec) string {
	t.Helper()
	spec.ID = testenv.UniqueID(t)
	d, err := s.Engine.Discounts().Create(context.Background(), spec)
	require.NoError(t, err)
	return d.ID
}

// reserve reserves a discount through the engine and returns the outcome.
func (s *site) reserve(t *testing.T, id, user, order string) hongbao.ReserveOutcome {
	t.Helper()
	r, err := s.Engine.Discounts().Reserve(context.Background(), id, user, order, 10000)
	require.NoError(t, err)
	return r.Outcome
}

// TestConsoleDiscount: a discount campaign is listed beside the red
// packet rains, with its kind (and the kind filter shows it alone); its
// page shows the budget, follows a reservation, pauses and resumes it,
// blocks and unblocks a user, each taking effect in the engine, and
// closes it.
func TestConsoleDiscount(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	rain := s.create(t, 1000, 10, split.Fixed)
	id := s.createDiscount(t, hongbao.DiscountSpec{Budget: 5000, Quota: 10, Min: 100, Max: 1000, PerUserCount: 2, Shards: 2})
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, desktop())
	signIn(t, tab, s.URL, adminKey)
	row := `#list-body tr[data-campaign="` + id + `"][data-kind="discount"]`
	waitFor(t, tab, `!!document.querySelector('`+row+`')`, "the discount campaign in the list")
	waitFor(t, tab, `!!document.querySelector('#list-body tr[data-campaign="`+rain+`"][data-kind="red-packet"]')`, "the rain in the same list")
	require.Equal(t, "Discount", js[string](t, tab, `document.querySelector('`+row+` .kind').textContent`))
	require.Equal(t, "10", js[string](t, tab, `document.querySelector('`+row+` .left-count').dataset.value`))
	do(t, tab, chromedp.Click(chromedp.CSS(`#list-kinds button[data-kind="discount"]`)))
	waitFor(t, tab, `!document.querySelector('#list-body tr[data-kind="red-packet"]') && !!document.querySelector('`+row+`')`, "the discounts alone")
	do(t, tab, chromedp.Click(chromedp.CSS(`#list-kinds button[data-kind=""]`)))
	waitFor(t, tab, `!!document.querySelector('#list-body tr[data-kind="red-packet"]')`, "both kinds again")

	clickRow(t, tab, row+` a`)
	waitFor(t, tab, `location.hash === '#/d/`+id+`' && document.getElementById('conn').textContent === 'Live'`, "the discount campaign's page")
	waitFor(t, tab, `document.getElementById('remaining-count').dataset.value === '10'`, "10 discounts left")
	require.Equal(t, "5000", js[string](t, tab, `document.getElementById('remaining-cents').dataset.value`))
	require.Equal(t, "at most 2 discounts", js[string](t, tab, `document.querySelector('#panel-spec dd[data-row="Per user"]').textContent`))
	require.True(t, js[bool](t, tab, `document.getElementById('d-play').hidden`), "no play page for a discount campaign")
	require.Equal(t, hongbao.Reserved, s.reserve(t, id, "ann", "o1"))
	waitFor(t, tab, `document.getElementById('reserved-count').dataset.value === '1' && document.getElementById('remaining-count').dataset.value === '9'`,
		"the reservation on the page")
	settled(t, tab, "#panels")
	tab.Screenshot(t, "console-discount-desktop")

	do(t, tab, chromedp.Click(chromedp.ID("d-pause")))
	waitFor(t, tab, `document.getElementById('d-pause').textContent === 'Resume' && !document.getElementById('d-paused').hidden`, "the paused campaign")
	st, err := s.Engine.Discounts().Status(context.Background(), id)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 2, st.PausedShards)
	require.Equal(t, hongbao.ReservePaused, s.reserve(t, id, "bob", "o1"))
	do(t, tab, chromedp.Click(chromedp.ID("d-pause")))
	waitFor(t, tab, `document.getElementById('d-pause').textContent === 'Pause' && document.getElementById('d-paused').hidden`, "the resumed campaign")
	st, err = s.Engine.Discounts().Status(context.Background(), id)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Equal(t, hongbao.Reserved, s.reserve(t, id, "bob", "o1"))

	do(t, tab, chromedp.SendKeys(chromedp.ID("block-users"), "mallory, trudy"), chromedp.Click(chromedp.ID("block-submit")))
	waitFor(t, tab, `!!document.querySelector('#blocked-list li[data-user="mallory"]') && document.getElementById('blocked-total').dataset.value === '2'`,
		"the blocked users listed")
	require.Equal(t, hongbao.ReserveBlocked, s.reserve(t, id, "mallory", "o1"))
	do(t, tab, chromedp.Click(chromedp.CSS(`#blocked-list li[data-user="mallory"] button`)))
	waitFor(t, tab, `!document.querySelector('#blocked-list li[data-user="mallory"]') && document.getElementById('blocked-total').dataset.value === '1'`,
		"mallory unblocked")
	require.Equal(t, hongbao.Reserved, s.reserve(t, id, "mallory", "o2"))
	require.Equal(t, hongbao.ReserveBlocked, s.reserve(t, id, "trudy", "o1"))

	do(t, tab, chromedp.Click(chromedp.ID("d-close")), chromedp.Click(chromedp.ID("d-close")))
	waitFor(t, tab, `document.getElementById('d-state').textContent === 'closed' && document.getElementById('d-pause').disabled`, "the closed campaign")
	st, err = s.Engine.Discounts().Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	noHorizontalScroll(t, tab, "the discount campaign")
}

// TestConsoleListsClosed: a closed campaign of either kind, not yet
// settled (no settlement runs here), is listed as closed, with why, and
// its page shows it closed.
func TestConsoleListsClosed(t *testing.T) {
	t.Parallel()
	s := newSite(t, false)
	ctx := context.Background()
	rain := s.create(t, 1000, 10, split.Fixed)
	_, err := s.Engine.CloseCampaign(ctx, rain)
	require.NoError(t, err)
	disc := s.createDiscount(t, hongbao.DiscountSpec{Budget: 1000, Quota: 10})
	_, err = s.Engine.Discounts().CloseCampaign(ctx, disc)
	require.NoError(t, err)
	tab := browsertest.NewTab(t, 3*time.Minute)
	do(t, tab, phone())
	signIn(t, tab, s.URL, adminKey)
	for _, id := range []string{rain, disc} {
		badge := `#list-body tr[data-campaign="` + id + `"] .badge[data-state="closed"]`
		waitFor(t, tab, `!!document.querySelector('`+badge+`')`, "the closed campaign listed as closed")
		require.Equal(t, "closed: operator", js[string](t, tab, `document.querySelector('`+badge+`').textContent`))
	}
	noHorizontalScroll(t, tab, "the list")
	tab.Screenshot(t, "console-list-closed-phone")
	clickRow(t, tab, `#list-body tr[data-campaign="`+rain+`"] a`)
	waitFor(t, tab, `document.getElementById('d-state').textContent === 'closed' && document.getElementById('d-close').textContent === 'Closed'`,
		"the closed campaign's page")
}
