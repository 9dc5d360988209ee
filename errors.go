package hongbao

import (
	"fmt"
)

// Sentinel errors. Compare with errors.Is; the typed errors below unwrap to
// them.
var (
	// ErrCampaignNotFound: no such campaign, or it is still loading.
	ErrCampaignNotFound = sentinel("campaign not found")
	// ErrCampaignExists: a campaign with this id was created already.
	ErrCampaignExists = sentinel("campaign exists")
	// ErrInvalidSpec: the campaign spec cannot be split or scheduled. A
	// *SpecError says which field and why.
	ErrInvalidSpec = sentinel("invalid campaign spec")
	// ErrInvalidID: a campaign, user or account id has a bad length or
	// characters.
	ErrInvalidID = sentinel("invalid id")
	// ErrInvalidAmount: a decimal amount could not be read as cents.
	ErrInvalidAmount = sentinel("invalid amount")
	// ErrNoGrant: the user holds no packet of the campaign (Held).
	ErrNoGrant = sentinel("no packet held")
	// ErrOutcomeUnknown: the request reached Redis or may have, but its
	// answer was lost (timeout, broken connection). A grab may have been
	// granted; retrying the grab is safe and returns the same packet.
	ErrOutcomeUnknown = sentinel("outcome unknown, retry")
	// ErrBusy: too many grabs of this campaign are waiting, or Redis could
	// not run the request now (a slot of the campaign is migrating between
	// cluster nodes, a failover or a restart is under way); nothing was
	// done. Retry after a short pause.
	ErrBusy = sentinel("busy, retry later")
	// ErrLoadInterrupted: another create of the same campaign took over
	// while this one was loading the pool.
	//
	// Deprecated: Create no longer returns it: a create whose load another
	// one took over waits for that one, as every other create of the same
	// id does (ErrCampaignExists, or ErrCreateInProgress).
	ErrLoadInterrupted = sentinel("campaign load interrupted")
	// ErrCreateInProgress: another create of the same campaign is loading
	// it, and the context ended while this create waited for it to go
	// live. Nothing was done by this call; create again (it answers
	// ErrCampaignExists once the campaign is live) or read its status.
	ErrCreateInProgress = sentinel("another create of this campaign is loading it")
	// ErrUnavailable: Redis refused the write without running it: fewer
	// good replicas than its min-replicas-to-write, a primary demoted to a
	// replica during a failover, a server still loading; or the call
	// needed the ledger and could not reach it (ErrLedgerUnavailable, which
	// matches ErrUnavailable too). Nothing was granted to the caller;
	// retry after a short pause.
	ErrUnavailable = sentinel("store unavailable, retry later")
	// ErrLedgerUnavailable: the call needed the ledger (Config.Packets) and
	// the ledger did not answer (unreachable, restarting, timed out): a
	// create, which records its packets there before the campaign goes
	// live, or a grab that needed the next block of a pool opened, which
	// is recorded there before any of its packets is popped. Nothing was
	// created or granted; retry once the ledger is back. Grabs of blocks
	// already opened, and reads, do not need the ledger. A refusal of the
	// ledger's own (a conflict, an invalid entry) is not this error but
	// the ledger's. errors.Is(err, ErrUnavailable) is true as well.
	ErrLedgerUnavailable = &sentinelError{msg: "ledger unavailable, retry later", parent: ErrUnavailable}
	// ErrClosed: the engine takes no more calls. It was shut down
	// (Engine.Shutdown), or its Redis client was found closed before the
	// call began (rueidis.Client.Close): nothing was sent, and nothing
	// will be on this engine, so a retry here is pointless; a client
	// retries on another instance. A call in flight when the client
	// closed, whose reply the close cut short, may have acted: it is
	// ErrOutcomeUnknown, like any lost reply, and ErrClosed only answers
	// the calls after the client was found closed.
	ErrClosed = sentinel("closed")
	// ErrInvalidConfig: New was given a Config it cannot work with. A
	// *ConfigError names the field and says why.
	ErrInvalidConfig = sentinel("invalid configuration")
)

// The package's errors write the "hongbao: " prefix when they stand alone.
// Wrapped in a chain of this package, only the head writes it: each error
// has a bare form, its message without the prefix, that the error wrapping
// it prints instead.
type barer interface{ bare() string }

// bareMessage is err's message without the package prefix when err is one
// of this package's errors, else its message.
func bareMessage(err error) string {
	if b, ok := err.(barer); ok {
		return b.bare()
	}
	return err.Error()
}

// sentinelError is a sentinel of this package; errors.Is compares the
// pointer. A sentinel with a parent is a case of the parent's, and
// matches it too.
type sentinelError struct {
	msg    string
	parent error
}

func sentinel(msg string) error { return &sentinelError{msg: msg} }

func (e *sentinelError) Error() string { return "hongbao: " + e.msg }
func (e *sentinelError) bare() string  { return e.msg }
func (e *sentinelError) Unwrap() error { return e.parent }

// opError is the failure of one engine operation on one campaign: the
// package prefix once, the operation and campaign, then the cause, as in
// "hongbao: create c1: campaign not found: begin load: no such campaign".
type opError struct {
	op, id string
	err    error
}

func (e *opError) Error() string { return "hongbao: " + e.op + " " + e.id + ": " + bareMessage(e.err) }
func (e *opError) Unwrap() error { return e.err }

