package client

import (
	"context"
	"net/http"
	"sort"
	"time"
)

// The operator's brakes (admin): pause and resume a campaign, block and
// unblock users of one. Every call is idempotent, so the client retries
// an unknown outcome.

// PauseCampaign pauses campaign id: grabs answer Paused until it is
// resumed (a holder still gets its packet); its window runs on. The
// answer comes once every shard is paused.
func (c *Client) PauseCampaign(ctx context.Context, id string) (*CampaignStatus, error) {
	return send[CampaignStatus](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/pause"), idempotent: true})
}

// ResumeCampaign resumes a paused campaign.
func (c *Client) ResumeCampaign(ctx context.Context, id string) (*CampaignStatus, error) {
	return send[CampaignStatus](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/resume"), idempotent: true})
}

// PauseDiscount pauses discount campaign id: new orders answer Paused;
// confirms and cancels go on.
func (c *Client) PauseDiscount(ctx context.Context, id string) (*DiscountStatus, error) {
	return send[DiscountStatus](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/pause"), idempotent: true})
}

// ResumeDiscount resumes a paused discount campaign.
func (c *Client) ResumeDiscount(ctx context.Context, id string) (*DiscountStatus, error) {
	return send[DiscountStatus](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/resume"), idempotent: true})
}

// BlockChange is the answer to a block (Added) or an unblock (Removed).
type BlockChange struct {
	Campaign string `json:"campaign"`
	Added    int    `json:"added"`   // users not blocked before
	Removed  int    `json:"removed"` // users that were blocked
}

// BlockedUser is a user blocked on a campaign, since when.
type BlockedUser struct {
	User  string    `json:"user"`
	Since time.Time `json:"since"`
}

// BlockedList is users blocked on a campaign: a page of them, sorted by
// user id, or, from BlockedUsers, all of them.
type BlockedList struct {
	Campaign string        `json:"campaign"`
	Users    []BlockedUser `json:"users"`
	Total    int           `json:"total"` // how many are blocked in all
	More     bool          `json:"more"`  // users follow this page
}

type blockBody struct {
	Users []string `json:"users"`
}

// BlockUsers blocks users (1 to 1000) on campaign id: their grabs answer
// Blocked; a user who holds a packet keeps it.
func (c *Client) BlockUsers(ctx context.Context, id string, users ...string) (*BlockChange, error) {
	return send[BlockChange](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/blocked"), idempotent: true, body: blockBody{users}})
}

// UnblockUsers lets users grab campaign id again.
func (c *Client) UnblockUsers(ctx context.Context, id string, users ...string) (*BlockChange, error) {
	return send[BlockChange](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/blocked/remove"), idempotent: true, body: blockBody{users}})
}

// BlockedUsers lists every user blocked on campaign id, reading it a
// page at a time.
func (c *Client) BlockedUsers(ctx context.Context, id string) (*BlockedList, error) {
	return c.allBlocked(ctx, id, c.BlockedUsersPage)
}

// BlockedUsersPage lists page p of the users blocked on campaign id: the
// pages walk the campaign's shards in turn, and each is sorted by user
// id. The next page starts at p.Offset + p.Limit while More.
func (c *Client) BlockedUsersPage(ctx context.Context, id string, p Page) (*BlockedList, error) {
	return send[BlockedList](ctx, c, call{method: http.MethodGet, path: campaignPath(id, "/blocked") + p.query(), idempotent: true})
}

// BlockDiscountUsers blocks users on discount campaign id: their new
// orders answer Blocked.
func (c *Client) BlockDiscountUsers(ctx context.Context, id string, users ...string) (*BlockChange, error) {
	return send[BlockChange](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/blocked"), idempotent: true, body: blockBody{users}})
}

// UnblockDiscountUsers lets users reserve discounts of campaign id again.
func (c *Client) UnblockDiscountUsers(ctx context.Context, id string, users ...string) (*BlockChange, error) {
	return send[BlockChange](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/blocked/remove"), idempotent: true, body: blockBody{users}})
}

// DiscountBlockedUsers lists every user blocked on discount campaign id.
func (c *Client) DiscountBlockedUsers(ctx context.Context, id string) (*BlockedList, error) {
	return c.allBlocked(ctx, id, c.DiscountBlockedUsersPage)
}

// DiscountBlockedUsersPage lists page p of the users blocked on discount
// campaign id, as BlockedUsersPage does.
func (c *Client) DiscountBlockedUsersPage(ctx context.Context, id string, p Page) (*BlockedList, error) {
	return send[BlockedList](ctx, c, call{method: http.MethodGet, path: discountPath(id, "/blocked") + p.query(), idempotent: true})
}

// allBlocked reads every page of a blocklist. A user blocked or
// unblocked meanwhile may shift between pages: each user is listed once.
func (c *Client) allBlocked(ctx context.Context, id string, page func(context.Context, string, Page) (*BlockedList, error)) (*BlockedList, error) {
	out := &BlockedList{Campaign: id, Users: []BlockedUser{}}
	seen := map[string]bool{}
	for p := (Page{Limit: MaxBlockedPage}); ; p.Offset += p.Limit {
		l, err := page(ctx, id, p)
		if err != nil {
			return nil, err
		}
		for _, u := range l.Users {
			if !seen[u.User] {
				seen[u.User] = true
				out.Users = append(out.Users, u)
			}
		}
		out.Total = l.Total
		if !l.More || len(l.Users) == 0 {
			break
		}
	}
	sort.Slice(out.Users, func(i, j int) bool { return out.Users[i].User < out.Users[j].User })
	return out, nil
}
