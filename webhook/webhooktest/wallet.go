// Package webhooktest is a host's wallet behind package webhook, kept in
// memory: a reference receiver built only on webhook's exported contract
// (ReadEvent, the event types, GrantsReply, TotalsReply), for the tests of
// hongbao and of the hosts that embed it. Serve it with httptest.NewServer.
//
// It does what the package doc of webhook asks of a host: it verifies
// every request, refuses an event whose owner is not its name, applies
// each idempotency key once (a replay is answered 2xx as if new), answers
// a grant that disagrees with what it holds as a conflict, and answers
// "totals" from what it holds. Its Drop and SetRefund methods tamper with
// what it holds, so a reconcile has something to find.
package webhooktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/webhook"
)

// Wallet is a host's wallet in memory. It is an http.Handler, safe for
// concurrent use.
type Wallet struct {
	name   string
	secret []byte

	mu        sync.Mutex
	campaigns map[string]*campaign
	foreign   int
}

// campaign is what the wallet holds of one campaign.
type campaign struct {
	funded     bool
	funding    string
	total      int64
	grants     map[int64]webhook.Grant // by seq
	users      map[string]int64        // user -> seq
	refundDone bool
	refunded   int64
}

// New returns an empty wallet named name (the Config.Name of the sinks
// that settle into it) that takes requests signed with secret.
func New(name string, secret []byte) *Wallet {
	return &Wallet{name: name, secret: append([]byte(nil), secret...), campaigns: map[string]*campaign{}}
}

func (w *Wallet) campaign(id string) *campaign {
	c := w.campaigns[id]
	if c == nil {
		c = &campaign{grants: map[int64]webhook.Grant{}, users: map[string]int64{}}
		w.campaigns[id] = c
	}
	return c
}

// ServeHTTP takes one event: 401 for a bad signature or an expired one,
// 400 for a malformed request or an unknown type, 403 for an event of a
// campaign owned by another wallet, 409 for a fund or refund that
// disagrees with the one held, 422 for grants of a campaign refunded
// already; 2xx otherwise, with a GrantsReply or a TotalsReply.
func (w *Wallet) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	ev, err := webhook.ReadEvent(w.secret, r, webhook.DefaultWindow, time.Now())
	switch {
	case errors.Is(err, webhook.ErrSignature), errors.Is(err, webhook.ErrExpired):
		http.Error(rw, "unauthorized", http.StatusUnauthorized)
		return
	case err != nil:
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Owner != "" && ev.Owner != w.name {
		w.foreign++
		http.Error(rw, fmt.Sprintf("campaign %s is owned by %s, not by %s", ev.Campaign, ev.Owner, w.name), http.StatusForbidden)
		return
	}
	var reply any
	status := http.StatusOK
	switch ev.Type {
	case webhook.EventFund:
		var f webhook.FundEvent
		if err = ev.Decode(&f); err == nil {
			status = w.fund(f)
		}
	case webhook.EventGrants:
		var g webhook.GrantsEvent
		if err = ev.Decode(&g); err == nil {
			reply, status = w.grants(g)
		}
	case webhook.EventRefund:
		var f webhook.RefundEvent
		if err = ev.Decode(&f); err == nil {
			status = w.refund(f)
		}
	case webhook.EventTotals:
		reply = w.totals(ev.Campaign)
	default:
		err = fmt.Errorf("unknown event type %q", ev.Type)
	}
	switch {
	case err != nil:
		http.Error(rw, err.Error(), http.StatusBadRequest)
	case status != http.StatusOK:
		http.Error(rw, http.StatusText(status), status)
	case reply != nil:
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(reply)
	}
}

func (w *Wallet) fund(f webhook.FundEvent) int {
	c := w.campaign(f.Campaign)
	if c.funded {
		if c.funding != f.Funding || c.total != f.TotalCents {
			return http.StatusConflict
		}
		return http.StatusOK
	}
	c.funded, c.funding, c.total = true, f.Funding, f.TotalCents
	return http.StatusOK
}

func (w *Wallet) grants(g webhook.GrantsEvent) (webhook.GrantsReply, int) {
	c := w.campaign(g.Campaign)
	if c.refundDone {
		for _, gr := range g.Grants {
			if _, ok := c.grants[gr.Seq]; !ok {
				return webhook.GrantsReply{}, http.StatusUnprocessableEntity // nothing of the batch is taken
			}
		}
	}
	reply := webhook.GrantsReply{Conflicts: []webhook.ConflictReply{}}
	for _, gr := range g.Grants {
		if held, ok := c.grants[gr.Seq]; ok {
			if held.User != gr.User || held.Cents != gr.Cents {
				reply.Conflicts = append(reply.Conflicts, webhook.ConflictReply{IdempotencyKey: gr.IdempotencyKey,
					Reason: ledger.PacketTaken, Existing: &webhook.ExistingGrant{Seq: held.Seq, User: held.User, Cents: held.Cents}})
			}
			continue // a replay
		}
		if seq, ok := c.users[gr.User]; ok {
			held := c.grants[seq]
			reply.Conflicts = append(reply.Conflicts, webhook.ConflictReply{IdempotencyKey: gr.IdempotencyKey,
				Reason: ledger.UserHasOther, Existing: &webhook.ExistingGrant{Seq: held.Seq, User: held.User, Cents: held.Cents}})
			continue
		}
		c.grants[gr.Seq] = gr
		c.users[gr.User] = gr.Seq
	}
	return reply, http.StatusOK
}

func (w *Wallet) refund(f webhook.RefundEvent) int {
	c := w.campaign(f.Campaign)
	if c.refundDone {
		if c.refunded != f.Cents {
			return http.StatusConflict
		}
		return http.StatusOK
	}
	c.refundDone, c.refunded = true, f.Cents
	return http.StatusOK
}

func (w *Wallet) totals(id string) webhook.TotalsReply {
	t := webhook.TotalsReply{Campaign: id}
	c := w.campaigns[id]
	if c == nil {
		return t
	}
	t.Funding, t.FundedCents = c.funding, c.total
	for _, g := range c.grants {
		t.GrantCount++
		t.GrantCents += g.Cents
	}
	t.Refunded, t.RefundedCents = c.refundDone, c.refunded
	return t
}

// Totals is what the wallet would answer a "totals" event about campaign.
func (w *Wallet) Totals(campaign string) webhook.TotalsReply {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.totals(campaign)
}

// Grants returns the grants the wallet holds of campaign, by seq.
func (w *Wallet) Grants(campaign string) map[int64]webhook.Grant {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int64]webhook.Grant{}
	if c := w.campaigns[campaign]; c != nil {
		for seq, g := range c.grants {
			out[seq] = g
		}
	}
	return out
}

// Foreign counts the events refused because their owner was not the
// wallet's name.
func (w *Wallet) Foreign() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.foreign
}

// Drop forgets the grant of packet seq of campaign, as a wallet that lost
// a payment would; it says whether it held one.
func (w *Wallet) Drop(campaign string, seq int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.campaigns[campaign]
	if c == nil {
		return false
	}
	g, ok := c.grants[seq]
	if ok {
		delete(c.grants, seq)
		delete(c.users, g.User)
	}
	return ok
}

// SetRefund replaces the refund the wallet holds of campaign (recording
// one if it held none), as a wallet edited by hand would.
func (w *Wallet) SetRefund(campaign string, cents int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.campaign(campaign)
	c.refundDone, c.refunded = true, cents
}
