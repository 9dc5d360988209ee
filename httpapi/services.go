package httpapi

import (
	"context"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// The services the handlers call, each as small as its handlers need. A
// *hongbao.Engine is an Engine and a Store, and its Discounts() is a
// Discounts; a *settle.Backlogs is a Settlement. Tests give fakes.

// Grabber is what the grab routes need: grab a packet, read the one held.
type Grabber interface {
	Grab(ctx context.Context, id, user string) (hongbao.Grant, error)
	Held(ctx context.Context, id, user string) (hongbao.Grant, error)
}

// Campaigns is what the red packet campaign routes need besides grabs:
// create, read, list, close, pause and block.
type Campaigns interface {
	Create(ctx context.Context, spec hongbao.Spec) (*hongbao.Campaign, error)
	Status(ctx context.Context, id string) (*hongbao.Status, error)
	CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error)
	CloseCampaign(ctx context.Context, id string) (*hongbao.Status, error)
	Pause(ctx context.Context, id string) (*hongbao.Status, error)
	Resume(ctx context.Context, id string) (*hongbao.Status, error)
	Block(ctx context.Context, id string, users []string) (int, error)
	Unblock(ctx context.Context, id string, users []string) (int, error)
	BlockedPage(ctx context.Context, id string, offset, limit int) ([]hongbao.BlockedUser, int, error)
}

// Discounts is what the discount routes need: a hongbao.Discounts.
type Discounts interface {
	Create(ctx context.Context, spec hongbao.DiscountSpec) (*hongbao.Discount, error)
	Status(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error)
	CloseCampaign(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	Reserve(ctx context.Context, id, user, order string, orderCents int64) (hongbao.Reservation, error)
	Confirm(ctx context.Context, id, user, order string) (hongbao.Reservation, error)
	Cancel(ctx context.Context, id, user, order string) (hongbao.Reservation, error)
	Pause(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	Resume(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	Block(ctx context.Context, id string, users []string) (int, error)
	Unblock(ctx context.Context, id string, users []string) (int, error)
	BlockedPage(ctx context.Context, id string, offset, limit int) ([]hongbao.BlockedUser, int, error)
}

// Engine is every red packet call the API makes, and what its metrics
// need (metrics.Observed): the engine's counters, and Observe to count
// every grab and discount call the engine answers.
type Engine interface {
	Grabber
	Campaigns
	Stats() hongbao.Stats
	Observe(o hongbao.Observer) (remove func())
}

// discountsOf is the Discounts of an Engine that has them (a
// *hongbao.Engine), or nil.
func discountsOf(e Engine) Discounts {
	if d, ok := e.(interface{ Discounts() hongbao.Discounts }); ok {
		return d.Discounts()
	}
	return nil
}

// Settlement is what the console and the campaign answers need of
// settlement: a campaign's backlog, and the redrive of its dead grants.
type Settlement interface {
	ReadBacklog(ctx context.Context, id string) (settle.Backlog, error)
	Redrive(ctx context.Context, id string) (int64, error)
}

// Store is what the API needs of the store beneath the engine, apart
// from the domain: readiness (whether Redis takes writes and has the
// replicas the engine waits for), the persistence setting for the
// metrics, and the request count that every process shares
// (Config.GlobalRate).
type Store interface {
	Health(ctx context.Context) hongbao.Health
	Persistence(ctx context.Context) (string, error)
	CountRequests(ctx context.Context, sec, n int64) (int64, error)
}
