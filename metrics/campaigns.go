package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// MaxScrapedCampaigns bounds the per-campaign series of one scrape, and
// the page of the index read at a time: the campaigns that close first.
// The settlement totals still add up every live campaign.
const MaxScrapedCampaigns = 200

// CampaignReader reads the red packet campaigns and the Redis they live
// in: a *hongbao.Engine.
type CampaignReader interface {
	CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error)
	Status(ctx context.Context, id string) (*hongbao.Status, error)
	Persistence(ctx context.Context) (string, error)
}

// DiscountReader reads the discount campaigns: a hongbao.Discounts.
type DiscountReader interface {
	CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error)
	Status(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
}

// BacklogReader reads a campaign's settlement backlog: a
// *settle.Backlogs.
type BacklogReader interface {
	ReadBacklog(ctx context.Context, id string) (settle.Backlog, error)
}

// CampaignsConfig configures NewCampaigns.
type CampaignsConfig struct {
	// Campaigns reads the red packet campaigns: an Engine. Required.
	Campaigns CampaignReader
	// Backlogs reads their settlement backlogs: settle.NewBacklogs on the
	// engine's Redis client and namespace. Required.
	Backlogs BacklogReader
	// Discounts, if not nil, reads the discount campaigns for their
	// budget gauges: the Engine's Discounts(). Default nil: none.
	Discounts DiscountReader
	// SettledCents, if not nil, reads the cents of a campaign's grants
	// already in the ledger, for the backlog in cents
	// (hongbao_settlement_lag_cents and its per-campaign series): the
	// campaign's granted cents in Redis less these. Default nil: the
	// cents metrics are absent.
	SettledCents func(ctx context.Context, id string) (int64, error)
	// Timeout bounds the reads of one scrape. Default 5s.
	Timeout time.Duration
	// Logger hears the scrapes that failed to read Redis. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Campaigns collects what Redis holds of the live campaigns, read when
// Prometheus scrapes: their pools and pauses, the settlement backlog
// (entries, cents, the oldest's age, dead entries) summed over every live
// campaign and per campaign for the first MaxScrapedCampaigns, the
// discount campaigns' budgets, and whether Redis fsyncs every write. A
// reading serves the scrapes of the next second: /metrics answers anyone
// who reaches its listener, and a flood of scrapes must not load the
// Redis that decides grabs. Use NewCampaigns.
type Campaigns struct {
	state     *stateReader
	discounts *discountReader // nil without CampaignsConfig.Discounts
}

// NewCampaigns returns the collector of the campaigns cfg reads.
func NewCampaigns(cfg CampaignsConfig) *Campaigns {
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	c := &Campaigns{state: newStateReader(cfg)}
	if cfg.Discounts != nil {
		c.discounts = newDiscountReader(cfg.Discounts, cfg.Timeout, cfg.Logger)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Campaigns) Describe(ch chan<- *prometheus.Desc) {
	c.state.describe(ch)
	if c.discounts != nil {
		for _, d := range c.discounts.descs {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector.
func (c *Campaigns) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.state.cachedRead(c.state.read) {
		ch <- m
	}
	if c.discounts != nil {
		for _, m := range c.discounts.cachedRead(c.discounts.read) {
			ch <- m
		}
	}
}

// scrapeCache keeps a reading of Redis for cacheFor. Scrapes that arrive
// together wait for the one reading Redis.
type scrapeCache struct {
	cacheFor time.Duration
	mu       sync.Mutex
	cachedAt time.Time
	cached   []prometheus.Metric
}

// cachedRead returns the last reading while it is younger than cacheFor,
// else read's; a read that is not ok leaves the last reading in place
// and returns it.
func (c *scrapeCache) cachedRead(read func() ([]prometheus.Metric, bool)) []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached != nil && time.Since(c.cachedAt) < c.cacheFor {
		return c.cached
	}
	out, ok := read()
	if !ok {
		return c.cached
	}
	c.cached, c.cachedAt = out, time.Now()
	return out
}

// stateReader reads the red packet campaigns' gauges.
type stateReader struct {
	cfg CampaignsConfig
	scrapeCache

	poolPackets, poolCents, paused, lag, lagCents, campLag, campLagCents *prometheus.Desc
	oldest, dead, fsync, scrapeErr                                       *prometheus.Desc
}

func newStateReader(cfg CampaignsConfig) *stateReader {
	d := prometheus.NewDesc
	return &stateReader{cfg: cfg, scrapeCache: scrapeCache{cacheFor: time.Second},
		poolPackets:  d("hongbao_campaign_pool_remaining_packets", "Packets still in a live campaign's pool.", []string{"campaign"}, nil),
		poolCents:    d("hongbao_campaign_pool_remaining_cents", "Cents still in a live campaign's pool.", []string{"campaign"}, nil),
		paused:       d("hongbao_campaign_paused", "The share of a live campaign's shards an operator paused: 1 paused, 0 running, between while a pause or resume is written or after one was cut short.", []string{"campaign"}, nil),
		lag:          d("hongbao_settlement_lag_entries", "Grants stream entries not yet settled (undelivered + pending), over live campaigns.", nil, nil),
		lagCents:     d("hongbao_settlement_lag_cents", "Cents granted in Redis and not yet in the ledger, over live campaigns (with a ledger).", nil, nil),
		campLag:      d("hongbao_settlement_campaign_lag_entries", "Grants stream entries not yet settled, per live campaign (the first 200 to close).", []string{"campaign"}, nil),
		campLagCents: d("hongbao_settlement_campaign_lag_cents", "Cents granted in Redis and not yet in the ledger, per live campaign (the first 200 to close).", []string{"campaign"}, nil),
		oldest:       d("hongbao_settlement_oldest_pending_seconds", "Age of the oldest grant not yet settled, over live campaigns (0 when none).", nil, nil),
		dead:         d("hongbao_settlement_dead_entries", "Grants in dead streams, waiting for an operator, over live campaigns.", nil, nil),
		fsync:        d("hongbao_redis_fsync_always", "1 when Redis has appendonly yes and appendfsync always, else 0.", nil, nil),
		scrapeErr:    d("hongbao_state_scrape_errors", "1 when reading the campaign state from Redis failed in this scrape.", nil, nil),
	}
}

func (s *stateReader) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.poolPackets, s.poolCents, s.paused, s.lag, s.lagCents, s.campLag, s.campLagCents,
		s.oldest, s.dead, s.fsync, s.scrapeErr} {
		ch <- d
	}
}

// read reads the gauges from Redis (and the ledger, with SettledCents).
func (s *stateReader) read() ([]prometheus.Metric, bool) {
	var out []prometheus.Metric
	emit := func(m prometheus.Metric) { out = append(out, m) }
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	if p, err := s.cfg.Campaigns.Persistence(ctx); err == nil {
		v := 0.0
		if p == "always" {
			v = 1
		}
		emit(prometheus.MustNewConstMetric(s.fsync, prometheus.GaugeValue, v))
	}
	failed := 0.0
	if err := s.campaigns(ctx, emit); err != nil {
		s.cfg.Logger.Warn("metrics: reading campaign state failed", "err", err)
		failed = 1
	}
	emit(prometheus.MustNewConstMetric(s.scrapeErr, prometheus.GaugeValue, failed))
	return out, true
}

// campaigns sends the pool and backlog gauges of the first
// MaxScrapedCampaigns campaigns (those that close first) and the
// settlement gauges summed over every live campaign: an alert on the
// backlog must not miss the 201st. The index is read a page at a time.
// A campaign that cannot be read is an error of the scrape (the first is
// returned), but the others are still summed and the totals still sent:
// a series that vanished would silence its alert, while a figure short
// of one campaign comes with hongbao_state_scrape_errors 1.
func (s *stateReader) campaigns(ctx context.Context, emit func(prometheus.Metric)) error {
	var tot backlogSum
	var failed error
	for offset := 0; ; {
		ids, total, err := s.cfg.Campaigns.CampaignsPage(ctx, offset, MaxScrapedCampaigns)
		if err != nil {
			failed = err
			break
		}
		for _, id := range ids {
			if err := s.campaign(ctx, emit, id, offset == 0, &tot); err != nil && failed == nil {
				failed = fmt.Errorf("campaign %s: %w", id, err)
			}
		}
		offset += len(ids)
		if len(ids) == 0 || offset >= total {
			break
		}
	}
	emit(prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, float64(tot.lag)))
	emit(prometheus.MustNewConstMetric(s.dead, prometheus.GaugeValue, float64(tot.dead)))
	emit(prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, tot.oldest))
	if s.cfg.SettledCents != nil {
		emit(prometheus.MustNewConstMetric(s.lagCents, prometheus.GaugeValue, float64(tot.cents)))
	}
	return failed
}

