package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/webhook"
)

// A host's handler: read the body, verify it, dedupe by idempotency key,
// answer 2xx. Here the Sink delivers a refund to it over loopback.
func ExampleVerify() {
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes, shared with the host

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		switch err := webhook.Verify(secret, r, body, 5*time.Minute, time.Now()); {
		case errors.Is(err, webhook.ErrExpired):
			http.Error(w, "too old", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// A real host would now apply the event once per idempotency key.
		fmt.Printf("verified %s: %s\n", r.Header.Get(webhook.HeaderIdempotencyKey), body)
	}))
	defer host.Close()

	sink, err := webhook.New(webhook.Config{URL: host.URL, Secret: secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("refund:", sink.Refund(context.Background(), "c1", 710))

	// A forger without the secret is turned away, and not retried.
	forger, _ := webhook.New(webhook.Config{URL: host.URL, Secret: bytes.Repeat([]byte("x"), 32)})
	err = forger.Fund(context.Background(), ledger.Campaign{ID: "c1", Funding: "acme", Total: 1})
	fmt.Println("forged fund rejected:", errors.Is(err, webhook.ErrRejected))
	// Output:
	// verified c1/refund: {"type":"refund","campaign":"c1","cents":710,"amount":"7.10","idempotency_key":"c1/refund"}
	// refund: <nil>
	// forged fund rejected: true
}
