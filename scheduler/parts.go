package scheduler

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/leader"
)

// A deployment of Config.Parts parts above 1 shares settlement between
// its processes (settle.PartHolder, settle.PartOf): each part is a lease of
// package leader of its own, <LeaseName>:part:<p>, and a process settles
// the shards of the parts it holds. Processes announce themselves in the
// hash hb:lease:{<LeaseName>}:parts (parts.lua, every RenewEvery, living
// for two of them) and balance by that list: with n live processes sorted
// by id, the process of rank r wants the parts p with p mod n == r
// (ceil(P/n) at most, spread over each campaign's consecutive shards), lets
// go a part that its wanting process is taking, and takes a part that has
// been nobody's for two rounds while it holds fewer than ceil(P/n). A dead
// process drops out of the list within two rounds, and its parts' leases
// run out with their TTL; whoever wants them then is already asking, so
// they are taken within about one TTL. A process that joins takes its
// parts as their holders let them go, within about two rounds.
//
// The discount reaper runs with part 0 (once per deployment); the close on
// time and the other campaign-wide steps run with each campaign's root
// part (package settle).

//go:embed lua/parts.lua
var partsLua string

var partsScript = luascript.New(partsLua)

// ErrParts means that another live settle process of the deployment (same
// lease name, same Redis) counts a different number of parts: two
// processes would then settle the same shard under different leases.
var ErrParts = errors.New("scheduler: a live settle process of this deployment counts a different number of parts")

// MaxParts bounds Config.Parts.
const MaxParts = 1024

// parts takes, holds and balances this process's parts; it is the
// settle.PartHolder of the worker.
type parts struct {
	s      *Scheduler
	n      int
	member string
	rc     rueidis.Client
	log    *slog.Logger
	every  time.Duration // a round: announce, balance
	life   time.Duration // of an announcement

	mu   sync.Mutex
	held map[int]int64 // part -> the token of its lease

	// The loop's own.
	electors map[int]*leader.Elector
	freeLast map[int]bool // parts nobody wanted at the last round
	refused  bool
}

func newParts(s *Scheduler, member string) *parts {
	every := s.cfg.LeaseTTL / 3
	return &parts{
		s: s, n: s.cfg.Parts, member: member, rc: s.cfg.Settle.Redis,
		log: s.log.With("member", member), every: every, life: 2 * every,
		held: map[int]int64{}, electors: map[int]*leader.Elector{}, freeLast: map[int]bool{},
	}
}

// Parts is the deployment's number of parts (settle.PartHolder).
func (p *parts) Parts() int { return p.n }

// Held says whether this process holds part k, and its lease's token
// (settle.PartHolder).
func (p *parts) Held(k int) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.held[k]
	return t, ok
}

// list returns the parts held now, in order.
func (p *parts) list() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.held))
	for k := range p.held {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func partsKeys(prefix, name string) []string {
	tag := prefix + "{" + name + "}"
	return []string{tag + ":parts", tag + ":mark"}
}

// announce runs parts.lua: as member with the parts it takes, or, with
// member "", only checks that no live process counts other than n parts.
// It returns the parts each live member takes.
func announce(ctx context.Context, rc rueidis.Client, prefix, name, member string, n int, life time.Duration, taking []int) (map[string][]int, error) {
	csv := make([]string, len(taking))
	for i, k := range taking {
		csv[i] = strconv.Itoa(k)
	}
	args := []string{member, strconv.Itoa(n), strconv.FormatInt(max(life.Milliseconds(), 1), 10), strings.Join(csv, ",")}
	vals, err := partsScript.Exec(ctx, rc, partsKeys(prefix, name), args).AsStrSlice()
	if err != nil {
		if strings.Contains(err.Error(), "HBPARTS") {
			return nil, fmt.Errorf("%w (this one counts %d): %v", ErrParts, n, err)
		}
		return nil, fmt.Errorf("scheduler: announce: %w", err)
	}
	live := make(map[string][]int, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		var ks []int
		for _, f := range strings.Split(vals[i+1], ",") {
			if k, err := strconv.Atoi(f); err == nil {
				ks = append(ks, k)
			}
		}
		live[vals[i]] = ks
	}
	return live, nil
}

// run does a round every p.every until ctx ends, then lets every part go
// and withdraws the announcement.
func (p *parts) run(ctx context.Context) {
	t := time.NewTimer(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.leave()
			return
		case <-t.C:
		}
		if err := p.round(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("settlement parts: a round failed; the parts held are kept while their leases renew", "err", err)
		}
		t.Reset(p.every)
	}
}

