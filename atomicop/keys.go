package atomicop

import (
	"fmt"
	"strings"
)

// This file is the only place that spells a Redis key of the package.
//
// Every script touches a single Redis Cluster slot: the keys it gets share
// one hash tag. A record key the caller gives may carry its own tag
// ("{fleet-7}dev-42") to put records into one group (a batch, a shared
// summary); a key without braces becomes its own tag. Message ids become
// the tag of their mark and fence keys.

// hashTag returns what Redis Cluster hashes for key: the text between the
// first '{' and the first '}' after it, when that text is not empty.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

// checkPrefix refuses a prefix with braces: it would decide the hash tag of
// every key instead of the record or message it names.
func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: prefix %q must not contain braces", ErrInvalidKey, prefix)
	}
	return nil
}

// recordKey returns the Redis key of the record named key and the hash tag
// its group shares.
func recordKey(prefix, key string) (rkey, tag string, err error) {
	if key == "" {
		return "", "", fmt.Errorf("%w: empty record key", ErrInvalidKey)
	}
	if t, ok := hashTag(key); ok {
		return prefix + "rec:" + key, t, nil
	}
	if strings.ContainsAny(key, "{}") {
		return "", "", fmt.Errorf("%w: record key %q has braces but no hash tag", ErrInvalidKey, key)
	}
	return prefix + "rec:{" + key + "}", key, nil
}

// summaryKey returns the Redis key of the summary hash name in the group of
// records tagged tag. It carries the same tag, so one script can write a
// record and its summary.
func summaryKey(prefix, tag, name string) string {
	return prefix + "sum:{" + tag + "}:" + name
}

// messageKeys returns the mark and fence keys of message id.
func messageKeys(prefix, id string) (mark, fence string, err error) {
	if id == "" || strings.ContainsAny(id, "{}") {
		return "", "", fmt.Errorf("%w: message id %q must be non-empty and without braces", ErrInvalidKey, id)
	}
	p := prefix + "{" + id + "}:"
	return p + "mark", p + "fence", nil
}
