//go:build !race

package ledgertest

// largePackets is the size of the large campaign of the packet tests
// (see race.go for the race detector's).
const largePackets = 200_000
