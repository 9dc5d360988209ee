package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request.
const (
	// HeaderTimestamp carries the Unix time in seconds at which the
	// attempt was signed.
	HeaderTimestamp = "X-Hongbao-Timestamp"
	// HeaderSignature carries one or more comma-separated "v1=<hex>"
	// signatures.
	HeaderSignature = "X-Hongbao-Signature"
	// HeaderIdempotencyKey names the request as a whole; the per-grant
	// keys are in the body.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// DefaultWindow is the replay window Verify uses when given 0: a signed
// request older (or further in the future) than this is refused.
const DefaultWindow = 5 * time.Minute

// MinSecretLen is the shortest secret New accepts: 32 bytes, the size of
// an HMAC-SHA256 output, so the key is not the weak link.
const MinSecretLen = 32

// Sign returns the value of the signature header for body signed at unix
// time ts: "v1=" and the hex HMAC-SHA256 of "<ts>.<body>" under secret.
// Hosts rarely need it (Verify checks it); it helps them test.
func Sign(secret []byte, ts int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a request the sink sent: that one of the "v1=" signatures
// in its signature header is the HMAC-SHA256 under secret of its timestamp
// header, a dot and body (compared in constant time), and that the
// timestamp is within window of now, in either direction to allow for
// clock skew. body is the request body as read by the host (Verify does
// not read r.Body). window <= 0 means DefaultWindow.
//
// It returns nil, or an error matching ErrSignature (missing, malformed or
// wrong signature or timestamp: the request is not ours, or was altered)
// or ErrExpired (a genuine request signed outside the window: a replay or
// a badly skewed clock). The signature is checked first, so ErrExpired
// never answers a forged request.
func Verify(secret []byte, r *http.Request, body []byte, window time.Duration, now time.Time) error {
	if window <= 0 {
		window = DefaultWindow
	}
	if len(secret) == 0 {
		return fmt.Errorf("%w: empty secret", ErrSignature)
	}
	tsText := r.Header.Get(HeaderTimestamp)
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: missing or malformed %s", ErrSignature, HeaderTimestamp)
	}
	want := mac(secret, ts, body)
	ok := false
	for _, part := range strings.Split(r.Header.Get(HeaderSignature), ",") {
		hexSig, found := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !found {
			continue // another scheme version: not ours to judge
		}
		got, err := hex.DecodeString(hexSig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: no valid v1 signature", ErrSignature)
	}
	age := now.Sub(time.Unix(ts, 0))
	if age > window || age < -window {
		return fmt.Errorf("%w: signed at %d, %s from now, window %s", ErrExpired, ts, age.Truncate(time.Second), window)
	}
	return nil
}
