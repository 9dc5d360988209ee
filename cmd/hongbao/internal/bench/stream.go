package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// DefaultStreamWindow is the grabs a stream keeps in flight by default:
// as many as serve holds for a stream.
const DefaultStreamWindow = 1000

// streamRun is one stream measurement's shared state: the messages still
// to send, and for every grab (its ref) when its message went out and
// whether it was answered.
type streamRun struct {
	o        HTTPOptions
	id, key  string
	url      string
	total    int64 // grabs: Users x Clicks
	messages int64
	next     atomic.Int64
	sentAt   []atomic.Int64 // by message: UnixNano of its send
	answered []atomic.Uint32
	twice    atomic.Int64
	stray    atomic.Int64
	bar      Progress
}

// streamTally is what one stream counted.
type streamTally struct {
	outcomes map[string]int64
	lat      latencies
	sent     int64
	end      string // "ok", or the code the stream ended with
	err      error
}

// measureStream grabs campaign id for o.Users users o.Clicks times each
// through o.Streams GrabStreams (gRPC over h2c, a connection each), o.Batch
// grabs a message, at most o.Window grabs in flight on each; a stream's
// results are read as they come. Requests counts the messages sent,
// Statuses the streams' ends, Outcomes the grabs' outcomes (or error
// codes). Every grab must be answered exactly once.
func measureStream(ctx context.Context, id string, o HTTPOptions) (*HTTPResult, error) {
	r := &streamRun{o: o, id: id, key: cmp.Or(o.GatewayKey, o.AdminKey), url: o.URL}
	r.total = int64(o.Users) * int64(o.Clicks)
	r.messages = (r.total + int64(o.Batch) - 1) / int64(o.Batch)
	r.sentAt = make([]atomic.Int64, r.messages)
	r.answered = make([]atomic.Uint32, r.total)
	r.bar = o.Progress("grabbing on streams", r.total)
	defer r.bar.Done()
	tallies := make([]streamTally, o.Streams)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range tallies {
		wg.Go(func() { tallies[w] = r.stream(ctx) })
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	outcomes, statuses := map[string]int64{}, map[string]int64{}
	lats := make([]latencies, len(tallies))
	var msgs, errs int64
	var firstErr error
	for i, t := range tallies {
		for k, v := range t.outcomes {
			outcomes[k] += v
		}
		statuses[t.end]++
		lats[i] = t.lat
		msgs += t.sent
		if t.err != nil {
			errs++
			firstErr = cmp.Or(firstErr, t.err)
		}
	}
	var missing int64
	for i := range r.answered {
		if r.answered[i].Load() == 0 {
			missing++
		}
	}
	switch {
	case r.twice.Load() > 0 || r.stray.Load() > 0:
		return nil, fmt.Errorf("the streams answered %d grabs twice and %d refs never sent", r.twice.Load(), r.stray.Load())
	case missing > 0 && firstErr != nil:
		return nil, fmt.Errorf("%d of %d grabs unanswered: %w", missing, r.total, firstErr)
	case missing > 0:
		return nil, fmt.Errorf("%d of %d grabs unanswered, though every stream ended well", missing, r.total)
	}
	h := histogramOf(lats)
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q))/1000, 3) }
	res := &HTTPResult{
		Users: o.Users, Requests: msgs, Concurrency: o.Streams, Seconds: round(el, 3),
		PerSec: round(float64(msgs)/el, 1), P50ms: ms(50), P90ms: ms(90), P99ms: ms(99),
		MaxMs: round(float64(h.Max())/1000, 3), Outcomes: outcomes, Statuses: statuses, Errors: errs,
	}
	if g := outcomes["granted"]; g > 0 {
		res.GrantsSec = round(float64(g)/el, 1)
	}
	return res, nil
}