// round announces this process and the parts it takes, then balances:
// takes the parts it wants and those nobody wanted for two rounds (below
// its share), and lets go those that the process wanting them is taking.
func (p *parts) round(ctx context.Context) error {
	taking := make([]int, 0, len(p.electors))
	for k := range p.electors {
		taking = append(taking, k)
	}
	sort.Ints(taking)
	live, err := announce(ctx, p.rc, p.s.ns.LeasePrefix(), p.s.cfg.LeaseName, p.member, p.n, p.life, taking)
	if errors.Is(err, ErrParts) {
		if !p.refused {
			p.log.Error("REFUSED: "+err.Error()+"; this process lets its parts go and settles nothing until every process agrees", "parts", p.n)
		}
		p.refused = true
		p.letGoAll()
		return err
	}
	if err != nil {
		return err
	}
	if p.refused {
		p.log.Info("settlement parts: no disagreeing process is live any more; taking parts again")
		p.refused = false
	}
	names := make([]string, 0, len(live))
	for m := range live {
		names = append(names, m)
	}
	sort.Strings(names)
	quota := (p.n + len(names) - 1) / len(names)
	takenBy := map[int]bool{}
	for m, ks := range live {
		if m == p.member {
			continue
		}
		for _, k := range ks {
			takenBy[k] = true
		}
	}
	free := map[int]bool{}
	for k := 0; k < p.n; k++ {
		want := names[k%len(names)]
		_, running := p.electors[k]
		switch {
		case want == p.member && !running:
			p.take(ctx, k)
		case want != p.member && running && slices.Contains(live[want], k):
			p.letGo(k)
		case want != p.member && !running && !takenBy[k]:
			free[k] = true
			if p.freeLast[k] && len(p.electors) < quota {
				p.take(ctx, k)
			}
		}
	}
	p.freeLast = free
	return nil
}

// take starts asking for part k's lease. While this process holds it, the
// worker settles its shards (woken at once, so that it takes over the
// previous holder's pending entries now), and with part 0 the discount
// reaper runs.
func (p *parts) take(ctx context.Context, k int) {
	el, err := leader.New(leader.Config{
		Redis: p.rc, Prefix: p.s.ns.LeasePrefix(), Name: p.s.cfg.LeaseName + ":part:" + strconv.Itoa(k), TTL: p.s.cfg.LeaseTTL,
		Logger: p.s.cfg.Logger.With("part", k),
		Fence:  p.s.fence(p.s.cfg.LeaseName + ":part:" + strconv.Itoa(k)),
		OnElected: func(ctx context.Context, t leader.Term) {
			p.setHeld(k, t.Token, true)
			defer p.setHeld(k, 0, false)
			p.s.worker.Wake()
			if k == 0 {
				p.s.reap(ctx)
			}
			<-ctx.Done()
		},
	})
	if err == nil {
		err = el.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		p.log.Error("settlement parts: cannot ask for a part's lease", "part", k, "err", err)
		return
	}
	p.electors[k] = el
}

// letGo releases part k (its lease is free at once).
func (p *parts) letGo(k int) {
	if el := p.electors[k]; el != nil {
		el.Stop()
		delete(p.electors, k)
	}
}

func (p *parts) letGoAll() {
	var wg sync.WaitGroup
	for k, el := range p.electors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			el.Stop()
		}()
		delete(p.electors, k)
	}
	wg.Wait()
}

// leave lets every part go and withdraws the announcement, so that the
// others rebalance at their next round.
func (p *parts) leave() {
	p.letGoAll()
	withdraw(p.s, p.member)
}

// setHeld records part k held (with its token) or let go, and tells
// Config.OnLease when the first is taken or the last let go.
func (p *parts) setHeld(k int, token int64, held bool) {
	p.mu.Lock()
	before := len(p.held)
	if held {
		p.held[k] = token
	} else {
		delete(p.held, k)
	}
	after := len(p.held)
	p.mu.Unlock()
	if on := p.s.cfg.OnLease; on != nil && (before == 0) != (after == 0) {
		on(after > 0)
	}
}
