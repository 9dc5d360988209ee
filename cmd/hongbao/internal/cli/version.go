package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao/metrics"
)

// buildInfo is what a binary knows of its build: the module version, and
// the VCS revision and time when it was built from a checkout.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// readBuildInfo reads the build of this binary (runtime/debug). A build
// the go command could not stamp (go run, a test binary) has the version
// "(devel)" and no revision.
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return buildInfoOf(bi)
}

// buildInfoOf is what bi says of the build; nil: nothing but the Go
// version that runs.
func buildInfoOf(bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: "(devel)", GoVersion: runtime.Version()}
	if bi == nil {
		return b
	}
	if v := bi.Main.Version; v != "" {
		b.Version = v
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified, _ = strconv.ParseBool(s.Value)
		}
	}
	return b
}

// collector is the hongbao_build_info gauge of this build, for the
// processes that export metrics (serve, settle).
func (b buildInfo) collector() prometheus.Collector {
	rev := b.Revision
	if b.Modified {
		rev += "+modified"
	}
	return metrics.NewBuildInfo(b.Version, rev, b.GoVersion)
}

// printVersion prints b as hongbao version and --version do.
func printVersion(w io.Writer, b buildInfo) {
	fmt.Fprintf(w, "hongbao %s\n", b.Version)
	if b.Revision != "" {
		mod := ""
		if b.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(w, "  revision %s%s\n", b.Revision, mod)
	}
	if b.Time != "" {
		fmt.Fprintf(w, "  time     %s\n", b.Time)
	}
	fmt.Fprintf(w, "  go       %s\n", b.GoVersion)
}

// versionCmd is "hongbao version": this build's version. It reads no
// config file and no environment: it answers whatever else is wrong.
type versionCmd struct {
	base
	asJSON bool
}

func newVersionCmd(env *IO) command { return &versionCmd{base: base{env: env}} }

func (c *versionCmd) parseFlags(args []string) error {
	fs := flag.NewFlagSet("hongbao version", flag.ContinueOnError)
	fs.SetOutput(c.env.Stderr)
	fs.BoolVar(&c.asJSON, "json", false, "print the version as JSON")
	setUsage(fs, c.env, "Usage: hongbao version [--json]\n\nPrints the module version of this build, the VCS revision and time it was built from\n(when built from a checkout) and the Go version. Every command's --version prints the same.\n\nFlags:")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func (c *versionCmd) run(context.Context) error {
	b := readBuildInfo()
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(b)
	}
	printVersion(c.env.Stdout, b)
	return nil
}
