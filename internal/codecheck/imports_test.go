package codecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/stretchr/testify/require"
)

// module is the module's import path.
const module = "github.com/hongbao/hongbao"

// toolTier is the part of the module that only the binary may import:
// the commands and their workloads.
const toolTier = module + "/cmd/"

// testSupport are the packages that exist for tests: real servers to run
// against, a browser, checkers. The library's own code must not need them;
// the binary may (it starts its own redis-server through redisserver).
var testSupport = []string{
	module + "/internal/browsertest",
	module + "/internal/clienttest",
	module + "/internal/codecheck",
	module + "/internal/history",
	module + "/internal/openapitest",
	module + "/internal/redisserver",
	module + "/internal/testenv",
}

// TestImportsRunOneWay holds the layering: tools -> library -> internals.
// No package outside cmd/ imports the tool tier, not even from its tests,
// and the library's non-test code imports no test support.
func TestImportsRunOneWay(t *testing.T) {
	root := moduleRoot(t)
	var lower, library []string
	for _, p := range goList(t, root, "./...") {
		switch {
		case strings.HasPrefix(p, toolTier):
		case isTestSupport(p):
			lower = append(lower, p)
		default:
			lower = append(lower, p)
			library = append(library, p)
		}
	}
	if len(library) < 10 {
		t.Fatalf("go list found %d library packages (%v): the check would prove nothing", len(library), library)
	}
	var problems []string
	for _, dep := range goList(t, root, append([]string{"-deps", "-test"}, lower...)...) {
		if strings.HasPrefix(dep, toolTier) {
			problems = append(problems, "a package outside cmd/ (or its tests) imports "+dep)
		}
	}
	for _, line := range goList(t, root, append([]string{"-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, library...)...) {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, toolTier) || isTestSupport(dep) {
				problems = append(problems, fields[0]+" imports "+dep)
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// engineFree are the library's leaves and the packages beside the engine
// rather than above it: none of them imports the engine (the root
// package) or its key layout, so a host can take a ledger, a webhook sink,
// a leader without the engine and Redis scripts coming too. (The client
// is a module of its own: TestClientModuleStandsAlone.)
var engineFree = []string{
	"./money", "./split", "./ledger/...", "./webhook", "./leader", "./atomicop",
}

// TestLeavesImportNoEngine holds that the engineFree packages stay free
// of the engine.
func TestLeavesImportNoEngine(t *testing.T) {
	root := moduleRoot(t)
	engine := map[string]bool{module: true, module + "/internal/redisstore": true}
	lines := goList(t, root, append([]string{"-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, engineFree...)...)
	if len(lines) < len(engineFree) {
		t.Fatalf("go list listed %d packages for %v", len(lines), engineFree)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if engine[dep] {
				t.Errorf("%s imports %s", fields[0], dep)
			}
		}
	}
}

// clientRequires are the only modules the client module (client/go.mod)
// may require: a program that calls the API gets the client and these,
// nothing of the engine. Each one added here is a cost to every such
// program; say why in the client's package documentation.
var clientRequires = map[string]bool{
	"github.com/golang-jwt/jwt/v5": true, // package token signs users' tokens
	// Packages hongbaov1 and hongbaov1connect: the Connect and gRPC
	// procedures, generated from proto/, which serve implements too.
	"connectrpc.com/connect":     true,
	"google.golang.org/protobuf": true,
}

// TestClientModuleStandsAlone holds that the client module requires
// nothing of the root module and no more than clientRequires, and that
// its packages and tests import nothing else.
func TestClientModuleStandsAlone(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "client")
	src, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.Parse("client/go.mod", src, nil)
	require.NoError(t, err)
	require.Equal(t, module+"/client", mf.Module.Mod.Path)
	for _, r := range mf.Require {
		require.True(t, clientRequires[r.Mod.Path], "client/go.mod requires %s", r.Mod.Path)
	}
	require.Empty(t, mf.Replace, "the client module replaces nothing: its users build it as it is")
	deps := goList(t, dir, "-deps", "-test", "./...")
	require.Greater(t, len(deps), 10, "go list found too few packages to prove anything")
	for _, dep := range deps {
		first, _, _ := strings.Cut(dep, "/")
		if !strings.Contains(first, ".") {
			continue // the standard library
		}
		// A test's main package, an external test package.
		dep = strings.TrimSuffix(strings.TrimSuffix(dep, ".test"), "_test")
		ok := dep == module+"/client" || strings.HasPrefix(dep, module+"/client/")
		for m := range clientRequires {
			ok = ok || dep == m || strings.HasPrefix(dep, m+"/")
		}
		if !ok {
			t.Errorf("the client module imports %s", dep)
		}
	}
}

// isTestSupport reports whether p is one of testSupport.
func isTestSupport(p string) bool {
	for _, s := range testSupport {
		if p == s {
			return true
		}
	}
	return false
}

// goList runs go list in dir and answers one line per package it lists:
// its import path (a test variant "p [p.test]" as p), or what a -f in args
// asks for.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	if len(args) == 0 || args[0] != "-f" {
		args = append([]string{"-f", "{{.ImportPath}}"}, args...)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, msg)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if args[1] == "{{.ImportPath}}" {
			line, _, _ = strings.Cut(line, " ")
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// metricsTier are the packages that may depend on Prometheus: the
// collectors, and the HTTP API that serves them (its own request metrics
// beside). The core the embedders import (the engine, settle, the
// scheduler, the ledgers, leader, webhook, rebuild...) must not: it hands
// what it does to observers and Stats, and package metrics turns that
// into collectors.
var metricsTier = []string{module + "/metrics", module + "/httpapi"}

// TestCoreImportsNoPrometheus holds that only metricsTier (and what is
// above it: the commands, test support) depends on Prometheus.
func TestCoreImportsNoPrometheus(t *testing.T) {
	root := moduleRoot(t)
	allowed := func(p string) bool {
		if strings.HasPrefix(p, toolTier) || isTestSupport(p) {
			return true
		}
		for _, m := range metricsTier {
			if p == m || strings.HasPrefix(p, m+"/") {
				return true
			}
		}
		return false
	}
	seen := false
	for _, line := range goList(t, root, "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...") {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if !strings.HasPrefix(dep, "github.com/prometheus/") {
				continue
			}
			if fields[0] == module+"/metrics" {
				seen = true
			}
			if !allowed(fields[0]) {
				t.Errorf("%s depends on %s: hand the figures to an observer or Stats, and export them in package metrics", fields[0], dep)
			}
			break
		}
	}
	require.True(t, seen, "the listing is read: package metrics depends on Prometheus")
}
