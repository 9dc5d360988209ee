// Command hongbao runs red packet rains and the tools around them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"golang.org/x/term"

	"github.com/hongbao/hongbao/cmd/hongbao/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// HONGBAO_CPUPROFILE names a file to write a CPU profile of the whole
	// command to: how BENCHMARKS.md's profiles are taken.
	if path := os.Getenv("HONGBAO_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err != nil {
			fmt.Fprintln(os.Stderr, "hongbao: cpu profile:", err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "hongbao: cpu profile:", err)
		} else {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	code := cli.Run(ctx, os.Args[1:], &cli.IO{
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		IsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
	})
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}
