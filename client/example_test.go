package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/hongbao/hongbao/client"
)

// A platform's gateway grabs for its users with a gateway key: calls from
// many goroutines are sent together, a batch per campaign at a time. (The
// tests that run such calls against a real service are in the service's
// module, internal/clienttest.)
func ExampleClient_Gateway() {
	api, err := client.New("https://hongbao.internal:8080", client.Options{Token: os.Getenv("HONGBAO_GATEWAY_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	gw, err := api.Gateway(client.GatewayOptions{Observe: func(b client.GatewayBatch) {
		log.Printf("batch of %d users in %v: %v", b.Users, b.Elapsed, b.Err)
	}})
	if err != nil {
		log.Fatal(err)
	}
	// In the handler of one user's click:
	handle := func(ctx context.Context, w http.ResponseWriter, campaign, user string) {
		g, err := gw.Grab(ctx, campaign, user)
		switch {
		case errors.Is(err, client.ErrOutcomeUnknown):
			fmt.Fprintln(w, "try again: a retry answers the packet, if one was granted")
		case err != nil:
			fmt.Fprintln(w, "no grab:", err)
		case g.Holds():
			fmt.Fprintf(w, "%s: %d cents\n", g.PacketID, g.AmountCents)
		default:
			fmt.Fprintln(w, g.Outcome)
		}
	}
	_ = handle
}

// Options.Propagate sends the caller's trace context; with OpenTelemetry
// it is otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h)).
// Here, a header of one's own.
func ExampleOptions_propagate() {
	_, err := client.New("http://127.0.0.1:8080", client.Options{
		Propagate: func(ctx context.Context, h http.Header) {
			if id, ok := ctx.Value(requestID{}).(string); ok {
				h.Set("X-Request-Id", id)
			}
		},
	})
	fmt.Println(err)
	// Output: <nil>
}

type requestID struct{}