// backlogSum adds up the settlement backlog over campaigns.
type backlogSum struct {
	lag, dead, cents int64
	oldest           float64
}

// campaign reads one campaign's backlog into tot, and sends its own gauges
// when first (in the first page). Its backlog in cents reads the ledger
// before Redis: grants settled between the two reads count as unsettled,
// so the figure may run a little high, never below the truth.
func (s *stateReader) campaign(ctx context.Context, emit func(prometheus.Metric), id string, first bool, tot *backlogSum) error {
	var settled int64
	if s.cfg.SettledCents != nil {
		c, err := s.cfg.SettledCents(ctx, id)
		if err != nil {
			return err
		}
		settled = c
	}
	var st *hongbao.Status
	if first || s.cfg.SettledCents != nil {
		var err error
		if st, err = s.cfg.Campaigns.Status(ctx, id); err != nil {
			return nil // still loading, or gone between the listing and the read
		}
	}
	if first {
		emit(prometheus.MustNewConstMetric(s.poolPackets, prometheus.GaugeValue, float64(st.RemainingCount), id))
		emit(prometheus.MustNewConstMetric(s.poolCents, prometheus.GaugeValue, float64(st.RemainingCents), id))
		emit(prometheus.MustNewConstMetric(s.paused, prometheus.GaugeValue, float64(st.PausedShards)/float64(max(st.Shards, 1)), id))
	}
	b, err := s.cfg.Backlogs.ReadBacklog(ctx, id)
	if errors.Is(err, settle.ErrNoCampaign) {
		return nil // settled and gone since the listing
	}
	if err != nil {
		return err
	}
	tot.lag += b.Unsettled()
	tot.dead += b.Dead
	tot.oldest = max(tot.oldest, b.Oldest.Seconds())
	if first {
		emit(prometheus.MustNewConstMetric(s.campLag, prometheus.GaugeValue, float64(b.Unsettled()), id))
	}
	if s.cfg.SettledCents != nil {
		cents := max(st.GrantedCents-settled, 0)
		tot.cents += cents
		if first {
			emit(prometheus.MustNewConstMetric(s.campLagCents, prometheus.GaugeValue, float64(cents), id))
		}
	}
	return nil
}

