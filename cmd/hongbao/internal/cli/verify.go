package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hongbao/hongbao/fairness"
)

// verifyCmd is "hongbao verify": the auditor's tool, offline. It checks a
// draw log against a commitment, a proof against a root, a receipt against
// a JWKS, with package fairness and nothing else: exit 0 when it holds, 1
// when it does not, 2 for input it cannot check.
type verifyCmd struct {
	base
	what                   string // draw-log, proof or receipt
	commitment, root, jwks string
	size                   int64  // the committed packet count, with --root
	input                  string // a file, or "-" for stdin
}

const verifyUsage = `Usage:
  hongbao verify draw-log --commitment FILE [DRAWLOG]
  hongbao verify proof (--commitment FILE | --root HEX --size N) [PROOF]
  hongbao verify receipt --jwks FILE [RECEIPT]

Checks, offline, what a campaign published (docs/fairness.md):
  draw-log  the draw log's packets, seq 1..N with their salts, hash to the
            commitment's root, count and total
  proof     the proof's packet, salt and path lead to the committed root, at
            leaf seq-1 of a tree of the committed count (a root over more
            packets than the commitment states is refused)
  receipt   the receipt (a JWS, or the receipt route's JSON) is signed by the
            JWKS key its kid names
The input is a file, or standard input when it is "-" or absent. The
commitment is the JSON of GET /v1/campaigns/{id}/commitment.

Exit status: 0 it holds, 1 it does not, 2 bad input.

Flags:`

func newVerifyCmd(env *IO) command { return &verifyCmd{base: base{env: env}} }

func (c *verifyCmd) parseFlags(args []string) error {
	fs := newFlagSet("verify", c.env)
	fs.StringVar(&c.commitment, "commitment", "", "the campaign's commitment (its JSON, as the commitment route answers)")
	fs.StringVar(&c.root, "root", "", "the committed root, 64 hex digits (proof; instead of --commitment, with --size)")
	fs.Int64Var(&c.size, "size", 0, "the committed count of packets, the commitment's count (proof, with --root)")
	fs.StringVar(&c.jwks, "jwks", "", "the JSON Web Key Set of the receipts (as /.well-known/jwks.json answers)")
	setUsage(fs, c.env, verifyUsage)
	operands, err := parseOperands(fs, c.env, args)
	if err != nil {
		return err
	}
	if len(operands) < 1 || len(operands) > 2 {
		return usageErrorf("give what to verify (draw-log, proof or receipt) and at most one input file")
	}
	c.what, c.input = operands[0], "-"
	if len(operands) == 2 {
		c.input = operands[1]
	}
	switch c.what {
	case "draw-log":
		if c.commitment == "" {
			return usageErrorf("verify draw-log needs --commitment")
		}
	case "proof":
		if (c.commitment == "") == (c.root == "") {
			return usageErrorf("verify proof needs --commitment, or --root with --size: one of them")
		}
		if c.root != "" && c.size < 1 {
			return usageErrorf("verify proof --root needs --size N, the commitment's count of packets (a proof's tree size is checked against it)")
		}
		if c.commitment != "" && c.size != 0 {
			return usageErrorf("verify proof takes --size with --root only: the commitment states its count")
		}
	case "receipt":
		if c.jwks == "" {
			return usageErrorf("verify receipt needs --jwks")
		}
	default:
		return usageErrorf("nothing called %q to verify: draw-log, proof or receipt", c.what)
	}
	return nil
}

func (c *verifyCmd) run(context.Context) error {
	in, err := c.read(c.input)
	if err != nil {
		return err
	}
	switch c.what {
	case "draw-log":
		return c.drawLog(in)
	case "proof":
		return c.proof(in)
	default:
		return c.receipt(in)
	}
}

// read reads a file, or standard input for "-"; a failure is bad input.
func (c *verifyCmd) read(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return b, nil
}

// verdict turns a check's error into the exit status: 1 for a check that
// does not hold, 2 for input that cannot be checked.
func verdict(err error) error {
	if errors.Is(err, fairness.ErrMismatch) {
		return &exitError{code: 1, err: fmt.Errorf("does not hold: %w", err)}
	}
	return &exitError{code: 2, err: err}
}

func (c *verifyCmd) readCommitment() (fairness.Commitment, error) {
	var cm fairness.Commitment
	b, err := c.read(c.commitment)
	if err != nil {
		return cm, err
	}
	if err := json.Unmarshal(b, &cm); err != nil || cm.CampaignID == "" || cm.Root == "" {
		return cm, usageErrorf("--commitment %s: not a commitment (campaign_id, root): %v", c.commitment, err)
	}
	return cm, nil
}

func (c *verifyCmd) drawLog(in []byte) error {
	cm, err := c.readCommitment()
	if err != nil {
		return err
	}
	res, err := fairness.VerifyDrawLog(bytes.NewReader(in), cm)
	if err != nil {
		return verdict(err)
	}
	fmt.Fprintf(c.env.Stdout, "holds: %d packets, %d cents, %d held, root %s of campaign %s\n",
		res.Count, res.TotalCents, res.Granted, res.Root, cm.CampaignID)
	return nil
}

func (c *verifyCmd) proof(in []byte) error {
	rootHex, size := c.root, c.size
	var cm fairness.Commitment
	if c.commitment != "" {
		var err error
		if cm, err = c.readCommitment(); err != nil {
			return err
		}
		if cm.Count < 1 {
			return usageErrorf("--commitment %s: no count of packets", c.commitment)
		}
		rootHex, size = cm.Root, cm.Count
	}
	root, err := fairness.ParseHash(strings.TrimSpace(rootHex))
	if err != nil {
		return usageErrorf("the root: %v", err)
	}
	var p fairness.Proof
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return usageErrorf("the proof: %v", err)
	}
	if cm.CampaignID != "" {
		if id, err := p.Campaign(); err == nil && id != cm.CampaignID {
			return verdict(fmt.Errorf("%w: the proof is of campaign %s, the commitment of %s", fairness.ErrMismatch, id, cm.CampaignID))
		}
	}
	if p.TreeSize != size {
		return verdict(fmt.Errorf("%w: the proof is in a tree of %d packets, the commitment has %d", fairness.ErrMismatch, p.TreeSize, size))
	}
	if err := fairness.VerifyProof(p, root); err != nil {
		return verdict(err)
	}
	fmt.Fprintf(c.env.Stdout, "holds: packet %s of %d cents is leaf %d of %d under root %s\n", p.PacketID, p.Cents, p.LeafIndex, p.TreeSize, root)
	return nil
}

func (c *verifyCmd) receipt(in []byte) error {
	jwks, err := c.read(c.jwks)
	if err != nil {
		return err
	}
	compact := strings.TrimSpace(string(in))
	var wrapped struct {
		Receipt string `json:"receipt"`
	}
	if strings.HasPrefix(compact, "{") {
		if err := json.Unmarshal(in, &wrapped); err != nil || wrapped.Receipt == "" {
			return usageErrorf("the receipt: JSON without a receipt: %v", err)
		}
		compact = wrapped.Receipt
	}
	r, err := fairness.VerifyReceipt(compact, jwks)
	if err != nil {
		return verdict(err)
	}
	fmt.Fprintf(c.env.Stdout, "holds: %s holds packet %s of %d cents (granted at %s)\n", r.UserID, r.PacketID, r.AmountCents, r.GrantedAt.Format("2006-01-02T15:04:05.000Z07:00"))
	return nil
}
