package settle

import (
	"context"

	"github.com/redis/rueidis"
)

// Backlogs reads and redrives the settlement backlogs of the campaigns of
// one Redis: ReadBacklog and Redrive bound to its client, for a service
// (the HTTP API) that holds no Redis client of its own.
type Backlogs struct {
	rc rueidis.Client
}

// NewBacklogs returns the Backlogs of the campaigns in rc.
func NewBacklogs(rc rueidis.Client) *Backlogs { return &Backlogs{rc: rc} }

// ReadBacklog is ReadBacklog on the client of b.
func (b *Backlogs) ReadBacklog(ctx context.Context, id string) (Backlog, error) {
	return ReadBacklog(ctx, b.rc, id)
}

// Redrive is Redrive on the client of b.
func (b *Backlogs) Redrive(ctx context.Context, id string) (int64, error) {
	return Redrive(ctx, b.rc, id)
}
