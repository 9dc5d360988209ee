package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// send runs call k and decodes its reply into a new T.
func send[T any](ctx context.Context, c *Client, k call) (*T, error) {
	out := new(T)
	k.out = out
	if err := c.do(ctx, k); err != nil {
		return nil, err
	}
	return out, nil
}

// create posts a create body under its Idempotency-Key, so that retries
// answer the same campaign; without a key from the caller it draws one,
// which makes this call's own retries safe.
func create[T any](ctx context.Context, c *Client, path string, spec any, key string) (*T, error) {
	if key == "" {
		key = newKey()
	}
	return send[T](ctx, c, call{method: http.MethodPost, path: path, idempotent: true, body: spec, key: key})
}

// Page chooses a page of a list: at most Limit items (0: the most a page
// holds, MaxListPage or MaxBlockedPage) from Offset.
type Page struct {
	Offset, Limit int
}

// The most items one page holds (openapi.json's limits).
const (
	MaxListPage    = 200  // campaigns, discount campaigns
	MaxBlockedPage = 1000 // blocked users
)

// query is the page's query string, "" for the first default page.
func (p Page) query() string {
	q := url.Values{}
	if p.Offset != 0 {
		q.Set("offset", strconv.Itoa(p.Offset))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func campaignPath(id, action string) string {
	return "/v1/campaigns/" + url.PathEscape(id) + action
}

func discountPath(id, action string) string {
	return "/v1/discounts/" + url.PathEscape(id) + action
}

// CreateCampaign creates a red packet campaign (admin). With the same
// IdempotencyKey and spec it answers the campaign created before.
func (c *Client) CreateCampaign(ctx context.Context, spec CampaignSpec) (*Campaign, error) {
	return create[Campaign](ctx, c, "/v1/campaigns", spec, spec.IdempotencyKey)
}

// Campaign reads a campaign's status (admin).
func (c *Client) Campaign(ctx context.Context, id string) (*CampaignStatus, error) {
	return send[CampaignStatus](ctx, c, call{method: http.MethodGet, path: campaignPath(id, ""), idempotent: true})
}

// Campaigns lists the first page of the registered campaigns (admin):
// created and not yet settled, by close time, the earliest first.
func (c *Client) Campaigns(ctx context.Context) (*CampaignList, error) {
	return c.CampaignsPage(ctx, Page{})
}

// CampaignsPage lists page p of the registered campaigns (admin): the
// live ones, and the closed ones until settlement has refunded them. The
// next page starts at p.Offset + p.Limit while the answer says More.
func (c *Client) CampaignsPage(ctx context.Context, p Page) (*CampaignList, error) {
	return send[CampaignList](ctx, c, call{method: http.MethodGet, path: "/v1/campaigns" + p.query(), idempotent: true})
}

// CloseCampaign closes a campaign now (admin); before it opens this
// cancels it. Closing a closed campaign answers its status.
func (c *Client) CloseCampaign(ctx context.Context, id string) (*CampaignStatus, error) {
	return send[CampaignStatus](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/close"), idempotent: true})
}

// Grab grabs a packet of campaign id for the user of the client's token.
// A business outcome (sold out, not open, closed) is an answer, not an
// error. Retries are safe: the user's packet comes back as AlreadyGranted.
func (c *Client) Grab(ctx context.Context, id string) (*Grab, error) {
	if c.rpc != nil {
		return c.grabRPC(ctx, id)
	}
	return send[Grab](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/grab"), idempotent: true})
}

// Held reads the packet the token's user holds of campaign id; ErrNoGrant
// when none.
func (c *Client) Held(ctx context.Context, id string) (*Packet, error) {
	return send[Packet](ctx, c, call{method: http.MethodGet, path: campaignPath(id, "/grants/me"), idempotent: true})
}

// Redrive puts a campaign's dead grants back for settlement (admin). It
// is not retried once sent: a lost reply is ErrOutcomeUnknown (read the
// campaign's dead entries to learn what happened).
func (c *Client) Redrive(ctx context.Context, id string) (*Redrive, error) {
	return send[Redrive](ctx, c, call{method: http.MethodPost, path: campaignPath(id, "/redrive")})
}

// CreateCampaignJSON creates a red packet campaign (admin) from a create
// body as the API takes it (openapi.json's CreateCampaign: amounts as
// decimal strings or cents), sent as it is, under idempotencyKey (empty:
// one drawn for this call's retries), as CreateCampaign does.
func (c *Client) CreateCampaignJSON(ctx context.Context, body json.RawMessage, idempotencyKey string) (*Campaign, error) {
	return create[Campaign](ctx, c, "/v1/campaigns", body, idempotencyKey)
}

// CreateDiscountJSON is CreateCampaignJSON for a discount campaign
// (openapi.json's CreateDiscount).
func (c *Client) CreateDiscountJSON(ctx context.Context, body json.RawMessage, idempotencyKey string) (*Discount, error) {
	return create[Discount](ctx, c, "/v1/discounts", body, idempotencyKey)
}

// CreateDiscount creates a discount campaign (admin), idempotent as
// CreateCampaign.
func (c *Client) CreateDiscount(ctx context.Context, spec DiscountSpec) (*Discount, error) {
	return create[Discount](ctx, c, "/v1/discounts", spec, spec.IdempotencyKey)
}

// Discount reads a discount campaign's status (admin).
func (c *Client) Discount(ctx context.Context, id string) (*DiscountStatus, error) {
	return send[DiscountStatus](ctx, c, call{method: http.MethodGet, path: discountPath(id, ""), idempotent: true})
}

// DiscountsPage lists page p of the registered discount campaigns
// (admin), as CampaignsPage does the red packet campaigns.
func (c *Client) DiscountsPage(ctx context.Context, p Page) (*DiscountList, error) {
	return send[DiscountList](ctx, c, call{method: http.MethodGet, path: "/v1/discounts" + p.query(), idempotent: true})
}

// CloseDiscount stops a discount campaign's reservations (admin); confirms
// of those held go on until their hold ends.
func (c *Client) CloseDiscount(ctx context.Context, id string) (*DiscountStatus, error) {
	return send[DiscountStatus](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/close"), idempotent: true})
}

// Reserve reserves a discount for an order (payment key). The same user
// and order id again answers the same amount (Already), so retries are
// safe; ErrCancelled, ErrExpired: reserve with a new order id;
// ErrOrderMismatch: the order was reserved for another amount.
func (c *Client) Reserve(ctx context.Context, id string, o Order) (*Reservation, error) {
	if c.rpc != nil {
		return c.reserveRPC(ctx, id, o)
	}
	return send[Reservation](ctx, c, call{method: http.MethodPost, path: discountPath(id, "/reserve"), idempotent: true, body: o})
}

// Confirm confirms the discount of a user's order once it is paid
// (payment key); repeated, it answers the same.
func (c *Client) Confirm(ctx context.Context, id string, o OrderRef) (*OrderOutcome, error) {
	return c.order(ctx, id, o, "/confirm")
}

// Cancel releases the discount of a user's order (payment key); repeated,
// it answers the same; Expired when the hold had ended first.
// ErrConfirmed: a confirmed discount cannot be cancelled.
func (c *Client) Cancel(ctx context.Context, id string, o OrderRef) (*OrderOutcome, error) {
	return c.order(ctx, id, o, "/cancel")
}

func (c *Client) order(ctx context.Context, id string, o OrderRef, action string) (*OrderOutcome, error) {
	if c.rpc != nil {
		return c.orderRPC(ctx, id, o, action == "/confirm")
	}
	body := struct {
		UserID string `json:"user_id"`
	}{o.UserID}
	path := discountPath(id, "/orders/"+url.PathEscape(o.OrderID)+action)
	return send[OrderOutcome](ctx, c, call{method: http.MethodPost, path: path, idempotent: true, body: body})
}

// Healthy asks /healthz whether the process is alive.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, call{method: http.MethodGet, path: "/healthz", idempotent: true})
}

// Ready asks /readyz whether the service takes requests: its Redis and
// ledger answer and it is not stopping. ErrNotReady when not.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, call{method: http.MethodGet, path: "/readyz", idempotent: true})
}
