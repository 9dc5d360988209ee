package client

import (
	"context"
	"net/http"
)

// inject adds the caller's trace context to a request's headers.
func inject(ctx context.Context, h http.Header) {}
