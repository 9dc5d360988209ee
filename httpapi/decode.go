package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/split"
)

func badRequest(code, format string, a ...any) *requestError {
	return &requestError{code: code, msg: fmt.Sprintf(format, a...)}
}

// readBody reads at most limit bytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return nil, nil // no body (a grab's usual case): nothing to read or allocate
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &requestError{code: CodeBodyTooLarge,
				msg: fmt.Sprintf("the body is larger than %d bytes", limit)}
		}
		return nil, badRequest(CodeInvalidJSON, "the body could not be read")
	}
	return b, nil
}

// decodeStrict decodes exactly one JSON value into v, a struct whose keys
// are fields: unknown fields, trailing data and an empty body are refused.
// The message names the problem without echoing the body.
func decodeStrict(body []byte, v any, fields map[string]bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest(CodeInvalidJSON, "the body is empty; a JSON object is expected")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			return badRequest(CodeInvalidJSON, "field %q: wrong type (%s)", typeErr.Field, typeErr.Value)
		case errors.As(err, &syntaxErr):
			return badRequest(CodeInvalidJSON, "malformed JSON at byte %d", syntaxErr.Offset)
		}
		// encoding/json has no type for an unknown field: find it.
		if key, ok := unknownKey(body, fields); ok {
			return badRequest(CodeInvalidJSON, "unknown field %q", key)
		}
		return badRequest(CodeInvalidJSON, "malformed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(CodeInvalidJSON, "trailing data after the JSON object")
	}
	return nil
}

// createRequest is the body of POST /v1/campaigns. Amounts come either as
// decimal strings or as integer cents, never as floats.
type createRequest struct {
	Total      *string `json:"total"`
	TotalCents *int64  `json:"total_cents"`
	Count      *int    `json:"count"`
	Split      string  `json:"split"`
	createCommon
}

// createCommon is what the create bodies of both kinds take alike: the
// bounds of one amount, the shards, the seed, the open window and the
// account that funds the campaign.
type createCommon struct {
	Min            *string `json:"min"`
	MinCents       *int64  `json:"min_cents"`
	Max            *string `json:"max"`
	MaxCents       *int64  `json:"max_cents"`
	Shards         *int    `json:"shards"`
	Seed           *uint64 `json:"seed"`
	OpensAt        *string `json:"opens_at"`
	ClosesAt       *string `json:"closes_at"`
	FundingAccount string  `json:"funding_account"`
}

// bounds reads the bounds of one amount, each optional (0 when absent).
func (req *createCommon) bounds() (min, max int64, err error) {
	if min, err = amount("min", req.Min, req.MinCents, false); err != nil {
		return 0, 0, err
	}
	if max, err = amount("max", req.Max, req.MaxCents, false); err != nil {
		return min, 0, err
	}
	return min, max, nil
}

// window reads the open window and the funding account; after is the
// refusal of a window that closes before it opens.
func (req *createCommon) window(after string) (opens, closes time.Time, funding string, err error) {
	if opens, err = timeField("opens_at", req.OpensAt); err != nil {
		return
	}
	if closes, err = timeField("closes_at", req.ClosesAt); err != nil {
		return
	}
	if !opens.IsZero() && !closes.IsZero() && !closes.After(opens) {
		return opens, closes, "", badRequest(CodeInvalidRequest, "%s", after)
	}
	if req.FundingAccount != "" {
		if err := hongbao.ValidateAccountID(req.FundingAccount); err != nil {
			return opens, closes, "", badRequest(CodeInvalidRequest, "funding_account: 1 to 64 of A-Z a-z 0-9 _ - . : @")
		}
	}
	return opens, closes, req.FundingAccount, nil
}

// createFields are the keys of a create body, exactly as the API spells
// them.
var createFields = jsonFields(reflect.TypeFor[createRequest]())

func jsonFields(t reflect.Type) map[string]bool {
	m := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			maps.Copy(m, jsonFields(f.Type))
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}

