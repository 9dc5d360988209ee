package testenv

import (
	"strconv"
	"strings"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// crcTable is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// KeySlot returns the hash slot of key as Redis Cluster computes it (and
// CLUSTER KEYSLOT answers): only the hash tag is hashed when the key has a
// non-empty one, the part between its first '{' and the next '}'.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc) % Slots
}

// IDInSlot returns the first id of the form base-0, base-1, ... for which
// key(id) hashes to slot. A test puts its campaign on a chosen slot (and so
// on a chosen master) with it: key is the campaign's key builder.
func IDInSlot(slot int, base string, key func(id string) string) string {
	return findID(base, key, func(s int) bool { return s == slot })
}

// findID returns the first base-n whose key's slot is accepted. Every slot
// is reached within a few hundred thousand tries; the bound only turns a
// predicate that accepts no slot into a panic instead of a hang.
func findID(base string, key func(id string) string, accept func(slot int) bool) string {
	for n := 0; n < 1<<24; n++ {
		id := base + "-" + strconv.Itoa(n)
		if accept(KeySlot(key(id))) {
			return id
		}
	}
	panic("testenv: no id hashes to an accepted slot")
}
