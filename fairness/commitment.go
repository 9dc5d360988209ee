package fairness

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Commitment is what a campaign publishes when it is created, before it
// can open, and never changes: the tree head over its packets and the
// distribution of their amounts. Its JSON is the body of GET
// /v1/campaigns/{id}/commitment.
type Commitment struct {
	CampaignID  string    `json:"campaign_id"`
	Scheme      string    `json:"scheme"`
	Root        string    `json:"root"`
	Count       int64     `json:"count"`
	TotalCents  int64     `json:"total_cents"`
	MinCents    int64     `json:"min_cents"`
	MaxCents    int64     `json:"max_cents"`
	CommittedAt time.Time `json:"committed_at"`
	// Leaf is the leaf layout, for a reader who has nothing else.
	Leaf string `json:"leaf"`
	// Histogram is the published distribution: how many packets of each
	// range of amounts, the ranges in increasing order.
	Histogram []Bucket `json:"histogram"`
}

// Bucket counts the packets of amounts MinCents..MaxCents (both included).
type Bucket struct {
	MinCents int64 `json:"min_cents"`
	MaxCents int64 `json:"max_cents"`
	Count    int64 `json:"count"`
}

// LeafLayout is Commitment.Leaf.
const LeafLayout = LeafPrefix + "<campaign_id>:<seq>:<cents>:<salt as 64 lower-case hex>"

// DefaultRetention is how long after a campaign ends its draw data (the
// salts, and the key of the holders' pseudonyms) is kept and its draw log
// served, by default: above the 90 days regulators ask for, and a year of
// complaints. Serving stops at the campaign's close plus the retention;
// the ledger deletes the data at its refund plus the retention.
const DefaultRetention = 400 * 24 * time.Hour

// MaxBuckets bounds the histogram: amounts spanning more values than this
// are counted in MaxBuckets ranges of equal width (the last one shorter).
const MaxBuckets = 20

// Histogram counts cents by amount: one bucket per amount when they span
// at most MaxBuckets values, else MaxBuckets ranges of equal width.
func Histogram(cents []int64) []Bucket {
	if len(cents) == 0 {
		return nil
	}
	lo, hi := cents[0], cents[0]
	for _, c := range cents {
		lo, hi = min(lo, c), max(hi, c)
	}
	width := (hi - lo + MaxBuckets) / MaxBuckets // ceil((hi-lo+1)/MaxBuckets)
	n := (hi-lo)/width + 1
	out := make([]Bucket, n)
	for i := range out {
		out[i].MinCents = lo + int64(i)*width
		out[i].MaxCents = min(out[i].MinCents+width-1, hi)
	}
	for _, c := range cents {
		out[(c-lo)/width].Count++
	}
	return out
}

// NewSalts draws n packets' salts from crypto/rand.
func NewSalts(n int) ([]byte, error) {
	salts := make([]byte, SaltSize*n)
	if _, err := rand.Read(salts); err != nil {
		return nil, fmt.Errorf("fairness: draw salts: %w", err)
	}
	return salts, nil
}

// NewHolderKey draws the key of a campaign's holder pseudonyms.
func NewHolderKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("fairness: draw holder key: %w", err)
	}
	return k, nil
}

// Commit makes the commitment of campaign's packets (cents and salts as
// for Root), within the terms' bounds minCents..maxCents.
func Commit(campaign string, cents []int64, salts []byte, minCents, maxCents int64, at time.Time) (Commitment, error) {
	root, err := Root(campaign, cents, salts)
	if err != nil {
		return Commitment{}, err
	}
	var total int64
	for _, c := range cents {
		total += c
	}
	return Commitment{
		CampaignID: campaign, Scheme: Scheme, Root: root.String(), Count: int64(len(cents)),
		TotalCents: total, MinCents: minCents, MaxCents: maxCents, CommittedAt: at.UTC().Truncate(time.Millisecond),
		Leaf: LeafLayout, Histogram: Histogram(cents),
	}, nil
}

// Proof is a grant's inclusion proof, the body of GET
// /v1/campaigns/{id}/grants/me/proof.
type Proof struct {
	PacketID  string   `json:"packet_id"`
	Seq       int64    `json:"seq"`
	Cents     int64    `json:"cents"`
	Salt      string   `json:"salt"`
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Path      []string `json:"path"`
	Root      string   `json:"root"`
}

// NewProof is the proof of packet seq of tree t, campaign's.
func NewProof(campaign string, t *Tree, seq, cents int64, salt []byte) (Proof, error) {
	path, err := t.Path(seq - 1)
	if err != nil {
		return Proof{}, err
	}
	p := Proof{PacketID: campaign + "/" + strconv.FormatInt(seq, 10), Seq: seq, Cents: cents, Salt: hex.EncodeToString(salt),
		LeafIndex: seq - 1, TreeSize: t.Size(), Path: make([]string, len(path)), Root: t.Root().String()}
	for i, h := range path {
		p.Path[i] = h.String()
	}
	return p, nil
}

// ErrMismatch: what was checked does not hold (a root, a signature, a
// draw log that does not rebuild the commitment). A well-formed input
// that fails a check; ErrBadInput is one that cannot be checked.
var ErrMismatch = errors.New("fairness: does not hold")

// Campaign is the campaign id of the proof's packet_id.
func (p Proof) Campaign() (string, error) {
	id, seq, ok := strings.Cut(p.PacketID, "/")
	if !ok || id == "" || seq != strconv.FormatInt(p.Seq, 10) {
		return "", fmt.Errorf("%w: packet_id %q does not name packet seq %d", ErrBadInput, p.PacketID, p.Seq)
	}
	return id, nil
}

