package settle

import (
	"errors"
	"strconv"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// ErrConfig: New was given a Config it cannot work with. A *ConfigError
// names the field and says why.
var ErrConfig = errors.New("settle: invalid configuration")

// ConfigError names the field of a Config that New (or Config.Validate)
// refused, and why: "settle: invalid configuration: Config.WaitReplicas:
// must not be negative, got -1". errors.Is(err, ErrConfig) is true, and so
// is errors.Is against the cause, when there is one. It has the shape of
// hongbao.ConfigError, for the same use.
type ConfigError struct {
	// Field is the refused field as Go code names it: "Config.Redis".
	Field string
	// Value is the refused value as text; empty when the field is missing
	// or its value says nothing more.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Err is the cause, if any: the refusal of a namespace.
	Err error
}

func (e *ConfigError) Error() string {
	msg := ErrConfig.Error() + ": " + e.Field + ": " + e.Reason
	if e.Value != "" {
		msg += ", got " + e.Value
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrConfig) true, and keeps the cause in
// the chain.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrConfig}
	}
	return []error{ErrConfig, e.Err}
}

// Validate checks the configuration. A refusal is a *ConfigError naming
// the field. Fields out of range that have a default (ReadCount, Poll,
// ...) take it rather than being refused.
func (c Config) Validate() error {
	switch {
	case c.Redis == nil:
		return &ConfigError{Field: "Config.Redis", Reason: "is required"}
	case c.Ledger == nil && c.Sink == nil:
		return &ConfigError{Field: "Config.Ledger", Reason: "is required, or Config.Sink"}
	case c.Ledger != nil && c.Sink != nil:
		return &ConfigError{Field: "Config.Sink", Reason: "must not be set with Config.Ledger: set exactly one"}
	case c.WaitReplicas < 0:
		return &ConfigError{Field: "Config.WaitReplicas", Value: strconv.Itoa(c.WaitReplicas), Reason: "must not be negative"}
	case c.WaitTimeout < 0:
		return &ConfigError{Field: "Config.WaitTimeout", Value: c.WaitTimeout.String(), Reason: "must not be negative"}
	}
	if _, err := redisstore.ParseNamespace(c.Namespace); err != nil {
		return &ConfigError{Field: "Config.Namespace", Reason: err.Error(), Err: err}
	}
	return nil
}
