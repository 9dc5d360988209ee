package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		out[strings.TrimPrefix(p, "static/")] = string(b)
		return err
	}))
	return out
}

// TestScriptsWriteNoMarkup: no script turns a string into markup or code.
// The pages put data in with textContent; the policy's Trusted Types
// would make these throw in the browser anyway.
func TestScriptsWriteNoMarkup(t *testing.T) {
	t.Parallel()
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|javascript:|srcdoc|createContextualFragment|DOMParser`)
	n := 0
	for name, src := range files(t) {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		n++
		require.Empty(t, sinks.FindAllString(src, -1), "%s writes markup or code from a string", name)
	}
	require.GreaterOrEqual(t, n, 4)
}

// TestNothingFromElsewhere: no page or asset loads anything from another
// origin (users run this offline); the SVG namespace is a name, not a
// load.
func TestNothingFromElsewhere(t *testing.T) {
	t.Parallel()
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for name, src := range files(t) {
		for _, u := range url.FindAllString(src, -1) {
			require.Equal(t, "http://www.w3.org", u, "%s refers to %s", name, u)
		}
	}
}

// TestPagesHaveNoInlineCode: scripts come from files (script-src 'self'
// forbids inline ones), styles from style sheets, no handler attributes;
// every file a page or script refers to exists.
func TestPagesHaveNoInlineCode(t *testing.T) {
	t.Parallel()
	all := files(t)
	script := regexp.MustCompile(`(?s)<script\b([^>]*)>(.*?)</script>`)
	ref := regexp.MustCompile(`(?:src|href)="/assets/([^"]+)"`)
	imp := regexp.MustCompile(`from '\./([^']+)'`)
	for _, page := range []string{"console.html", "play.html"} {
		src := all[page]
		ms := script.FindAllStringSubmatch(src, -1)
		require.NotEmpty(t, ms, page)
		for _, m := range ms {
			require.Contains(t, m[1], `src="/assets/`, "%s: a script without src", page)
			require.Empty(t, strings.TrimSpace(m[2]), "%s: inline script", page)
		}
		require.NotRegexp(t, `(?i)\sstyle=`, src, page)
		require.NotRegexp(t, `(?i)\son[a-z]+=`, src, page)
		require.NotContains(t, src, "<style", page)
		for _, m := range ref.FindAllStringSubmatch(src, -1) {
			require.Contains(t, all, m[1], "%s refers to a missing asset", page)
		}
	}
	for name, src := range all {
		for _, m := range imp.FindAllStringSubmatch(src, -1) {
			require.Contains(t, all, m[1], "%s imports a missing module", name)
		}
	}
}

func get(t *testing.T, h http.HandlerFunc, pattern, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, h)
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

// TestHeaders: every page and asset carries the security headers, with
// its own type, and is revalidated with its ETag.
func TestHeaders(t *testing.T) {
	t.Parallel()
	s, err := New(Options{})
	require.NoError(t, err)
	require.Subset(t, s.Assets(), []string{"common.js", "console.js", "panels.js", "play.js", "base.css", "console.css", "play.css", "icon.svg"})
	cases := map[string]*httptest.ResponseRecorder{
		"text/html; charset=utf-8":       get(t, s.Console, "GET /console/{$}", "/console/"),
		"text/javascript; charset=utf-8": get(t, s.Asset, "GET /assets/{file}", "/assets/console.js"),
		"text/css; charset=utf-8":        get(t, s.Asset, "GET /assets/{file}", "/assets/play.css"),
		"image/svg+xml":                  get(t, s.Asset, "GET /assets/{file}", "/assets/icon.svg"),
	}
	cases["text/html; charset=utf-8 (play)"] = get(t, s.Play, "GET /play/{campaign}", "/play/abc")
	for ctype, rec := range cases {
		require.Equal(t, http.StatusOK, rec.Code, ctype)
		require.Equal(t, strings.TrimSuffix(ctype, " (play)"), rec.Header().Get("Content-Type"))
		csp := rec.Header().Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"} {
			require.Contains(t, csp, d, ctype)
		}
		require.NotContains(t, csp, "unsafe", ctype)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
		require.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"))
		require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
		etag := rec.Header().Get("ETag")
		require.NotEmpty(t, etag)
	}
	rec := cases["text/javascript; charset=utf-8"]
	again := get(t, s.Asset, "GET /assets/{file}", "/assets/console.js", "If-None-Match", rec.Header().Get("ETag"))
	require.Equal(t, http.StatusNotModified, again.Code)
	require.Empty(t, again.Body.Bytes())

	missing := get(t, s.Asset, "GET /assets/{file}", "/assets/nope.js")
	require.Equal(t, http.StatusNotFound, missing.Code)
	require.Contains(t, missing.Header().Get("Content-Security-Policy"), "default-src 'none'")
	// The pages themselves are not assets.
	require.Equal(t, http.StatusNotFound, get(t, s.Asset, "GET /assets/{file}", "/assets/console.html").Code)
}

// TestEmbedders: named embedders may frame the play page (and only it),
// and the page learns them from its meta tag; anything but an origin is
// refused.
func TestEmbedders(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Embedders: []string{"https://App.Example.com", "http://127.0.0.1:3000/"}, Demo: true})
	require.NoError(t, err)
	play := get(t, s.Play, "GET /play/{campaign}", "/play/abc")
	require.Contains(t, play.Header().Get("Content-Security-Policy"), "frame-ancestors https://app.example.com http://127.0.0.1:3000")
	require.Empty(t, play.Header().Get("X-Frame-Options"))
	require.Contains(t, play.Body.String(), `<meta name="hongbao-embedders" content="https://app.example.com http://127.0.0.1:3000">`)
	require.Contains(t, play.Body.String(), `<meta name="hongbao-demo" content="on">`)
	console := get(t, s.Console, "GET /console/{$}", "/console/")
	require.Contains(t, console.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'")

	plain, err := New(Options{})
	require.NoError(t, err)
	require.Contains(t, get(t, plain.Play, "GET /play/{campaign}", "/play/abc").Body.String(), `<meta name="hongbao-demo" content="">`)

	for _, bad := range []string{"app.example.com", "ftp://x.example", "https://x.example/path", "https://x.example?q=1",
		"https://user@x.example", "https://x.example;script-src *", "https://", "*"} {
		_, err := New(Options{Embedders: []string{bad}})
		require.Error(t, err, bad)
	}
}