// VerifyProof checks p against root: the leaf its packet, seq, cents and
// salt make is at leaf index seq-1 of a tree of TreeSize whose head is
// root. ErrBadInput for a malformed proof, ErrMismatch when it does not
// lead to root.
func VerifyProof(p Proof, root Hash) error {
	campaign, err := p.Campaign()
	if err != nil {
		return err
	}
	if p.LeafIndex != p.Seq-1 {
		return fmt.Errorf("%w: leaf_index %d is not seq-1 (%d)", ErrMismatch, p.LeafIndex, p.Seq-1)
	}
	salt, err := hex.DecodeString(p.Salt)
	if err != nil || len(salt) != SaltSize || p.Salt != strings.ToLower(p.Salt) {
		return fmt.Errorf("%w: salt %q is not 64 lower-case hex digits", ErrBadInput, p.Salt)
	}
	path := make([]Hash, len(p.Path))
	for i, s := range p.Path {
		if path[i], err = ParseHash(s); err != nil {
			return fmt.Errorf("%w: path[%d]: %v", ErrBadInput, i, err)
		}
	}
	got, err := RootFromPath(p.LeafIndex, p.TreeSize, LeafHash(Leaf(campaign, p.Seq, p.Cents, salt)), path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	if got != root {
		return fmt.Errorf("%w: the proof leads to root %s, not %s", ErrMismatch, got, root)
	}
	return nil
}

// DrawLine is one line of a draw log: a packet, its salt, and who holds
// it under a per-campaign pseudonym (nil when nobody does).
type DrawLine struct {
	Seq       int64      `json:"seq"`
	Cents     int64      `json:"cents"`
	Salt      string     `json:"salt"`
	Holder    *string    `json:"holder"`
	GrantedAt *time.Time `json:"granted_at"`
}

// Pseudonym is user's name in the draw log of the campaign whose holder
// key is key: HMAC-SHA256(key, user), the first 16 bytes in hex. The same
// user has another pseudonym in every campaign, and nobody without the
// key can tell which user it is, or find a user by trying names.
func Pseudonym(key []byte, user string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// DrawLogResult is what VerifyDrawLog found.
type DrawLogResult struct {
	Count      int64
	TotalCents int64
	Granted    int64
	Root       Hash
}

// VerifyDrawLog reads a draw log (JSON lines) of campaign and checks that
// its packets, seq 1..n in order, rebuild c: its root, count and total.
// ErrBadInput for a line that cannot be read, ErrMismatch when the log
// does not rebuild the commitment.
func VerifyDrawLog(r io.Reader, c Commitment) (DrawLogResult, error) {
	want, err := ParseHash(c.Root)
	if err != nil {
		return DrawLogResult{}, fmt.Errorf("%w: commitment root: %v", ErrBadInput, err)
	}
	if c.Scheme != "" && c.Scheme != Scheme {
		return DrawLogResult{}, fmt.Errorf("%w: scheme %q, not %q", ErrBadInput, c.Scheme, Scheme)
	}
	var (
		cents []int64
		salts []byte
		res   DrawLogResult
		held  = map[string]bool{}
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var d DrawLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return res, fmt.Errorf("%w: line %d: %v", ErrBadInput, line, err)
		}
		salt, err := hex.DecodeString(d.Salt)
		if err != nil || len(salt) != SaltSize {
			return res, fmt.Errorf("%w: line %d: salt %q is not 64 hex digits", ErrBadInput, line, d.Salt)
		}
		if d.Seq != int64(len(cents))+1 {
			return res, fmt.Errorf("%w: line %d: seq %d where %d belongs", ErrMismatch, line, d.Seq, len(cents)+1)
		}
		cents = append(cents, d.Cents)
		salts = append(salts, salt...)
		res.TotalCents += d.Cents
		if d.Holder != nil {
			if held[*d.Holder] {
				return res, fmt.Errorf("%w: line %d: holder %s holds a packet already (one packet per user)", ErrMismatch, line, *d.Holder)
			}
			held[*d.Holder] = true
			res.Granted++
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	res.Count = int64(len(cents))
	if res.Count == 0 {
		return res, fmt.Errorf("%w: the draw log has no packets", ErrBadInput)
	}
	if res.Root, err = Root(c.CampaignID, cents, salts); err != nil {
		return res, err
	}
	switch {
	case res.Root != want:
		return res, fmt.Errorf("%w: the draw log hashes to root %s, the commitment is %s", ErrMismatch, res.Root, want)
	case c.Count != 0 && c.Count != res.Count:
		return res, fmt.Errorf("%w: %d packets, the commitment has %d", ErrMismatch, res.Count, c.Count)
	case c.TotalCents != 0 && c.TotalCents != res.TotalCents:
		return res, fmt.Errorf("%w: %d cents, the commitment has %d", ErrMismatch, res.TotalCents, c.TotalCents)
	}
	// The distribution the commitment published: its bounds and its
	// histogram are what the packets make.
	for i, ct := range cents {
		if (c.MinCents != 0 && ct < c.MinCents) || (c.MaxCents != 0 && ct > c.MaxCents) {
			return res, fmt.Errorf("%w: packet %d of %d cents is outside the committed %d..%d", ErrMismatch, i+1, ct, c.MinCents, c.MaxCents)
		}
	}
	if c.Histogram != nil && !slices.Equal(c.Histogram, Histogram(cents)) {
		return res, fmt.Errorf("%w: the packets' histogram is not the one the commitment published", ErrMismatch)
	}
	return res, nil
}
