package cli

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// progress draws a one-line progress bar on a terminal while long work
// runs; off a terminal it draws nothing.
type progress struct {
	w     io.Writer
	label string
	total int64
	done  atomic.Int64
	stop  chan struct{}
	ended chan struct{}
}

func startProgress(env *IO, on bool, label string, total int64) *progress {
	p := &progress{w: env.Stdout, label: label, total: total, stop: make(chan struct{}), ended: make(chan struct{})}
	if !on || !env.IsTerminal {
		close(p.ended)
		return p
	}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw()
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) Set(n int64) { p.done.Store(n) }
func (p *progress) Add(n int64) { p.done.Add(n) }

func (p *progress) draw() {
	done := p.done.Load()
	frac := 1.0
	if p.total > 0 {
		frac = min(float64(done)/float64(p.total), 1)
	}
	const width = 30
	fill := int(frac * width)
	fmt.Fprintf(p.w, "\r%-8s [%s%s] %3.0f%% %d/%d", p.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), frac*100, done, p.total)
}

// Done stops the bar (drawing it one last time) and waits for it.
func (p *progress) Done() {
	select {
	case <-p.ended:
		return
	default:
	}
	close(p.stop)
	<-p.ended
}
