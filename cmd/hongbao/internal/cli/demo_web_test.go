package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/browsertest"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// webDemo is a demo --web running in-process.
type webDemo struct {
	cancel         context.CancelFunc
	done           chan int
	out, errb      *syncBuffer
	base, play     string
	console, admin string
	hc             *http.Client // checks every reply against openapi.json
}

var (
	playRe    = regexp.MustCompile(`play +(http://\S+/play/(\S+))`)
	consoleRe = regexp.MustCompile(`console +(http://\S+/console/)`)
	keyRe     = regexp.MustCompile(`admin key ([0-9a-f]{32,})`)
	dataDirRe = regexp.MustCompile(`data_dir=(\S+)`)
)

func startWebDemo(t *testing.T, args ...string) *webDemo {
	t.Helper()
	if !redisserver.Available("") {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI must have it")
		}
		t.Skip("redis-server is not installed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &webDemo{cancel: cancel, done: make(chan int, 1), out: &syncBuffer{}, errb: &syncBuffer{}, hc: openapitest.Client(t)}
	go func() {
		d.done <- Run(ctx, append([]string{"demo", "--web", "--listen", "127.0.0.1:0"}, args...),
			&IO{Stdout: d.out, Stderr: d.errb, Getenv: func(string) string { return "" }})
	}()
	waitFor(t, "the demo's banner", 60*time.Second, func() bool {
		select {
		case code := <-d.done:
			t.Fatalf("demo --web exited with %d: %s", code, d.errb.String())
		default:
		}
		return strings.Contains(d.out.String(), "Ctrl-C")
	})
	out := d.out.String()
	m := playRe.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	d.play = m[1]
	d.base = strings.TrimSuffix(m[1], "/play/"+m[2])
	d.console = consoleRe.FindStringSubmatch(out)[1]
	d.admin = keyRe.FindStringSubmatch(out)[1]
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop interrupts the demo, as Ctrl-C does, and checks that it stopped
// cleanly and left nothing behind.
func (d *webDemo) stop(t *testing.T) {
	t.Helper()
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	select {
	case code := <-d.done:
		require.Equal(t, 0, code, d.errb.String())
	case <-time.After(60 * time.Second):
		t.Fatal("demo --web did not stop")
	}
	m := dataDirRe.FindStringSubmatch(d.errb.String())
	require.NotNil(t, m, "serve logs its data directory")
	_, err := os.Stat(m[1])
	require.True(t, os.IsNotExist(err), "the temporary directory is removed: %v", err)
	require.NotContains(t, d.errb.String(), d.admin, "the admin key reached the log")
}

func (d *webDemo) call(t *testing.T, method, path, auth string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	res, err := d.hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}

// demoToken takes a demo token and says which rain is on.
func (d *webDemo) demoToken(t *testing.T) (token, campaign string) {
	t.Helper()
	code, b := d.call(t, "POST", "/v1/demo/token", "")
	require.Equal(t, http.StatusOK, code, "%s", b)
	var v struct{ Token, Campaign string }
	require.NoError(t, json.Unmarshal(b, &v))
	return v.Token, v.Campaign
}

// TestDemoWeb: demo --web serves the play page and the console with the
// printed one-time key; a rain that sells out gives way to the next; the
// interrupt stops serve and then Redis, and removes the directory.
func TestDemoWeb(t *testing.T) {
	t.Parallel()
	d := startWebDemo(t, "--packets", "3", "--total", "0.30", "--crowd", "0")
	for _, u := range []string{d.play, d.console} {
		res, err := d.hc.Get(u)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, u)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	}
	code, b := d.call(t, "GET", "/v1/campaigns", d.admin)
	require.Equal(t, http.StatusOK, code, "%s", b)
	first := strings.TrimPrefix(d.play, d.base+"/play/")
	require.Contains(t, string(b), `"id":"`+first+`"`)
	code, _ = d.call(t, "GET", "/v1/campaigns", "not-the-key-0123456789abcdefghijklmnop")
	require.Equal(t, http.StatusUnauthorized, code)

	for i := 0; i < 3; i++ {
		tok, rain := d.demoToken(t)
		require.Equal(t, first, rain)
		code, b := d.call(t, "POST", "/v1/campaigns/"+first+"/grab", tok)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, string(b), `"outcome":"granted"`)
	}
	// (Polled by GET /v1/demo: demo tokens come at a limited rate.)
	waitFor(t, "the next rain", 30*time.Second, func() bool {
		code, b := d.call(t, "GET", "/v1/demo", "")
		return code == http.StatusOK && !strings.Contains(string(b), first)
	})
	require.Contains(t, d.out.String(), first+" (sold out); the next rain opens")
}

