package fairness

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Receipt is the payload of a grant's signed receipt.
type Receipt struct {
	CampaignID  string    `json:"campaign_id"`
	UserID      string    `json:"user_id"`
	PacketID    string    `json:"packet_id"`
	AmountCents int64     `json:"amount_cents"`
	GrantedAt   time.Time `json:"granted_at"`
	// IssuedAt is when the receipt was signed.
	IssuedAt int64 `json:"iat"`
}

// ReceiptKey is an Ed25519 key that signs receipts, named by its kid.
type ReceiptKey struct {
	KID string
	Key ed25519.PrivateKey
}

// ParseReceiptKey reads a receipt signing key: a PEM "PRIVATE KEY"
// (PKCS #8, as `openssl genpkey -algorithm ed25519` writes it) or the
// 32-byte Ed25519 seed as 64 hex digits. kid, when empty, is the key's
// RFC 7638 JWK thumbprint (SHA-256, base64url), so a key keeps its kid
// wherever it is read.
func ParseReceiptKey(kid string, b []byte) (ReceiptKey, error) {
	b = bytes.TrimSpace(b)
	var priv ed25519.PrivateKey
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return ReceiptKey{}, fmt.Errorf("fairness: receipt key: %w", err)
		}
		p, ok := k.(ed25519.PrivateKey)
		if !ok {
			return ReceiptKey{}, fmt.Errorf("fairness: receipt key: %T is not an Ed25519 key", k)
		}
		priv = p
	} else {
		seed, err := hex.DecodeString(string(b))
		if err != nil || len(seed) != ed25519.SeedSize {
			return ReceiptKey{}, fmt.Errorf("fairness: receipt key: neither a PEM private key nor a %d-byte seed in hex", ed25519.SeedSize)
		}
		priv = ed25519.NewKeyFromSeed(seed)
	}
	if kid == "" {
		tp, err := (&jose.JSONWebKey{Key: priv.Public()}).Thumbprint(crypto.SHA256)
		if err != nil {
			return ReceiptKey{}, fmt.Errorf("fairness: receipt key thumbprint: %w", err)
		}
		kid = base64.RawURLEncoding.EncodeToString(tp)
	}
	return ReceiptKey{KID: kid, Key: priv}, nil
}

// Signer signs receipts with its first key and publishes all of its
// keys: rotation adds a new key first and keeps the old ones published
// for as long as their receipts should verify.
type Signer struct {
	keys   []ReceiptKey
	signer jose.Signer
	jwks   []byte
}

// NewSigner returns a Signer over keys, the first of which signs.
func NewSigner(keys []ReceiptKey) (*Signer, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("fairness: no receipt key")
	}
	set := jose.JSONWebKeySet{}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.KID] {
			return nil, fmt.Errorf("fairness: two receipt keys have kid %q", k.KID)
		}
		seen[k.KID] = true
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Key.Public(), KeyID: k.KID, Algorithm: string(jose.EdDSA), Use: "sig"})
	}
	jwks, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: keys[0].Key, KeyID: keys[0].KID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("fairness: receipt signer: %w", err)
	}
	return &Signer{keys: keys, signer: s, jwks: jwks}, nil
}

// JWKS is the JSON Web Key Set of the public keys, for
// /.well-known/jwks.json.
func (s *Signer) JWKS() []byte { return s.jwks }

// KID is the kid of the key that signs.
func (s *Signer) KID() string { return s.keys[0].KID }

// Sign returns r as a JWS in compact serialization (EdDSA, with kid).
func (s *Signer) Sign(r Receipt) (string, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	obj, err := s.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("fairness: sign receipt: %w", err)
	}
	return obj.CompactSerialize()
}

// VerifyReceipt checks a compact JWS receipt against a JWKS: EdDSA only,
// signed by the key its kid names. ErrBadInput for what cannot be parsed,
// ErrMismatch for a signature that does not hold or a kid the set lacks.
func VerifyReceipt(compact string, jwks []byte) (Receipt, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return Receipt{}, fmt.Errorf("%w: JWKS: %v", ErrBadInput, err)
	}
	obj, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: receipt: %v", ErrBadInput, err)
	}
	if len(obj.Signatures) != 1 {
		return Receipt{}, fmt.Errorf("%w: receipt has %d signatures", ErrBadInput, len(obj.Signatures))
	}
	kid := obj.Signatures[0].Header.KeyID
	keys := set.Key(kid)
	if len(keys) == 0 {
		return Receipt{}, fmt.Errorf("%w: no key with kid %q in the JWKS", ErrMismatch, kid)
	}
	payload, err := obj.Verify(keys[0].Key)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: receipt signature: %v", ErrMismatch, err)
	}
	var r Receipt
	if err := json.Unmarshal(payload, &r); err != nil {
		return Receipt{}, fmt.Errorf("%w: receipt payload: %v", ErrBadInput, err)
	}
	return r, nil
}
