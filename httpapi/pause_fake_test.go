package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// overtakenEngine answers every Pause and Resume (of both kinds) with the
// status of a campaign that a later call of the other direction
// overtook, when overtaken is set.
type overtakenEngine struct {
	*fakeEngine
	overtaken bool
}

func (e *overtakenEngine) answer(paused bool) *hongbao.Status {
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	st := &hongbao.Status{
		Campaign: hongbao.Campaign{ID: "c1", State: hongbao.StateOpen, Total: 1000, Count: 4, Split: "random",
			OpensAt: now.Add(-time.Minute), ClosesAt: now.Add(time.Hour), Funding: "platform", Shards: 2},
		RemainingCount: 4, RemainingCents: 1000, Now: now, Overtaken: e.overtaken,
	}
	// An overtaken call answers what the later one wants.
	if paused != e.overtaken {
		st.Paused, st.PausedShards = true, 2
	}
	return st
}

func (e *overtakenEngine) Pause(context.Context, string) (*hongbao.Status, error) {
	return e.answer(true), nil
}

func (e *overtakenEngine) Resume(context.Context, string) (*hongbao.Status, error) {
	return e.answer(false), nil
}

// overtakenDiscounts answers the discount Pause and Resume as
// overtakenEngine answers its own.
type overtakenDiscounts struct {
	fakeDiscounts
	e *overtakenEngine
}

func (d overtakenDiscounts) answer(paused bool) *hongbao.DiscountStatus {
	st := d.e.answer(paused)
	return &hongbao.DiscountStatus{
		Discount: hongbao.Discount{ID: "d1", State: hongbao.StateOpen, Budget: 1000, Quota: 4, Min: 1, Max: 500,
			OpensAt: st.OpensAt, ClosesAt: st.ClosesAt, Funding: "platform", Shards: 2, Hold: time.Minute},
		RemainingCount: 4, RemainingCents: 1000, Now: st.Now,
		Paused: st.Paused, PausedShards: st.PausedShards, Overtaken: st.Overtaken,
	}
}

func (d overtakenDiscounts) Pause(context.Context, string) (*hongbao.DiscountStatus, error) {
	return d.answer(true), nil
}

func (d overtakenDiscounts) Resume(context.Context, string) (*hongbao.DiscountStatus, error) {
	return d.answer(false), nil
}

// TestPauseOvertakenOnFakes: a pause or resume that a later one overtook
// answers 200 with the campaign as it is (paused as the later call
// wants) and overtaken true, which openapi.json describes; one that was
// not overtaken has no overtaken field.
func TestPauseOvertakenOnFakes(t *testing.T) {
	t.Parallel()
	e := &overtakenEngine{fakeEngine: &fakeEngine{}}
	s, err := httpapi.New(httpapi.Config{
		Engine: e, Discounts: overtakenDiscounts{fakeDiscounts{f: e.fakeEngine}, e},
		Settlement: &fakeSettlement{}, Store: fakeStore{},
		UserSecrets: []httpapi.Secret{userSecret}, AdminKeys: [][]byte{adminKey}, Logger: quiet(),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ts := &testServer{URL: hs.URL, Server: s, Client: &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 10 * time.Second}}
	admin := string(adminKey)
	for _, over := range []bool{true, false} {
		e.overtaken = over
		for _, path := range []string{"/v1/campaigns/c1/", "/v1/discounts/d1/"} {
			for _, action := range []string{"pause", "resume"} {
				r := ts.do(t, "POST", path+action, admin, "")
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				body := r.json(t)
				wantPaused := (action == "pause") != over
				require.Equal(t, wantPaused, body["paused"], "%s%s overtaken %v", path, action, over)
				if over {
					require.Equal(t, true, body["overtaken"], "%s%s", path, action)
				} else {
					require.NotContains(t, body, "overtaken", "%s%s", path, action)
				}
			}
		}
	}
}
