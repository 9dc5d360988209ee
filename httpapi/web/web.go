// Package web holds the pages that hongbao serve shows in a browser: the
// operator console (/console/) and the play page (/play/{campaign}).
//
// They are plain HTML, CSS and JavaScript modules, embedded in the binary
// with go:embed: nothing to build, nothing fetched from elsewhere (users
// run this offline). The pages hold no data; the scripts call the /v1 API
// with the operator's admin key or the user's token, and put what it
// answers into the page as text (textContent), never as markup.
//
// Every answer carries a Content Security Policy that allows scripts,
// styles and connections to this origin only and no inline script
// (script-src 'self'), requires Trusted Types (so markup cannot be
// assigned from a string at all), and forbids framing, except of the play
// page by the embedders named in Options.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

//go:embed static
var static embed.FS

// Options configure a Site.
type Options struct {
	// Embedders are the origins ("https://app.example.com") allowed to show
	// the play page in a frame and to hand it the user's token with
	// postMessage. Default none: the play page cannot be framed, and takes
	// its token from the URL fragment (#token=...).
	Embedders []string
	// Demo says the server hands out demo tokens (hongbao demo --web): the
	// play page then offers a new player and the next rain. Default off.
	Demo bool
}

// Site serves the pages and their assets.
type Site struct {
	console, play page
	assets        map[string]page
	embedders     []string
}

// page is one file as served: its bytes, type and validator.
type page struct {
	body  []byte
	ctype string
	etag  string
}

// contentTypes are the types of the files in static/, by extension. Ours,
// not the system's table, so every machine serves the same.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
}

// New reads the embedded files and checks the options.
func New(opt Options) (*Site, error) {
	s := &Site{assets: map[string]page{}}
	for _, o := range opt.Embedders {
		origin, err := parseOrigin(o)
		if err != nil {
			return nil, err
		}
		s.embedders = append(s.embedders, origin)
	}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("web: no content type for %s", name)
		}
		switch name {
		case "console.html":
			s.console = newPage(b, ctype)
		case "play.html":
			b = setMeta(b, "hongbao-embedders", strings.Join(s.embedders, " "))
			b = setMeta(b, "hongbao-demo", map[bool]string{true: "on", false: ""}[opt.Demo])
			s.play = newPage(b, ctype)
		default:
			s.assets[name] = newPage(b, ctype)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newPage(b []byte, ctype string) page {
	sum := sha256.Sum256(b)
	return page{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// setMeta fills the content of <meta name="name" content=""> in an HTML
// page, escaped.
func setMeta(b []byte, name, content string) []byte {
	empty := []byte(`<meta name="` + name + `" content="">`)
	return bytes.Replace(b, empty, []byte(`<meta name="`+name+`" content="`+html.EscapeString(content)+`">`), 1)
}

// parseOrigin checks that o is an origin (scheme, host, port; no path)
// and returns it in canonical form.
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
		strings.ContainsAny(u.Host, " ;,'\"") {
		return "", fmt.Errorf("web: embedder %q is not an origin such as https://app.example.com", o)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// csp is the Content Security Policy of every answer, with its
// frame-ancestors directive.
func csp(frameAncestors string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'self'; " +
		"require-trusted-types-for 'script'; trusted-types 'none'; frame-ancestors " + frameAncestors
}

// headers sets the security headers of a page or asset.
func headers(h http.Header, frameAncestors string) {
	h.Set("Content-Security-Policy", csp(frameAncestors))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
	if frameAncestors == "'none'" {
		h.Set("X-Frame-Options", "DENY")
	}
}

// serve answers p, or 304 when the client holds it already.
func serve(w http.ResponseWriter, r *http.Request, p page, frameAncestors string) {
	h := w.Header()
	headers(h, frameAncestors)
	h.Set("Content-Type", p.ctype)
	// Revalidated on every use: a new binary's pages show at once.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", p.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, p.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(p.body)
	}
}

// Console serves the console's page.
func (s *Site) Console(w http.ResponseWriter, r *http.Request) { serve(w, r, s.console, "'none'") }

// Play serves the play page; its campaign is in the path and read by its
// script.
func (s *Site) Play(w http.ResponseWriter, r *http.Request) {
	fa := "'none'"
	if len(s.embedders) > 0 {
		fa = strings.Join(s.embedders, " ")
	}
	serve(w, r, s.play, fa)
}

// Asset serves the file named by the path value "file".
func (s *Site) Asset(w http.ResponseWriter, r *http.Request) {
	p, ok := s.assets[r.PathValue("file")]
	if !ok {
		NotFound(w, r)
		return
	}
	serve(w, r, p, "'none'")
}

// NotFound answers 404 with the pages' headers.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	headers(w.Header(), "'none'")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte("not found\n"))
}

// Assets lists the names of the assets served under /assets/, sorted.
func (s *Site) Assets() []string {
	names := make([]string, 0, len(s.assets))
	for n := range s.assets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
