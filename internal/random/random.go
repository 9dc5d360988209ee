// Package random draws the random names the module makes up: campaign ids,
// load tokens, key prefixes of a run, generated secrets.
package random

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes from the operating system's CSPRNG, as 2n
// lower-case hex digits. crypto/rand.Read never fails (it crashes the
// program where the system cannot provide randomness), so neither does
// Hex.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
