package httpapi

import (
	"context"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// The services the handlers call, each as small as its handlers need. A
// *hongbao.Engine is an Engine and a Store; a *settle.Backlogs is a
// Settlement. Tests give fakes.

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
	Close(ctx context.Context, id string) (*hongbao.Status, error)
	Pause(ctx context.Context, id string) (*hongbao.Status, error)
	Resume(ctx context.Context, id string) (*hongbao.Status, error)
	Block(ctx context.Context, id string, users []string) (int, error)
	Unblock(ctx context.Context, id string, users []string) (int, error)
	BlockedUsers(ctx context.Context, id string) ([]hongbao.BlockedUser, error)
}

// Discounts is what the discount routes need.
type Discounts interface {
	CreateDiscount(ctx context.Context, spec hongbao.DiscountSpec) (*hongbao.Discount, error)
	DiscountStatus(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	DiscountCampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error)
	CloseDiscount(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	ReserveDiscount(ctx context.Context, id, user, order string, orderCents int64) (hongbao.Reservation, error)
	ConfirmDiscount(ctx context.Context, id, user, order string) (hongbao.Reservation, error)
	CancelDiscount(ctx context.Context, id, user, order string) (hongbao.Reservation, error)
	PauseDiscount(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	ResumeDiscount(ctx context.Context, id string) (*hongbao.DiscountStatus, error)
	BlockDiscount(ctx context.Context, id string, users []string) (int, error)
	UnblockDiscount(ctx context.Context, id string, users []string) (int, error)
	DiscountBlockedUsers(ctx context.Context, id string) ([]hongbao.BlockedUser, error)
}

// Engine is every domain call the API makes, and the grab batching
// counters its metrics read.
type Engine interface {
	Grabber
	Campaigns
	Discounts
	Stats() hongbao.Stats
}

// Settlement is what the console and the campaign answers need of
// settlement: a campaign's backlog, and the redrive of its dead grants.
type Settlement interface {
	ReadBacklog(ctx context.Context, id string) (settle.Backlog, error)
	Redrive(ctx context.Context, id string) (int64, error)
}

// Store is what the API needs of the store beneath the engine, apart
// from the domain: readiness, the persistence setting for the metrics,
// and the request count that every process shares (Config.GlobalRate).
type Store interface {
	Ping(ctx context.Context) error
	Persistence(ctx context.Context) (string, error)
	CountRequests(ctx context.Context, sec, n int64) (int64, error)
}
