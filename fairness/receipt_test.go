package fairness_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/fairness"
)

func newKey(t *testing.T, kid string) fairness.ReceiptKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	k, err := fairness.ParseReceiptKey(kid, []byte(hex.EncodeToString(priv.Seed())))
	require.NoError(t, err)
	return k
}

// checkCompact verifies a compact JWS with crypto/ed25519 alone: another
// implementation than go-jose, which signed it.
func checkCompact(t *testing.T, compact string, jwks []byte) map[string]any {
	t.Helper()
	parts := strings.Split(compact, ".")
	require.Len(t, parts, 3)
	hdrB, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	var hdr struct{ Alg, Kid string }
	require.NoError(t, json.Unmarshal(hdrB, &hdr))
	require.Equal(t, "EdDSA", hdr.Alg)
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid string }
	}
	require.NoError(t, json.Unmarshal(jwks, &set))
	var pub ed25519.PublicKey
	for _, k := range set.Keys {
		if k.Kid == hdr.Kid {
			require.Equal(t, "OKP", k.Kty)
			require.Equal(t, "Ed25519", k.Crv)
			pub, err = base64.RawURLEncoding.DecodeString(k.X)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, pub, "kid %q not in the JWKS", hdr.Kid)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	require.True(t, ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig))
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(body, &claims))
	return claims
}

func TestReceiptSignVerifyRotate(t *testing.T) {
	t.Parallel()
	old, cur := newKey(t, ""), newKey(t, "k2")
	require.NotEmpty(t, old.KID)
	s1, err := fairness.NewSigner([]fairness.ReceiptKey{old})
	require.NoError(t, err)
	r := fairness.Receipt{CampaignID: "c", UserID: "u1", PacketID: "c/3", AmountCents: 250, GrantedAt: time.UnixMilli(1700000000123).UTC()}
	before, err := s1.Sign(r)
	require.NoError(t, err)
	s2, err := fairness.NewSigner([]fairness.ReceiptKey{cur, old})
	require.NoError(t, err)
	after, err := s2.Sign(r)
	require.NoError(t, err)
	for _, c := range []string{before, after} {
		got, err := fairness.VerifyReceipt(c, s2.JWKS())
		require.NoError(t, err)
		require.Equal(t, r, got)
		claims := checkCompact(t, c, s2.JWKS())
		require.Equal(t, "c/3", claims["packet_id"])
		require.EqualValues(t, 250, claims["amount_cents"])
	}
	// The old set does not know the new key.
	_, err = fairness.VerifyReceipt(after, s1.JWKS())
	require.ErrorIs(t, err, fairness.ErrMismatch)
	// A forged payload under a real header and signature.
	parts := strings.Split(after, ".")
	forged := r
	forged.AmountCents = 25000
	b, _ := json.Marshal(forged)
	_, err = fairness.VerifyReceipt(parts[0]+"."+base64.RawURLEncoding.EncodeToString(b)+"."+parts[2], s2.JWKS())
	require.ErrorIs(t, err, fairness.ErrMismatch)
	_, err = fairness.VerifyReceipt("not a jws", s2.JWKS())
	require.ErrorIs(t, err, fairness.ErrBadInput)
}

func TestParseReceiptKeyPEM(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	a, err := fairness.ParseReceiptKey("", pemKey)
	require.NoError(t, err)
	b, err := fairness.ParseReceiptKey("", []byte(hex.EncodeToString(priv.Seed())+"\n"))
	require.NoError(t, err)
	require.Equal(t, a, b)
	_, err = fairness.ParseReceiptKey("", []byte("short"))
	require.Error(t, err)
}

func BenchmarkSign(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	k, _ := fairness.ParseReceiptKey("", []byte(hex.EncodeToString(priv.Seed())))
	s, _ := fairness.NewSigner([]fairness.ReceiptKey{k})
	r := fairness.Receipt{CampaignID: "rain-2026", UserID: "user-123456", PacketID: "rain-2026/123456", AmountCents: 888, GrantedAt: time.Now()}
	for b.Loop() {
		if _, err := s.Sign(r); err != nil {
			b.Fatal(err)
		}
	}
}
