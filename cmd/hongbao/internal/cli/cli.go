// Package cli holds the hongbao subcommands. Each takes its output as an
// io.Writer so tests run the CLI in-process.
//
// A command is a small type that goes through the same steps (as
// benbjohnson/wtf's cmd/wtfd does): parseFlags reads and checks the command
// line and starts nothing, so bad input fails before any work; open
// connects to or starts what the command needs; run does the work; close
// lets go of what open started, last opened first, whatever happened
// before. The commands are listed in one table, commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
)

// IO is where a command reads and writes.
type IO struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests replace it.
	Getenv func(string) string
	// IsTerminal reports whether Stdout is a terminal (progress bars).
	IsTerminal bool
	// HTTPClient sends the calls of a command that talks to a running
	// serve (campaign); nil: package client's default. Tests give one
	// that checks every reply against openapi.json.
	HTTPClient *http.Client
	// StopNow, when not nil, is closed when the process is asked to stop
	// a second time (a second SIGTERM or SIGINT after the one that ended
	// the command's context): a stopping serve then skips what is left of
	// its --shutdown-delay.
	StopNow <-chan struct{}

	// declared, when set, is handed every flag set newFlagSet makes
	// (everyCommandFlags).
	declared func(*flag.FlagSet)
}

// command is one subcommand, run as parseFlags, open, run, close.
type command interface {
	// parseFlags reads and checks the arguments after the command's name.
	// It starts nothing.
	parseFlags(args []string) error
	// open connects to or starts what run needs.
	open(ctx context.Context) error
	// run does the command's work.
	run(ctx context.Context) error
	// close lets go of what open started, in reverse order; it runs after
	// a successful parseFlags, whether open and run succeeded or not.
	close()
}

// commands is every subcommand, in the order help lists them.
var commands = []struct {
	name, summary string
	new           func(env *IO) command
}{
	{"bench", "measure the engine against the classic one-EVAL-per-grab design (--mode discount: discounts against the published design)", newBenchCmd},
	{"campaign", "on a running serve: create, list and close campaigns (red packet or discount), pause, resume, block or unblock users of one, read its status", newCampaignCmd},
	{"demo", "run a simulated red packet rain end to end and check the invariants", newDemoCmd},
	{"discount-demo", "run a simulated payment rush on a discount campaign end to end and check the invariants", newDiscountDemoCmd},
	{"healthcheck", "exit 0 when a URL answers 2xx within --timeout, else 1 with the reason: a container health check for images without curl", newHealthcheckCmd},
	{"migrate", "create a ledger, or apply the migrations it lacks, and print its identity and schema version", newMigrateCmd},
	{"owner", "read or change the owner a campaign records: the ledger or webhook wallet it settles into", newOwnerCmd},
	{"race", "run a naive GET-then-SET and hongbao's scripts side by side, and count what each gets wrong", newRaceCmd},
	{"rebuild", "restore a red packet campaign into a Redis that lost it, from the ledger and what survives", newRebuildCmd},
	{"reconcile", "compare a campaign in Redis with the ledger, grant by grant; --balances: every ledger balance with its journal", newReconcileCmd},
	{"serve", "run the HTTP service: the /v1 API, settlement and the scheduler", newServeCmd},
	{"settle", "run the scheduler apart from the API: settlement into the ledger, close on time, refunds, the discount reaper (--metrics-listen: its metrics); --drain: settle what is there and exit", newSettleCmd},
	{"token", "mint a user token (HS256 JWT) from the configured secret, for tests and demos", newTokenCmd},
	{"verify", "check offline what a campaign published: a draw log against its commitment, a proof against the root, a receipt against the JWKS", newVerifyCmd},
	{"version", "print this build's version: the module version, the VCS revision and time, the Go version", newVersionCmd},
}

// base is what every command holds: where it reads and writes, and what to
// close. Its open does nothing, for commands that open nothing.
type base struct {
	env *IO
	closers
}

func (base) open(context.Context) error { return nil }

// closers lets go of what a command opened, last opened first.
type closers []func()

// deferClose adds f to what close runs.
func (c *closers) deferClose(f func()) { *c = append(*c, f) }

