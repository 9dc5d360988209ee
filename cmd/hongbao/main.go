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
	// The first SIGTERM or SIGINT ends ctx: the command stops (serve after
	// its --shutdown-delay); a second one closes stopNow: at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := context.WithCancel(context.Background())
	stopNow := make(chan struct{})
	go func() {
		<-sigs
		stop()
		<-sigs
		close(stopNow)
	}()
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
		StopNow:    stopNow,
	})
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}