// stream runs one stream on a connection of its own until no message is
// left to send and every grab it sent was answered.
func (r *streamRun) stream(ctx context.Context) streamTally {
	t := streamTally{outcomes: map[string]int64{}, end: "ok"}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	rpc := hongbaov1connect.NewGrabServiceClient(&http.Client{Transport: tr}, r.url, connect.WithGRPC())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := rpc.GrabStream(ctx)
	st.RequestHeader().Set("Authorization", "Bearer "+r.key)
	// window holds a token per grab in flight.
	window := make(chan struct{}, r.o.Window)
	var sendErr error
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		sendErr = r.send(ctx, st, window, &t.sent)
		if sendErr != nil {
			cancel()
		}
	}()
	recvErr := r.receive(st, window, &t)
	cancel()
	<-sent
	_ = st.CloseResponse()
	if err := cmp.Or(recvErr, sendErr); err != nil {
		t.err = err
		t.end = "error"
		if ce := new(connect.Error); errors.As(err, &ce) {
			t.end = ce.Code().String()
		}
	}
	return t
}

// send sends the messages it takes from the run, each once the window
// has room for its grabs, and closes the sending side when none is left.
func (r *streamRun) send(ctx context.Context, st *connect.BidiStreamForClient[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse], window chan struct{}, count *int64) error {
	batch := int64(r.o.Batch)
	grabs := make([]hongbaov1.StreamGrab, batch)
	msg := &hongbaov1.GrabStreamRequest{CampaignId: r.id, Grabs: make([]*hongbaov1.StreamGrab, 0, batch)}
	for {
		k := r.next.Add(1) - 1
		if k >= r.messages {
			return st.CloseRequest()
		}
		msg.Grabs = msg.Grabs[:0]
		for n := k * batch; n < min((k+1)*batch, r.total); n++ {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			g := &grabs[n-k*batch]
			g.UserId, g.Ref = UserName(int(n%int64(r.o.Users))), uint64(n)
			msg.Grabs = append(msg.Grabs, g)
		}
		r.sentAt[k].Store(time.Now().UnixNano())
		if err := st.Send(msg); err != nil {
			return err
		}
		*count++
		// Only the first message names the campaign.
		msg.CampaignId = ""
	}
}

// receive reads results until the stream ends, counting each and freeing
// its place in the window.
func (r *streamRun) receive(st *connect.BidiStreamForClient[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse], window chan struct{}, t *streamTally) error {
	for {
		res, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		for _, g := range res.GetResults() {
			ref := g.GetRef()
			if ref >= uint64(r.total) {
				r.stray.Add(1)
				continue
			}
			if r.answered[ref].Add(1) > 1 {
				r.twice.Add(1)
			}
			if e := g.GetError(); e != "" {
				t.outcomes[e]++
			} else {
				t.outcomes[hongbao.Outcome(g.GetOutcome()).String()]++
			}
			if at := r.sentAt[ref/uint64(r.o.Batch)].Load(); at > 0 {
				t.lat.add(time.Duration(now - at))
			}
			<-window
		}
		r.bar.Add(int64(len(res.GetResults())))
	}
}

// runStreamRounds runs o.Rounds rounds of the stream, the batch route and,
// with o.EngineRedisURL, the engine, each round starting one further
// along "stream, batch, engine", serve's two on campaigns of their own.
func runStreamRounds(ctx context.Context, api *client.Client, httpc *http.Client, o HTTPOptions) (*HTTPReport, error) {
	rep := &HTTPReport{}
	var streams, batches []*HTTPResult
	var engines []*Result
	for i := 0; i < o.Rounds; i++ {
		rd, st, b, eng, err := runStreamRound(ctx, api, httpc, o, i)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		rep.Rounds = append(rep.Rounds, rd)
		streams, batches, engines = append(streams, st), append(batches, b), append(engines, eng)
	}
	median := func(of func(HTTPRound) float64) int {
		order := make([]int, len(rep.Rounds))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return of(rep.Rounds[order[a]]) < of(rep.Rounds[order[b]]) })
		return order[(len(order)-1)/2]
	}
	rep.EngineRatio = rep.Rounds[median(func(r HTTPRound) float64 { return r.EngineRatio })].EngineRatio
	rep.StreamRatio = rep.Rounds[median(func(r HTTPRound) float64 { return r.StreamRatio })].StreamRatio
	rep.StreamBatchRatio = rep.Rounds[median(func(r HTTPRound) float64 { return r.StreamBatchRatio })].StreamBatchRatio
	m := median(func(r HTTPRound) float64 { return cmp.Or(r.StreamRatio, r.StreamBatchRatio) })
	rep.Stream, rep.Serve, rep.Engine = streams[m], batches[m], engines[m]
	return rep, nil
}

