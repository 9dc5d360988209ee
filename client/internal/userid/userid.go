// Package userid holds the service's rule for a user id, for the client
// and the token signer to check an id before the service sees it. The
// rule is the engine's (hongbao.ValidateUserID); the client module does
// not import the engine, so it keeps this copy, and a test of the root
// module (internal/clienttest) holds the two to the same answers.
package userid

import "fmt"

// MaxLen is the longest user id, in bytes.
const MaxLen = 64

// Check answers nil for a user id the service accepts: 1 to MaxLen
// bytes of A-Z a-z 0-9 _ - . : @. Else it says why not.
func Check(id string) error {
	if id == "" {
		return fmt.Errorf("user id is empty")
	}
	if len(id) > MaxLen {
		return fmt.Errorf("user id %q... is longer than %d bytes", id[:MaxLen], MaxLen)
	}
	for i := 0; i < len(id); i++ {
		if !allowed(id[i]) {
			return fmt.Errorf("user id %q: allowed are A-Z a-z 0-9 and _-.:@", id)
		}
	}
	return nil
}

func allowed(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '_', '-', '.', ':', '@':
		return true
	}
	return false
}