// TestDemoWebOnPhone: a person on a phone plays demo --web: a tap shows
// the amount; when the rain sells out the page offers the next one, and
// the next one plays.
func TestDemoWebOnPhone(t *testing.T) {
	t.Parallel()
	d := startWebDemo(t, "--packets", "2", "--total", "0.20", "--crowd", "0")
	tab := browsertest.NewTab(t, 3*time.Minute)
	require.NoError(t, chromedp.Do(tab.Ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch),
		chromedp.Navigate(d.play)))
	poll := func(expr, what string) {
		t.Helper()
		_, err := chromedp.Run(tab.Ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(45*time.Second)))
		require.NoError(t, err, "waiting for %s", what)
	}
	poll(`document.getElementById('user').textContent.startsWith('demo-')`, "a player")
	// The keyboard's way to grab (the same request as a tap on a packet).
	require.NoError(t, chromedp.Do(tab.Ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('grab-any').click()`)))
	poll(`document.getElementById('result').dataset.outcome === 'granted'`, "a packet")
	amount, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[string](`document.getElementById('result-amount').textContent`))
	require.NoError(t, err)
	require.Regexp(t, `^0\.[0-9]{2}$`, amount)

	// Someone else takes the last packet; the player's next tap hears
	// "sold out" and the page offers the next rain.
	first := strings.TrimPrefix(d.play, d.base+"/play/")
	tok, _ := d.demoToken(t)
	code, _ := d.call(t, "POST", "/v1/campaigns/"+first+"/grab", tok)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, chromedp.Do(tab.Ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('new-player').click()`)))
	poll(`document.getElementById('mine').hidden`, "a new player")
	require.NoError(t, chromedp.Do(tab.Ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('grab-any').click()`)))
	poll(`document.getElementById('result').dataset.outcome === 'sold_out' && !document.getElementById('next-rain').hidden`, "the next rain offered")
	// The click loads the next rain's page (once the demo has opened it).
	_, err = chromedp.Run(tab.Ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID("next-rain"))))
	require.NoError(t, err)
	poll(`location.pathname !== '/play/`+first+`' && document.querySelectorAll('.packet').length > 0`, "the next rain's page")
	require.NoError(t, chromedp.Do(tab.Ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('grab-any').click()`)))
	poll(`document.getElementById('result').dataset.outcome === 'granted'`, "a packet of the next rain")
}

// TestDemoWebBadInput: flags that make no sense are refused before
// anything starts.
func TestDemoWebBadInput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"demo", "--web", "--users", "5"},
		{"demo", "--web", "--json"},
		{"demo", "--web", "--settle=false"},
		{"demo", "--crowd", "3"},
		{"demo", "--listen", "127.0.0.1:0"},
		{"demo", "--web", "--listen", "nonsense"},
		{"demo", "--web", "--crowd", "-1"},
		{"demo", "--web", "--total", "1.001"},
		{"demo", "--web", "--packets", "0"},
	} {
		code, out, errs := run(t, nil, args...)
		require.Equal(t, 2, code, "%v: %s%s", args, out, errs)
		require.Empty(t, out, "%v", args)
	}
}

// TestServePlayEmbedder: --play-embedder lets an app's origin frame the
// play page (and only it).
func TestServePlayEmbedder(t *testing.T) {
	t.Parallel()
	f := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, f.args("--play-embedder", "https://app.example.com,https://other.example.com")...)
	hc := openapitest.Client(t)
	res, err := hc.Get(p.URL + "/play/some-rain")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors https://app.example.com https://other.example.com")
	res, err = hc.Get(p.URL + "/console/")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
}
