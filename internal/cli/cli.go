// Package cli holds the hongbao subcommands. Each takes its output as an
// io.Writer so tests run the CLI in-process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// IO is where a command reads and writes.
type IO struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests replace it.
	Getenv func(string) string
	// IsTerminal reports whether Stdout is a terminal (progress bars).
	IsTerminal bool
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, io *IO, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, io *IO, args []string) error) {
	commands[name] = command{summary: summary, run: run}
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
func Run(ctx context.Context, args []string, io *IO) int {
	if io.Getenv == nil {
		io.Getenv = os.Getenv
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(io.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(io.Stderr, "hongbao: unknown command %q\n\n", args[0])
		printHelp(io.Stderr)
		return 2
	}
	err := cmd.run(ctx, io, args[1:])
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(io.Stderr, "hongbao %s: %v\n", args[0], err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "hongbao: red packets and quota under extreme concurrency, one atomic Lua script per decision")
	fmt.Fprintln(w, "\nUsage: hongbao <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'hongbao <command> -h' for the flags of a command.")
}

// newFlagSet makes a flag set that reports errors instead of exiting.
func newFlagSet(name string, io *IO) *flag.FlagSet {
	fs := flag.NewFlagSet("hongbao "+name, flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from the environment variable HONGBAO_<NAME> (dashes become
// underscores), if set.
func parseFlags(fs *flag.FlagSet, io *IO, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "HONGBAO_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := io.Getenv(env); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = usageErrorf("%s=%q: %v", env, v, e)
			}
		}
	})
	return err
}