// discountReader reads the live discount campaigns' confirmed, reserved
// and remaining amounts.
type discountReader struct {
	engine  DiscountReader
	timeout time.Duration
	log     *slog.Logger
	scrapeCache

	descs map[string]*prometheus.Desc
}

// discountGauges name the gauges, by the DiscountStatus field they show.
var discountGauges = []struct{ name, help string }{
	{"confirmed_cents", "Cents of a live discount campaign's confirmed discounts."},
	{"confirmed_count", "Confirmed discounts of a live discount campaign."},
	{"reserved_cents", "Cents held by a live discount campaign's reservations."},
	{"reserved_count", "Reservations held by a live discount campaign."},
	{"remaining_cents", "Cents of a live discount campaign's budget neither confirmed nor reserved (compensation included)."},
	{"remaining_count", "Discounts of a live discount campaign's quota neither confirmed nor reserved."},
	{"compensation_cents", "Cents a live discount campaign's clipping set aside, waiting to top up later discounts."},
}

func newDiscountReader(e DiscountReader, timeout time.Duration, log *slog.Logger) *discountReader {
	c := &discountReader{engine: e, timeout: timeout, log: log, scrapeCache: scrapeCache{cacheFor: time.Second}, descs: map[string]*prometheus.Desc{}}
	for _, g := range discountGauges {
		c.descs[g.name] = prometheus.NewDesc("hongbao_discount_"+g.name, g.help, []string{"campaign"}, nil)
	}
	return c
}

// read reads the gauges; it is not ok when the campaigns could not be
// listed.
func (c *discountReader) read() ([]prometheus.Metric, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ids, _, err := c.engine.CampaignsPage(ctx, 0, MaxScrapedCampaigns)
	if err != nil {
		c.log.Warn("metrics: listing discount campaigns failed", "err", err)
		return nil, false
	}
	out := []prometheus.Metric{}
	for _, id := range ids {
		st, err := c.engine.Status(ctx, id)
		if err != nil {
			continue // loading, or gone between the listing and the read
		}
		for name, v := range map[string]int64{
			"confirmed_cents": st.ConfirmedCents, "confirmed_count": st.ConfirmedCount,
			"reserved_cents": st.ReservedCents, "reserved_count": st.ReservedCount,
			"remaining_cents": st.RemainingCents, "remaining_count": st.RemainingCount,
			"compensation_cents": st.CompensationCents,
		} {
			out = append(out, prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, float64(v), id))
		}
	}
	return out, true
}
