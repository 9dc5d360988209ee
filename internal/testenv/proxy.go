package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of a server that can lose a reply on
// purpose: the request reaches the server and runs, the answer never
// reaches the client, and the client's connection breaks. That is the
// "outcome unknown" case of a write.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener
	drop   atomic.Bool
	cut    atomic.Bool
	delay  atomic.Int64 // ns each reply is held back
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	held   *sync.Cond // on mu; signalled by Resume
	paused bool       // under mu
}

// NewProxy listens on a free loopback port and forwards to target; it
// closes when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.held = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// DropNextReply makes the proxy swallow the next bytes the server sends
// and then close that client connection.
func (p *Proxy) DropNextReply() { p.drop.Store(true) }

// Cut makes the server unreachable through the proxy: open connections
// break and new ones are closed as soon as they are accepted, until
// Restore.
func (p *Proxy) Cut() {
	p.cut.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// Restore ends a Cut: new connections reach the server again.
func (p *Proxy) Restore() { p.cut.Store(false) }

// Pause holds every request back on its way to the server until Resume,
// as a stalled client (a paused process, a network holding its packets)
// would: what reached the server before runs and is answered, nothing
// sent after reaches it.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Resume ends a Pause: the requests held back go on, in order.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.held.Broadcast()
	p.mu.Unlock()
}

// Delay holds every reply back by d before passing it on (0: none), as a
// slow network or a stalled server would.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut.Load() { // cut while we dialled
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.requests(c, s); s.Close() }()
		go func() { defer p.wg.Done(); p.replies(c, s); c.Close() }()
	}
}

func (p *Proxy) requests(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.held.Wait()
			}
			p.mu.Unlock()
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) replies(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if p.drop.CompareAndSwap(true, false) {
				s.Close()
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
