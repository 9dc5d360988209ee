package cli

import (
	"flag"
	"log/slog"
)

// declareLogFormat adds --log-format, for every command that logs.
func declareLogFormat(fs *flag.FlagSet, format *string) {
	fs.StringVar(format, "log-format", "text", "log format: text or json (log/slog, on stderr; durations as text, 1.5s)")
}

// newLevelLogger logs at level and above to env's stderr in format (text
// or json), durations written as text.
func newLevelLogger(env *IO, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(env.Stderr, opts))
}

// durationText writes a time.Duration as text ("1.5s"), as the text
// handler does, where the JSON handler would write nanoseconds: a number
// nobody reading a log line takes for what it is.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
