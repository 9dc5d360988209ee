package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ledgerEvery is how often a Ledger pings at most; ledgerTimeout bounds
// a ping.
const (
	ledgerEvery   = time.Second
	ledgerTimeout = time.Second
)

// Ledger collects hongbao_ledger_up: 1 when the ledger answered its ping
// at the last reading, 0 when it did not. A process whose ledger is down
// keeps working in part (the API grants from blocks already opened; a
// scheduler retries its passes), so its readiness does not say it; this
// does. A scrape reads it at most once a second, within a second, and
// concurrent scrapes share the reading. serve and hongbao settle register
// one beside their other collectors; use NewLedger.
type Ledger struct {
	ping func(context.Context) error
	desc *prometheus.Desc

	mu sync.Mutex
	at time.Time
	up float64
}

// NewLedger returns the collector of hongbao_ledger_up for a ledger that
// ping reaches (ledger.Ledger's Ping).
func NewLedger(ping func(context.Context) error) *Ledger {
	return &Ledger{ping: ping, desc: prometheus.NewDesc("hongbao_ledger_up",
		"Whether this process reaches the ledger (1) or not (0), by a ping at most once a second. While it is 0, creates and grabs that need the next block of a pool answer 503 unavailable, and settlement waits.",
		nil, nil)}
}

// Describe implements prometheus.Collector.
func (l *Ledger) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

// Collect implements prometheus.Collector.
func (l *Ledger) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, l.read())
}

// read returns the reading, pinging when it is older than ledgerEvery.
func (l *Ledger) read() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && time.Since(l.at) < ledgerEvery {
		return l.up
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	l.up = 1
	if l.ping(ctx) != nil {
		l.up = 0
	}
	l.at = time.Now()
	return l.up
}
