package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

// prom asks the stack's own Prometheus.
type prom struct {
	url    string
	client *http.Client
}

func (p *prom) get(path string, v any) error {
	resp, err := p.client.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("prometheus %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// alerts are the alerts by name, "firing" or "pending".
func (p *prom) alerts() (map[string]string, error) {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/alerts", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range r.Data.Alerts {
		name := a.Labels["alertname"]
		if out[name] != "firing" {
			out[name] = a.State
		}
	}
	return out, nil
}

// targets are the scrape targets by instance, with their health.
func (p *prom) targets() (map[string]string, error) {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Labels map[string]string `json:"labels"`
				Health string            `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/targets", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range r.Data.ActiveTargets {
		out[t.Labels["instance"]] = t.Health
	}
	return out, nil
}

// waitTargetsUp waits until every target is up, and returns them.
func (p *prom) waitTargetsUp(ctx context.Context, within time.Duration) (map[string]string, error) {
	var last map[string]string
	var lastErr error
	err := waitFor(ctx, within, time.Second, func() bool {
		last, lastErr = p.targets()
		if lastErr != nil || len(last) == 0 {
			return false
		}
		for _, h := range last {
			if h != "up" {
				return false
			}
		}
		return true
	})
	if err != nil {
		return last, fmt.Errorf("not every Prometheus target is up within %s: %v %v", within, last, lastErr)
	}
	return last, nil
}

// alertWatch polls the alerts in the background and keeps, per phase,
// every alert seen firing and pending.
type alertWatch struct {
	p      *prom
	mu     sync.Mutex
	phase  string
	firing map[string]map[string]bool
	pend   map[string]map[string]bool
}

func newAlertWatch(p *prom) *alertWatch {
	return &alertWatch{p: p, firing: map[string]map[string]bool{}, pend: map[string]map[string]bool{}}
}

func (w *alertWatch) setPhase(ph string) {
	w.mu.Lock()
	w.phase = ph
	w.mu.Unlock()
}

func (w *alertWatch) run(ctx context.Context) {
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// poll records the alerts now, and returns them.
func (w *alertWatch) poll() map[string]string {
	a, err := w.p.alerts()
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, st := range a {
		m := w.pend
		if st == "firing" {
			m = w.firing
		}
		if m[w.phase] == nil {
			m[w.phase] = map[string]bool{}
		}
		m[w.phase][name] = true
	}
	return a
}

// seen is what fired and what was only pending during a phase.
func (w *alertWatch) seen(ph string) (firing, pending []string) {
	firing, pending = []string{}, []string{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for n := range w.firing[ph] {
		firing = append(firing, n)
	}
	for n := range w.pend[ph] {
		if !w.firing[ph][n] {
			pending = append(pending, n)
		}
	}
	sort.Strings(firing)
	sort.Strings(pending)
	return firing, pending
}

// waitFiring waits until the alert fires (polling every 2 s).
func (w *alertWatch) waitFiring(ctx context.Context, name string, within time.Duration) error {
	err := waitFor(ctx, within, 2*time.Second, func() bool { return w.poll()[name] == "firing" })
	if err != nil {
		return fmt.Errorf("alert %s did not fire within %s", name, within)
	}
	return nil
}
