package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hongbao/hongbao"
)

// Readiness. A process is ready when it can grant: Redis answers and
// takes writes (Store.Health writes a key of the deployment's own), the
// replicas its WAITs ask for are attached, and Config.Ready's checks
// pass. Config.Degraded's checks (the ledger) are read and reported, and
// held against nothing: their outage refuses some requests (503
// unavailable) while the others go on, and taking every process out of
// its load balancer for it would refuse all of them.

// readyFor is how long a readiness reading answers /readyz.
const readyFor = time.Second

// readyTimeout bounds a reading: its checks run at once, each within it,
// so /readyz answers within about a second even when a dependency hangs
// (a probe's timeout should be longer; the chart gives 2s).
const readyTimeout = time.Second

// readyCache keeps the last readiness reading: /readyz answers from it
// for readyFor, and concurrent callers past that share one new reading, so
// a flood of /readyz is not a flood of Redis and ledger round trips.
type readyCache struct {
	mu     sync.Mutex
	at     time.Time
	result *readiness
	flight singleflight.Group
	last   map[string]string // the status of each check at the reading before, for the log
}

// readiness is one reading of the readiness checks.
type readiness struct {
	status map[string]string // "ok", or what is wrong, by check
	failed []string          // "check: status" of the checks that make the process unready, sorted
}

// readyBody is /readyz's answer when ready.
type readyBody struct {
	Status string            `json:"status"` // "ready"
	Checks map[string]string `json:"checks"`
}

// notReadyBody is /readyz's answer when a check fails: the error shape,
// and every check's reading.
type notReadyBody struct {
	Error  errorDetail       `json:"error"`
	Status string            `json:"status"` // "not_ready"
	Checks map[string]string `json:"checks"`
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.stopping.Load() {
		s.refuse(w, errShuttingDown, 0)
		return
	}
	res := s.readiness()
	if len(res.failed) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, notReadyBody{
			Error:  errorDetail{Code: CodeNotReady, Message: "not ready: " + strings.Join(res.failed, "; ")},
			Status: "not_ready", Checks: res.status,
		})
		return
	}
	writeJSON(w, http.StatusOK, readyBody{Status: "ready", Checks: res.status})
}

// readiness returns a reading at most readyFor old.
func (s *Server) readiness() *readiness {
	c := &s.ready
	c.mu.Lock()
	if c.result != nil && time.Since(c.at) < readyFor {
		res := c.result
		c.mu.Unlock()
		return res
	}
	c.mu.Unlock()
	v, _, _ := c.flight.Do("", func() (any, error) {
		res := s.checkReady()
		c.mu.Lock()
		c.result, c.at = res, time.Now()
		c.mu.Unlock()
		return res, nil
	})
	return v.(*readiness)
}

// checkReady runs every readiness check at once, on a context of its
// own: the reading is shared, so no one caller's cancel may end it.
func (s *Server) checkReady() *readiness {
	ctx, cancel := context.WithTimeout(context.Background(), min(readyTimeout, s.cfg.Timeout))
	defer cancel()
	res := &readiness{status: map[string]string{}}
	causes := map[string]error{}
	var mu sync.Mutex
	put := func(name, status string, holds bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.status[name], causes[name] = status, err
		if holds && status != "ok" {
			res.failed = append(res.failed, name+": "+status)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		h := s.cfg.Store.Health(ctx)
		put("redis", redisStatus(h), true, h.Err)
		if h.Wanted > 0 && h.Redis == "ok" {
			put("replicas", replicasStatus(h), true, h.Err)
		}
	})
	for _, checks := range []struct {
		of    map[string]func(context.Context) error
		holds bool
	}{{s.cfg.Ready, true}, {s.cfg.Degraded, false}} {
		for name, f := range checks.of {
			wg.Go(func() {
				err := f(ctx)
				put(name, checkStatus(err), checks.holds, err)
			})
		}
	}
	wg.Wait()
	sort.Strings(res.failed)
	s.logReadiness(res, causes)
	return res
}

// logReadiness logs the checks whose status changed since the reading
// before: a failure once when it begins (with its cause, which /readyz
// does not show), and the return to ok; not once a second while it lasts.
func (s *Server) logReadiness(res *readiness, causes map[string]error) {
	c := &s.ready
	c.mu.Lock()
	last := c.last
	c.last = res.status
	c.mu.Unlock()
	for name, status := range res.status {
		was, seen := last[name]
		switch {
		case status == was:
		case status != "ok":
			unready := false
			for _, f := range res.failed {
				unready = unready || strings.HasPrefix(f, name+": ")
			}
			s.log.Warn("readiness check failed", "check", name, "status", status, "unready", unready, "err", causes[name])
		case seen:
			s.log.Info("readiness check ok again", "check", name, "was", was)
		}
	}
}

// redisStatus is the reading of Redis: ok, unreachable (and why, in
// general terms), or the code of its refusal of writes.
func redisStatus(h hongbao.Health) string {
	switch h.Redis {
	case "ok":
		return "ok"
	case "unreachable":
		return checkStatus(h.Err)
	}
	return "refuses writes: " + h.Redis
}

// replicasStatus is the reading of the replicas a WAIT asks for.
func replicasStatus(h hongbao.Health) string {
	switch {
	case h.Err != nil:
		return "unknown: INFO replication could not be read"
	case h.ReplicasShort():
		return h.String()
	}
	return "ok"
}

// checkStatus is the status of a check that failed with err: unreachable,
// and why in general terms. The error itself is for the log: it may name
// hosts, users or databases, and /readyz answers anyone.
func checkStatus(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "unreachable: timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unreachable: connection refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return "unreachable: connection closed"
	}
	return "unreachable: see the log"
}
