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
	ns string
}

// NewBacklogs returns the Backlogs of the campaigns of namespace in rc
// ("" for the default; see Config.Namespace). A namespace that is not
// valid makes every call fail.
func NewBacklogs(rc rueidis.Client, namespace string) *Backlogs {
	return &Backlogs{rc: rc, ns: namespace}
}

// ReadBacklog is ReadBacklog on the client and namespace of b.
func (b *Backlogs) ReadBacklog(ctx context.Context, id string) (Backlog, error) {
	return ReadBacklog(ctx, b.rc, b.ns, id)
}

// Redrive is Redrive on the client and namespace of b.
func (b *Backlogs) Redrive(ctx context.Context, id string) (int64, error) {
	return Redrive(ctx, b.rc, b.ns, id)
}