// runStreamRound is round i of runStreamRounds.
func runStreamRound(ctx context.Context, api *client.Client, httpc *http.Client, o HTTPOptions, i int) (HTTPRound, *HTTPResult, *HTTPResult, *Result, error) {
	var rd HTTPRound
	var st, b *HTTPResult
	var eng *Result
	create := func() (string, error) {
		c, err := api.CreateCampaign(ctx, client.CampaignSpec{TotalCents: o.Total, Count: o.Packets})
		if err != nil {
			return "", fmt.Errorf("create the campaign: %w", err)
		}
		return c.ID, nil
	}
	var err error
	if rd.StreamCampaign, err = create(); err != nil {
		return rd, nil, nil, nil, err
	}
	if rd.Campaign, err = create(); err != nil {
		return rd, nil, nil, nil, err
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"stream", func() (err error) {
			st, err = withServeCPU(o, "stream", rd.StreamCampaign, func() (*HTTPResult, error) {
				return measureStream(ctx, rd.StreamCampaign, o)
			})
			if err == nil {
				err = checkGranted("the stream", st, o)
			}
			return err
		}},
		{"batch", func() (err error) {
			b, err = measureServe(ctx, api, httpc, rd.Campaign, nil, o)
			if err == nil {
				err = checkGranted("the batch route", b, o)
			}
			return err
		}},
	}
	if o.EngineRedisURL != "" {
		steps = append(steps, struct {
			name string
			run  func() error
		}{"engine", func() (err error) {
			_, eng, err = measureBeside(ctx, httpc, "", nil, "", o, i)
			return err
		}})
	}
	var order []string
	for k := range steps {
		s := steps[(i+k)%len(steps)]
		if err := s.run(); err != nil {
			return rd, nil, nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		order = append(order, s.name)
	}
	rd.First, rd.Order = order[0], strings.Join(order, ",")
	rd.ServePerSec, rd.ServeGrantsSec, rd.ServeCPUUsPerReq, rd.ServeCPUUsPerUser = b.PerSec, b.GrantsSec, b.CPUUsPerRequest, b.CPUUsPerUser
	rd.StreamGrantsSec, rd.StreamCPUUsPerUser = st.GrantsSec, st.CPUUsPerUser
	if b.GrantsSec > 0 {
		rd.StreamBatchRatio = round(st.GrantsSec/b.GrantsSec, 3)
	}
	if eng != nil && eng.GrantsPerSec > 0 {
		rd.EngineGrantsSec = eng.GrantsPerSec
		rd.EngineRatio = round(b.GrantsSec/eng.GrantsPerSec, 3)
		rd.StreamRatio = round(st.GrantsSec/eng.GrantsPerSec, 3)
	}
	return rd, st, b, eng, nil
}

// checkGranted checks a measurement's counts on a campaign created here:
// every grab answered, and, where no grab was refused, one grant per
// packet when the users outnumber the packets, one per user otherwise.
func checkGranted(what string, r *HTTPResult, o HTTPOptions) error {
	total := int64(o.Users) * int64(max(o.Clicks, 1))
	var answered int64
	for _, v := range r.Outcomes {
		answered += v
	}
	want := int64(min(o.Users, o.Packets))
	switch g := r.Outcomes["granted"]; {
	case answered != total:
		return fmt.Errorf("%s answered %d of %d grabs", what, answered, total)
	case g > want:
		return fmt.Errorf("%s granted %d: more than %d", what, g, want)
	case g < want && answered == r.Outcomes["granted"]+r.Outcomes["already_granted"]+r.Outcomes["sold_out"]:
		return fmt.Errorf("%s granted %d of %d, though no grab was refused", what, g, want)
	}
	return nil
}
