// Command hongbao runs red packet rains and the tools around them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/hongbao/hongbao/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], &cli.IO{
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		IsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
	})
	stop()
	os.Exit(code)
}
