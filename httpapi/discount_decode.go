package httpapi

import (
	"reflect"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/split"
)

// discountRequest is the body of POST /v1/discounts. Amounts come as
// decimal strings ("1000.00") or as integer cents, never as floats.
type discountRequest struct {
	Budget             *string `json:"budget"`
	BudgetCents        *int64  `json:"budget_cents"`
	Quota              *int    `json:"quota"`
	PerUserCount       *int    `json:"per_user_count"`
	PerUserAmount      *string `json:"per_user_amount"`
	PerUserAmountCents *int64  `json:"per_user_amount_cents"`
	PerUserUnlimited   *bool   `json:"per_user_unlimited"`
	Hold               *string `json:"hold"`
	createCommon
}

// discountFields are the keys of a discount create body.
var discountFields = jsonFields(reflect.TypeFor[discountRequest]())

// decodeDiscount turns a discount create body into a spec, checking what
// can be checked without Redis; each refusal names its field and why,
// with amounts as the client wrote them (decimals).
func decodeDiscount(body []byte, maxQuota int) (hongbao.DiscountSpec, error) {
	var req discountRequest
	if err := decodeObject(body, &req, discountFields); err != nil {
		return hongbao.DiscountSpec{}, err
	}
	spec, err := req.amounts()
	if err != nil {
		return spec, err
	}
	if err := req.counts(&spec, maxQuota); err != nil {
		return spec, err
	}
	if err := checkDiscountAmounts(spec); err != nil {
		return spec, err
	}
	if spec.OpensAt, spec.ClosesAt, spec.Funding, err = req.window("closes_at: must be after opens_at"); err != nil {
		return spec, err
	}
	spec.Seed = req.Seed
	// The engine's own checks run too (quota x max against the budget,
	// shards against the quota): a *SpecError naming the field.
	return spec, spec.Validate()
}

// amounts reads the body's amounts.
func (req *discountRequest) amounts() (hongbao.DiscountSpec, error) {
	var spec hongbao.DiscountSpec
	var err error
	if spec.Budget, err = amount("budget", req.Budget, req.BudgetCents, true); err != nil {
		return spec, err
	}
	if spec.Budget < 1 || spec.Budget > split.MaxTotal {
		return spec, badRequest(CodeInvalidRequest, "budget: must be within 0.01 and %s", hongbao.FormatCents(split.MaxTotal))
	}
	if spec.Min, spec.Max, err = req.bounds(); err != nil {
		return spec, err
	}
	if spec.PerUserAmount, err = amount("per_user_amount", req.PerUserAmount, req.PerUserAmountCents, false); err != nil {
		return spec, err
	}
	given := func(dec *string, cents *int64) bool { return dec != nil || cents != nil }
	switch {
	case given(req.Min, req.MinCents) && spec.Min < 1:
		return spec, badRequest(CodeInvalidRequest, "min: must be at least 0.01")
	case given(req.Max, req.MaxCents) && spec.Max < 1:
		return spec, badRequest(CodeInvalidRequest, "max: must be at least 0.01")
	case given(req.PerUserAmount, req.PerUserAmountCents) && (spec.PerUserAmount < 1 || spec.PerUserAmount > split.MaxTotal):
		return spec, badRequest(CodeInvalidRequest, "per_user_amount: must be within 0.01 and %s", hongbao.FormatCents(split.MaxTotal))
	}
	return spec, nil
}

// counts reads the body's counts and the hold.
func (req *discountRequest) counts(spec *hongbao.DiscountSpec, maxQuota int) error {
	if req.Quota == nil {
		return badRequest(CodeInvalidRequest, "quota is required")
	}
	if *req.Quota < 1 || *req.Quota > maxQuota {
		return badRequest(CodeInvalidRequest, "quota: must be within 1 and %d, got %d", maxQuota, *req.Quota)
	}
	spec.Quota = *req.Quota
	if req.PerUserCount != nil {
		if *req.PerUserCount < 1 {
			return badRequest(CodeInvalidRequest, "per_user_count: must be at least 1, got %d", *req.PerUserCount)
		}
		spec.PerUserCount = *req.PerUserCount
	}
	if err := req.perUserDefault(spec); err != nil {
		return err
	}
	if req.Shards != nil {
		if *req.Shards < 1 || *req.Shards > hongbao.MaxShards {
			return badRequest(CodeInvalidRequest, "shards: must be within 1 and %d, got %d", hongbao.MaxShards, *req.Shards)
		}
		spec.Shards = *req.Shards
	}
	if req.Hold != nil {
		d, err := time.ParseDuration(*req.Hold)
		if err != nil {
			return badRequest(CodeInvalidRequest, "hold: want a duration such as \"30s\" or \"5m\"")
		}
		if d < hongbao.MinHold || d > hongbao.MaxHold {
			return badRequest(CodeInvalidRequest, "hold: must be within 1s and 24h, got %s", d)
		}
		spec.Hold = d.Truncate(time.Millisecond)
	}
	return nil
}

