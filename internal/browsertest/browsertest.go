// Package browsertest drives headless Chromium for tests, with chromedp.
//
// One browser serves a whole test binary: started on first use, stopped by
// Close (from TestMain, through testenv.Main's cleanups). Each test gets a
// tab of its own in a browser context of its own (its own storage), closed
// when the test ends. When Chromium is missing the tests skip, except under
// CI=true, where that is a failure (apt-get install -y chromium).
//
// The browser runs with the flags that keep it off the network: no
// background networking, component updates, sync or QUIC; it only ever
// talks to the test servers on loopback.
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ExecPath finds Chromium: $HONGBAO_CHROMIUM, else chromium or
// chromium-browser on the PATH, else /usr/bin/chromium. It is "" when
// none is there.
func ExecPath() string {
	if p := os.Getenv("HONGBAO_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

var (
	mu          sync.Mutex
	started     bool
	startErr    error
	browserCtx  context.Context
	stopBrowser context.CancelFunc
	stopAlloc   context.CancelFunc
	profileDir  string
)

// start starts the shared browser once.
func start() error {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return startErr
	}
	started = true
	profileDir, startErr = os.MkdirTemp("", "hongbao-chromium-")
	if startErr != nil {
		return startErr
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ExecPath()),
		chromedp.UserDataDir(profileDir),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first Run starts the browser; its context must not time out,
	// or the browser would stop with it.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case startErr = <-done:
	case <-time.After(60 * time.Second):
		startErr = fmt.Errorf("chromium did not start within 60s")
	}
	if startErr != nil {
		cancel()
		cancelAlloc()
		return fmt.Errorf("start chromium: %w", startErr)
	}
	browserCtx, stopBrowser, stopAlloc = ctx, cancel, cancelAlloc
	return nil
}

// Close stops the shared browser, if one started, and removes its profile.
func Close() {
	mu.Lock()
	defer mu.Unlock()
	if stopBrowser != nil {
		stopBrowser()
		stopAlloc()
		stopBrowser, stopAlloc = nil, nil
	}
	if profileDir != "" {
		_ = os.RemoveAll(profileDir)
		profileDir = ""
	}
}

// need skips the test when Chromium is missing, or fails it under CI=true.
func need(t testing.TB) {
	t.Helper()
	if ExecPath() != "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI must have it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium)")
}

// Tab is a browser tab of one test.
type Tab struct {
	// Ctx runs chromedp actions in the tab.
	Ctx context.Context
	mu  sync.Mutex
	// problems are the page's uncaught exceptions and errors on its
	// console (a refused Content Security Policy says so there).
	problems []string
}

// NewTab opens a tab, in a fresh browser context, that is closed when the
// test ends; each action in it must finish within timeout. At the end of
// the test, an uncaught exception in the page or an error on its console
// (other than a failed request: refusals are part of the tests) fails it.
func NewTab(t testing.TB, timeout time.Duration) *Tab {
	t.Helper()
	need(t)
	if err := start(); err != nil {
		t.Fatal(err)
	}
	tab := &Tab{}
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext(),
		chromedp.WithListener(tab.listen))
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, log.Enable, cdp.Empty{})
		return err
	})); err != nil {
		cancel()
		t.Fatalf("open a tab: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, timeout)
	tab.Ctx = tctx
	t.Cleanup(func() {
		cancelT()
		cancel()
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.problems) > 0 {
			t.Errorf("the page reported problems:\n  %s", strings.Join(tab.problems, "\n  "))
		}
	})
	return tab
}

func (tab *Tab) listen(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		p = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			p += ": " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			p = "console." + string(ev.Type) + fmt.Sprint(ev.Args)
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
			p = "log (" + string(ev.Entry.Source) + "): " + ev.Entry.Text
		}
	}
	if p != "" {
		tab.mu.Lock()
		tab.problems = append(tab.problems, p)
		tab.mu.Unlock()
	}
}

// ScreenshotDir is where screenshots go: $HONGBAO_SCREENSHOTS, else
// testdata/screenshots under the test's package (ignored by git).
func ScreenshotDir() string {
	if d := os.Getenv("HONGBAO_SCREENSHOTS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "screenshots")
}

// Screenshot saves the tab's viewport as ScreenshotDir()/name.png.
func (tab *Tab) Screenshot(t testing.TB, name string) {
	t.Helper()
	shot, err := chromedp.Run(tab.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	// Chromium's encoder is fast; the best compression makes the files
	// that docs/ keeps a good deal smaller.
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := ScreenshotDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
