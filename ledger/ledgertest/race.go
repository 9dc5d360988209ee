//go:build race

package ledgertest

// largePackets is the size of the large campaign of the packet tests.
// The race detector slows the SQLite backend (C translated to Go, every
// pointer step checked) about 60 times: 200,000 packets took 26 s there,
// against 0.4 s without it. A quarter of that still spans many insert
// chunks; the full count runs without -race.
const largePackets = 50_000
