package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/webhook"
)

// A host's handler: read and verify the request in one call, refuse a
// campaign owned by another wallet, decode the event into its exported
// type, apply it once per idempotency key, answer 2xx; and answer the
// totals question from what it holds. Here a Sink named "wallet:acme"
// delivers a refund to it over loopback, then asks.
func ExampleReadEvent() {
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes, shared with the host
	const name = "wallet:acme"                           // the sink's Config.Name, known to the host
	var refunded atomic.Int64

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := webhook.ReadEvent(secret, r, 5*time.Minute, time.Now())
		switch {
		case errors.Is(err, webhook.ErrSignature), errors.Is(err, webhook.ErrExpired):
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		case ev.Owner != "" && ev.Owner != name:
			http.Error(w, "not our campaign", http.StatusForbidden)
			return
		}
		switch ev.Type {
		case webhook.EventRefund:
			var e webhook.RefundEvent
			if err := ev.Decode(&e); err != nil {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			// A real host applies e.IdempotencyKey once, in one
			// transaction with the money it moves.
			refunded.Store(e.Cents)
			fmt.Printf("host: %s, %s back to the funding account\n", e.IdempotencyKey, e.Amount)
		case webhook.EventTotals:
			cents := refunded.Load()
			_ = json.NewEncoder(w).Encode(webhook.TotalsReply{Campaign: ev.Campaign, RefundedCents: cents, Refunded: cents > 0})
		default:
			http.Error(w, "unknown event type", http.StatusBadRequest)
		}
	}))
	defer host.Close()

	sink, err := webhook.New(webhook.Config{URL: host.URL, Secret: secret, Name: name})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The settle worker passes the owner the campaign recorded at create.
	ctx := ledger.WithOwner(context.Background(), name)
	fmt.Println("refund:", sink.Refund(ctx, "c1", 710))
	t, err := sink.Totals(ctx, "c1")
	fmt.Println("totals:", t.Refunded, t.RefundDone, err)

	// Another wallet's campaign is refused before anything is sent.
	err = sink.Refund(ledger.WithOwner(ctx, "ledger:main"), "c2", 1)
	fmt.Println("foreign refund refused:", errors.Is(err, ledger.ErrForeign))

	// A forger without the secret is turned away, and not retried.
	forger, _ := webhook.New(webhook.Config{URL: host.URL, Secret: bytes.Repeat([]byte("x"), 32)})
	err = forger.Fund(context.Background(), ledger.Campaign{ID: "c1", Funding: "acme", Total: 1})
	fmt.Println("forged fund rejected:", errors.Is(err, webhook.ErrRejected))
	// Output:
	// host: c1/refund, 7.10 back to the funding account
	// refund: <nil>
	// totals: 710 true <nil>
	// foreign refund refused: true
	// forged fund rejected: true
}