func opErr(op, id string, err error) error { return &opError{op: op, id: id, err: err} }

// kindError files a cause from below (the store, Redis) under one of the
// sentinels: "campaign not found: begin load: no such campaign". errors.Is
// matches the sentinel and everything in the cause's chain.
type kindError struct {
	kind  error
	cause error
}

func (e *kindError) Error() string   { return "hongbao: " + e.bare() }
func (e *kindError) bare() string    { return bareMessage(e.kind) + ": " + e.cause.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.cause} }

// ExistsError says which campaign exists and in which state.
type ExistsError struct {
	ID    string
	State State
}

func (e *ExistsError) Error() string { return "hongbao: " + e.bare() }
func (e *ExistsError) bare() string {
	return fmt.Sprintf("campaign %q exists (state %s)", e.ID, e.State)
}

// Unwrap makes errors.Is(err, ErrCampaignExists) true.
func (e *ExistsError) Unwrap() error { return ErrCampaignExists }

// ReplicasError says that a WAIT fell short: fewer Redis replicas than
// Config.WaitReplicas acknowledged the call's writes in time, because too
// few are attached to the primary or they are behind. The writes are on
// the primary and perhaps on no replica, so whether they survive a
// failover is unknown: errors.Is(err, ErrOutcomeUnknown) is true, and a
// retry is as safe as after a lost reply (a grab answers the same packet
// if it was granted). Unlike a lost reply it is no passing accident: it
// goes on until the replicas are back (Engine.Health counts them).
type ReplicasError struct {
	Wanted int // Config.WaitReplicas
	Acked  int // the replicas that acknowledged the writes in time
	cause  error
}

func (e *ReplicasError) Error() string { return "hongbao: " + e.bare() }
func (e *ReplicasError) bare() string {
	return fmt.Sprintf("%s: %d of %d replicas acknowledged the writes in time", bareMessage(ErrOutcomeUnknown), e.Acked, e.Wanted)
}

// Unwrap makes errors.Is(err, ErrOutcomeUnknown) true, and keeps the
// store's error in the chain.
func (e *ReplicasError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrOutcomeUnknown}
	}
	return []error{ErrOutcomeUnknown, e.cause}
}

// IDError names the id that was refused and why.
type IDError struct {
	Kind   string // "campaign", "user" or "account"
	ID     string
	Reason string
}

func (e *IDError) Error() string { return "hongbao: " + e.bare() }
func (e *IDError) bare() string {
	return fmt.Sprintf("invalid %s id %q: %s", e.Kind, e.ID, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidID) true.
func (e *IDError) Unwrap() error { return ErrInvalidID }

// SpecError says which field of a campaign spec was refused and why, in
// words meant for the operator who wrote it:
// "hongbao: invalid campaign spec: count: must be at least 1, got 0".
// errors.Is(err, ErrInvalidSpec) is true, and so is errors.Is against the
// cause, when there is one.
type SpecError struct {
	// Field is the refused field of Spec, spelled as the HTTP API spells
	// it: "total", "count", "min", "max", "split", "opens_at" or
	// "closes_at".
	Field string
	// Reason says what is wrong with it, e.g. "must be at least 1, got 0".
	Reason string
	// Err is the cause, if any: a *split.SpecError, or the store's verdict
	// on the open window by the Redis clock.
	Err error
}

func (e *SpecError) Error() string { return "hongbao: " + e.bare() }
func (e *SpecError) bare() string  { return "invalid campaign spec: " + e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalidSpec) true, and keeps the cause
// in the chain.
func (e *SpecError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidSpec}
	}
	return []error{ErrInvalidSpec, e.Err}
}

// AmountError says why a decimal amount was refused.
type AmountError struct {
	Input  string
	Reason string // e.g. "want at most two decimals, as in 12.34"
}

func (e *AmountError) Error() string { return "hongbao: " + e.bare() }
func (e *AmountError) bare() string  { return fmt.Sprintf("invalid amount %q: %s", e.Input, e.Reason) }

// Unwrap makes errors.Is(err, ErrInvalidAmount) true.
func (e *AmountError) Unwrap() error { return ErrInvalidAmount }

// ConfigError names the field of a Config that New (or Config.Validate)
// refused, and why, in words meant for the developer who wrote it:
// "hongbao: invalid configuration: Config.MaxBatch: must be within
// 0..3000, got 5000". errors.Is(err, ErrInvalidConfig) is true, and so is
// errors.Is against the cause, when there is one.
type ConfigError struct {
	// Field is the refused field as Go code names it: "Config.MaxBatch"
	// for this package's Config; the packages beside the engine that
	// refuse their Config with a ConfigError (scheduler, rebuild) name
	// theirs with the package: "scheduler.Config.Parts".
	Field string
	// Value is the refused value as text ("5000", "10s"); empty when the
	// field is missing or its value says nothing more.
	Value string
	// Reason says what is wrong with it: "must be within 0..3000".
	Reason string
	// Err is the cause, if any: the refusal of a namespace or an owner.
	Err error
}

func (e *ConfigError) Error() string { return "hongbao: " + e.bare() }
func (e *ConfigError) bare() string {
	msg := "invalid configuration: " + e.Field + ": " + e.Reason
	if e.Value != "" {
		msg += ", got " + e.Value
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true, and keeps the cause
// in the chain.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}
