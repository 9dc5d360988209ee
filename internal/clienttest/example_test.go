package clienttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// exampleService serves the API on the tests' redis-server. In an
// application the service is a running `hongbao serve`.
func exampleService() (url string, stop func()) {
	srv, err := testenv.SharedServer()
	if err != nil {
		panic(err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	eng, err := hongbao.New(hongbao.Config{Redis: rc})
	if err != nil {
		panic(err)
	}
	s, err := httpapi.New(httpapi.Config{Engine: eng, Settlement: settle.NewBacklogs(rc, ""), UserSecrets: []httpapi.Secret{userSecret},
		AdminKeys: [][]byte{[]byte(adminKey)}, PaymentKeys: [][]byte{[]byte(paymentKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	// Every reply is checked against openapi.json on the service's side
	// (the examples use the client as a user makes it); a mismatch fails
	// the example when it stops.
	var mu sync.Mutex
	var mismatches []error
	hs := httptest.NewServer(openapitest.Handler(s, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		mismatches = append(mismatches, err)
	}))
	return hs.URL, func() {
		hs.Close()
		rc.Close()
		if err := errors.Join(mismatches...); err != nil {
			panic(err)
		}
	}
}

// exampleToken is a user's token, as the platform's token issuer signs it.
func exampleToken(user string) string {
	tok, err := httpapi.MintToken(userSecret, user, time.Hour, time.Now())
	if err != nil {
		panic(err)
	}
	return tok
}

// An operator creates a rain of three packets; a user grabs twice and
// gets the same packet; a campaign that does not exist is ErrNotFound.
func Example() {
	url, stop := exampleService()
	defer stop()
	ctx := context.Background()

	admin, err := client.New(url, client.Options{Token: adminKey})
	if err != nil {
		panic(err)
	}
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 300, Count: 3, Split: "fixed"})
	if err != nil {
		panic(err)
	}
	alice := admin.As(exampleToken("alice")) // the same connections, alice's credential
	for range 2 {
		g, err := alice.Grab(ctx, c.ID)
		if err != nil {
			panic(err) // a grab that stayed unknown after its retries: ask again later
		}
		fmt.Println(g.Outcome, g.AmountCents, g.Holds())
	}
	_, err = alice.Grab(ctx, "no-such-rain")
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// granted 100 true
	// already_granted 100 true
	// true
}

// The payment system reserves a discount for an order, confirms it once
// paid; a cancel of a confirmed discount is refused with a code.
func Example_reserve() {
	url, stop := exampleService()
	defer stop()
	ctx := context.Background()

	admin, err := client.New(url, client.Options{Token: adminKey})
	if err != nil {
		panic(err)
	}
	d, err := admin.CreateDiscount(ctx, client.DiscountSpec{BudgetCents: 500, Quota: 5, MinCents: 100, MaxCents: 100})
	if err != nil {
		panic(err)
	}
	pay := admin.As(paymentKey)
	r, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "u-1", OrderID: "o-1", OrderAmountCents: 3520})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Outcome, r.AmountCents)
	o, err := pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u-1", OrderID: "o-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(o.Outcome, o.AmountCents)
	_, err = pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u-1", OrderID: "o-1"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, errors.Is(err, client.ErrConfirmed))
	}
	// Output:
	// reserved 100
	// confirmed 100
	// 409 confirmed true
}
