// Package fairness makes a campaign's draw checkable by the people it pays
// and by those who audit it: a commitment to every packet before the
// campaign can open, an inclusion proof per grant, a signed receipt per
// grant, and the draw log once the campaign closed.
//
// The commitment is a Merkle tree (RFC 9162 section 2.1.1: SHA-256, leaf
// hashes over 0x00 || leaf, node hashes over 0x01 || left || right, split
// at the largest power of two below n) over one leaf per packet, leaf
// index seq-1:
//
//	hongbao-packet-v1:<campaign_id>:<seq>:<cents>:<salt as 64 lower-case hex>
//
// Each packet's salt is 32 bytes from crypto/rand, drawn when the
// campaign is split and never served before the packet is granted (its
// proof) or the campaign closed (the draw log): without it a leaf cannot
// be guessed from a proof's sibling hashes, so a proof tells nobody the
// amounts still in the pool or their order.
//
// The package has no I/O: the engine draws and records, package httpapi
// serves, and hongbao verify checks, all with what is here. Its tree is
// checked in tests against golang.org/x/mod/sumdb/tlog, an implementation
// of the same hashing written by others; its receipts are JWS made with
// github.com/go-jose/go-jose/v4 and checked in tests with crypto/ed25519
// alone.
package fairness