// checkDiscountAmounts checks the amounts against each other, in the
// order the HTTP contract lists them, with decimal amounts in the words.
func checkDiscountAmounts(spec hongbao.DiscountSpec) error {
	f := hongbao.FormatCents
	mn, mx := max(spec.Min, 1), spec.Max
	if mx == 0 {
		mx = spec.Budget
	}
	n := int64(spec.Quota)
	switch {
	case mn > mx:
		return badRequest(CodeInvalidRequest, "min: %s is above max %s", f(mn), f(mx))
	case mx > spec.Budget:
		return badRequest(CodeInvalidRequest, "max: %s is above the budget %s", f(mx), f(spec.Budget))
	case mn > spec.Budget/n:
		return badRequest(CodeInvalidRequest, "min: %d discounts of at least %s cost more than the budget %s",
			spec.Quota, f(mn), f(spec.Budget))
	case spec.PerUserAmount > 0 && spec.PerUserAmount < mn:
		return badRequest(CodeInvalidRequest, "per_user_amount: %s is below min %s: a user could not get a single discount",
			f(spec.PerUserAmount), f(mn))
	}
	return nil
}

// perUserDefault gives a campaign created without per-user limits one
// discount per user, unless the body says "per_user_unlimited": true.
// Without a limit a single user (or a payment system calling in a loop)
// could hold the whole quota in open reservations, each an order that may
// never be paid; a campaign open to that must say so.
func (req *discountRequest) perUserDefault(spec *hongbao.DiscountSpec) error {
	unlimited := req.PerUserUnlimited != nil && *req.PerUserUnlimited
	limited := req.PerUserCount != nil || req.PerUserAmount != nil || req.PerUserAmountCents != nil
	switch {
	case unlimited && limited:
		return badRequest(CodeInvalidRequest, "per_user_unlimited: true contradicts per_user_count and per_user_amount; give one or the other")
	case !unlimited && !limited:
		spec.PerUserCount = 1
	}
	return nil
}

// reserveRequest is the body of POST /v1/discounts/{id}/reserve.
type reserveRequest struct {
	UserID           *string `json:"user_id"`
	OrderID          *string `json:"order_id"`
	OrderAmount      *string `json:"order_amount"`
	OrderAmountCents *int64  `json:"order_amount_cents"`
}

var reserveFields = jsonFields(reflect.TypeFor[reserveRequest]())

// reservation is a decoded reserve body.
type reservation struct {
	user, order string
	cents       int64
}

// decodeReserve reads a reserve body: the user, the order id and amount.
func decodeReserve(body []byte) (reservation, error) {
	var req reserveRequest
	if err := decodeObject(body, &req, reserveFields); err != nil {
		return reservation{}, err
	}
	return req.check()
}

// check reads a reserve's fields, whatever the protocol that sent them
// (nil for a field that did not come).
func (req *reserveRequest) check() (reservation, error) {
	user, err := checkUserField(req.UserID)
	if err != nil {
		return reservation{}, err
	}
	if req.OrderID == nil {
		return reservation{}, badRequest(CodeInvalidRequest, "order_id is required")
	}
	if err := checkOrderID(*req.OrderID); err != nil {
		return reservation{}, err
	}
	cents, err := amount("order_amount", req.OrderAmount, req.OrderAmountCents, true)
	if err != nil {
		return reservation{}, err
	}
	if cents < 1 || cents > split.MaxTotal {
		return reservation{}, badRequest(CodeInvalidRequest, "order_amount: must be at least 0.01 (and at most %s)", hongbao.FormatCents(split.MaxTotal))
	}
	return reservation{user: user, order: *req.OrderID, cents: cents}, nil
}

// orderUserRequest is the body of confirm and cancel: the user whose
// order it is.
type orderUserRequest struct {
	UserID *string `json:"user_id"`
}

var orderUserFields = jsonFields(reflect.TypeFor[orderUserRequest]())

// decodeOrderUser reads the body of confirm and cancel.
func decodeOrderUser(body []byte) (string, error) {
	var req orderUserRequest
	if err := decodeObject(body, &req, orderUserFields); err != nil {
		return "", err
	}
	return checkUserField(req.UserID)
}

// checkUserField reads the user_id the payment system names.
func checkUserField(user *string) (string, error) {
	if user == nil {
		return "", badRequest(CodeInvalidRequest, "user_id is required")
	}
	if err := hongbao.ValidateUserID(*user); err != nil {
		return "", badRequest(CodeInvalidID, "user_id: user ids are 1 to 64 of A-Z a-z 0-9 _ - . : @")
	}
	return *user, nil
}

// checkOrderID refuses an order id the engine would refuse.
func checkOrderID(order string) error {
	if err := hongbao.ValidateOrderID(order); err != nil {
		return &requestError{code: CodeInvalidID,
			msg: "order_id: order ids are 1 to 64 of A-Z a-z 0-9 _ . : -"}
	}
	return nil
}