func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// Run runs the command line args (without the program name) and returns the
// process exit status.
func Run(ctx context.Context, args []string, env *IO) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		printVersion(env.Stdout, readBuildInfo())
		return 0
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(env.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	i := commandIndex(args[0])
	if i < 0 {
		fmt.Fprintf(env.Stderr, "hongbao: unknown command %q\n\n", args[0])
		printHelp(env.Stderr)
		return 2
	}
	err := runCommand(ctx, commands[i].new(env), args[1:])
	if errors.Is(err, errVersion) {
		printVersion(env.Stdout, readBuildInfo())
		return 0
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(env.Stderr, "hongbao %s: %v\n", args[0], err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func commandIndex(name string) int {
	for i, c := range commands {
		if c.name == name {
			return i
		}
	}
	return -1
}

// runCommand takes cmd through its steps.
func runCommand(ctx context.Context, cmd command, args []string) error {
	if err := cmd.parseFlags(args); err != nil {
		return err
	}
	defer cmd.close()
	if err := cmd.open(ctx); err != nil {
		return err
	}
	return cmd.run(ctx)
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "hongbao: red packets and quota under extreme concurrency, one atomic Lua script per decision")
	fmt.Fprintln(w, "\nUsage: hongbao <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'hongbao <command> -h' for the flags of a command.")
}

// errVersion is what parsing a command line with --version returns: Run
// prints the version and exits 0.
var errVersion = errors.New("version asked")

// newFlagSet makes a flag set that reports errors instead of exiting, with
// the flags every command has: --config, the file of flags every command
// of a deployment reads (parseFlags reads it), and --version.
func newFlagSet(name string, env *IO) *flag.FlagSet {
	fs := flag.NewFlagSet("hongbao "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.String(configFlag, "", configUsage)
	fs.Bool(versionFlag, false, "print this build's version (as hongbao version does) and exit")
	if env.declared != nil {
		env.declared(fs)
	}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from the environment variable HONGBAO_<NAME> (dashes become
// underscores), if set, then every flag neither sets from the config file
// (--config or HONGBAO_CONFIG), when one is named.
func parseFlags(fs *flag.FlagSet, env *IO, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return fillFlags(fs, env)
}

// fillFlags fills the flags of fs not given on the command line from the
// environment, then those the environment does not set either from the
// config file.
func fillFlags(fs *flag.FlagSet, env *IO) error {
	set := setByUser(fs, env)
	if err := fillFromEnv(fs, env); err != nil {
		return err
	}
	return readConfig(fs, set)
}

// parseOperands is parseFlags for a command that takes operands: flags and
// operands may come in any order ("--" ends the flags); it returns the
// operands.
func parseOperands(fs *flag.FlagSet, env *IO, args []string) ([]string, error) {
	var operands []string
	for {
		if err := parseArgs(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			operands = append(operands, rest...)
			break
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
	return operands, fillFlags(fs, env)
}

// parseArgs parses args into fs; a bad flag is a usage error, --version
// errVersion.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	if f := fs.Lookup(versionFlag); f != nil && f.Value.String() == "true" {
		return errVersion
	}
	return nil
}

// fillFromEnv fills every flag of fs not given on the command line from
// its environment variable, if set.
func fillFromEnv(fs *flag.FlagSet, env *IO) error {
	set := given(fs)
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		// HONGBAO_VERSION is too common a name for a deployment's own
		// variables to be read as --version.
		if set[f.Name] || err != nil || f.Name == versionFlag {
			return
		}
		name := envName(f.Name)
		if v := env.Getenv(name); v != "" {
			if e := f.Value.Set(v); e != nil {
				// Neither the value nor Set's error (which quotes it): the
				// variable may hold a secret.
				err = usageErrorf("%s: not a valid value for --%s", name, f.Name)
			}
		}
	})
	return err
}

// parseCommand makes the flag set of command name with the flags that
// declare adds, in order, and the usage text, and parses args into it
// (parseFlags: the environment fills the flags not given).
func (b *base) parseCommand(name, usage string, args []string, declare ...func(*flag.FlagSet)) (*flag.FlagSet, error) {
	fs := newFlagSet(name, b.env)
	for _, d := range declare {
		d(fs)
	}
	setUsage(fs, b.env, usage)
	return fs, parseFlags(fs, b.env, args)
}

// setUsage makes fs's usage text, then the flags.
func setUsage(fs *flag.FlagSet, env *IO, text string) {
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, text)
		fs.PrintDefaults()
	}
}

// given returns the flags of fs set on the command line.
func given(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}