// unknownKey finds the first key of the JSON object body that names no
// field, even when case is ignored (as encoding/json matches them, with
// bytes.EqualFold): the key a decoder that disallows unknown fields
// stopped at when it met no other error before it.
func unknownKey(body []byte, fields map[string]bool) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		known := false
		for f := range fields {
			known = known || strings.EqualFold(f, key)
		}
		if !known {
			return key, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// decodeObject decodes a body that must be one JSON object into v, a
// struct whose keys are fields, refusing what decodeStrict and exactKeys
// refuse.
func decodeObject(body []byte, v any, fields map[string]bool) error {
	if err := decodeStrict(body, v, fields); err != nil {
		return err
	}
	return exactKeys(body, fields)
}

// exactKeys refuses what encoding/json lets through and a strict reader
// does not: a key that names a field only when case is ignored ("TOTAL"),
// and a key given twice, whose last value would win silently (a gateway
// that checked the first would have seen another amount). body is one
// JSON value that decodeStrict accepted.
func exactKeys(body []byte, fields map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return badRequest(CodeInvalidJSON, "a JSON object is expected")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badRequest(CodeInvalidJSON, "malformed JSON")
		}
		key, _ := tok.(string)
		if !fields[key] {
			return badRequest(CodeInvalidJSON, "unknown field %q", key)
		}
		if seen[key] {
			return badRequest(CodeInvalidJSON, "field %q is given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return badRequest(CodeInvalidJSON, "malformed JSON")
		}
	}
	return nil
}

// amount reads one amount given as a decimal string or as cents (not both).
func amount(name string, dec *string, cents *int64, required bool) (int64, error) {
	switch {
	case dec != nil && cents != nil:
		return 0, badRequest(CodeInvalidRequest, "give %s or %s_cents, not both", name, name)
	case dec != nil:
		c, err := hongbao.ParseCents(*dec)
		if err != nil {
			return 0, badRequest(CodeInvalidRequest, "%s: want a decimal amount with at most two decimals, as in \"12.34\"", name)
		}
		return c, nil
	case cents != nil:
		if *cents < 0 {
			return 0, badRequest(CodeInvalidRequest, "%s_cents must not be negative", name)
		}
		return *cents, nil
	case required:
		return 0, badRequest(CodeInvalidRequest, "%s or %s_cents is required", name, name)
	}
	return 0, nil
}

func timeField(name string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}, badRequest(CodeInvalidRequest, "%s: want an RFC 3339 time, as in \"2026-01-02T15:04:05Z\"", name)
	}
	return t, nil
}

// decodeCreate turns a create body into a campaign spec, checking what can
// be checked without Redis. maxCount caps the number of packets.
func decodeCreate(body []byte, maxCount int) (hongbao.Spec, error) {
	var req createRequest
	if err := decodeObject(body, &req, createFields); err != nil {
		return hongbao.Spec{}, err
	}
	var spec hongbao.Spec
	var err error
	if spec.Total, err = amount("total", req.Total, req.TotalCents, true); err != nil {
		return spec, err
	}
	if spec.Total < 1 || spec.Total > split.MaxTotal {
		return spec, badRequest(CodeInvalidRequest, "the total must be within 0.01 and %s", hongbao.FormatCents(split.MaxTotal))
	}
	if req.Count == nil {
		return spec, badRequest(CodeInvalidRequest, "count is required")
	}
	if *req.Count < 1 || *req.Count > maxCount {
		return spec, badRequest(CodeInvalidRequest, "count must be within 1 and %d", maxCount)
	}
	spec.Count = *req.Count
	if spec.Min, spec.Max, err = req.bounds(); err != nil {
		return spec, err
	}
	if spec.Min > split.MaxTotal || spec.Max > split.MaxTotal {
		return spec, badRequest(CodeInvalidRequest, "min and max must be at most %s", hongbao.FormatCents(split.MaxTotal))
	}
	spec.Split = split.Algorithm(req.Split)
	if spec.OpensAt, spec.ClosesAt, spec.Funding, err = req.window("closes_at must be after opens_at"); err != nil {
		return spec, err
	}
	spec.Seed = req.Seed
	if req.Shards != nil {
		if *req.Shards < 1 || *req.Shards > hongbao.MaxShards {
			return spec, badRequest(CodeInvalidRequest, "shards must be within 1 and %d", hongbao.MaxShards)
		}
		spec.Shards = *req.Shards
	}
	// The engine's own checks (min * count <= total, known algorithm, ...)
	// run here too, so a bad spec never reaches Redis. Its *SpecError
	// names the field and the reason.
	return spec, spec.Validate()
}

// decodeEmpty accepts an empty body or an empty JSON object: the body of
// grab and close.
func decodeEmpty(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var v struct{}
	return decodeStrict(body, &v, nil)
}
