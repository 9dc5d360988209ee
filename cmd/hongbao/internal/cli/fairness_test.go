package cli

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// writeReceiptKey writes an Ed25519 seed as serve's --receipt-key-file
// takes it.
func writeReceiptKey(t *testing.T, dir string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	p := filepath.Join(dir, "receipt.key")
	require.NoError(t, os.WriteFile(p, []byte(hex.EncodeToString(priv.Seed())+"\n"), 0o600))
	return p
}

// TestServeFairness, against a real serve: the commitment answers from
// the moment create answered, before opens_at, and is the same after;
// every grant's proof verifies with golang.org/x/mod/sumdb/tlog and its
// receipt with crypto/ed25519 against the JWKS (serve made them with its
// own tree and go-jose); the draw log is refused while open and, once
// closed, rebuilds the root; hongbao verify holds for what serve
// published and catches one changed cent, a moved salt and a forged
// receipt; reconcile checks the root.
func TestServeFairness(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1", "--receipt-key-file", writeReceiptKey(t, fx.dir))...)
	api := fx.api(t, p.URL)
	const count, users = 25, 20
	opens := time.Now().Add(4 * time.Second)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"50.00","count":%d,"opens_at":%q}`, count, opens.Format(time.RFC3339Nano)))
	base := p.URL + "/v1/campaigns/" + id
	commitment := func(auth string) string {
		code, body, err := api.raw("GET", base+"/commitment", auth)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		return body
	}
	early := commitment(api.userToken(t, "watcher"))
	require.True(t, time.Now().Before(opens), "the commitment was read before opens_at")
	require.Equal(t, early, commitment(api.admin), "the admin key reads the same")
	var pub fairness.Commitment
	require.NoError(t, json.Unmarshal([]byte(early), &pub))
	require.Equal(t, id, pub.CampaignID)
	require.EqualValues(t, count, pub.Count)
	require.EqualValues(t, 5000, pub.TotalCents)
	root, err := fairness.ParseHash(pub.Root)
	require.NoError(t, err)

	code, body, err := api.raw("GET", p.URL+"/.well-known/jwks.json", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	jwks := []byte(body)

	tok := api.userToken(t, "nobody")
	code, m, err := api.call("GET", base+"/grants/me/proof", tok, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "no_grant", m["error"].(map[string]any)["code"])

	waitFor(t, "the campaign to open", 10*time.Second, func() bool {
		_, m, err := api.call("POST", base+"/grab", api.userToken(t, "probe"), "")
		return err == nil && m["outcome"] != "not_open"
	})
	dir := t.TempDir()
	receipts := map[string]map[string]any{} // packet_id: the receipt's claims
	for i := range users {
		user := fmt.Sprintf("player-%d", i)
		tok := api.userToken(t, user)
		url := base + "/grab"
		if i%2 == 0 {
			url += "?receipt=true"
		}
		code, g, err := api.call("POST", url, tok, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", g)
		var receipt string
		if i%2 == 0 {
			receipt = g["receipt"].(string)
		} else {
			require.NotContains(t, g, "receipt")
			// The route answers once settlement recorded the grant and
			// its time; until then it asks for a retry.
			waitFor(t, "the receipt of "+user, 10*time.Second, func() bool {
				code, r, err := api.call("GET", base+"/grants/me/receipt", tok, "")
				require.NoError(t, err)
				if code == http.StatusServiceUnavailable {
					require.Equal(t, "unavailable", r["error"].(map[string]any)["code"])
					return false
				}
				require.Equal(t, http.StatusOK, code, "%v", r)
				receipt = r["receipt"].(string)
				return true
			})
		}
		claims := ed25519Claims(t, receipt, jwks)
		receipts[g["packet_id"].(string)] = claims
		require.Equal(t, user, claims["user_id"])
		require.Equal(t, g["packet_id"], claims["packet_id"])
		require.Equal(t, g["amount_cents"], claims["amount_cents"])

		code, proofBody, err := api.raw("GET", base+"/grants/me/proof", tok)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, proofBody)
		var pr fairness.Proof
		require.NoError(t, json.Unmarshal([]byte(proofBody), &pr))
		require.Equal(t, g["packet_id"], pr.PacketID)
		require.EqualValues(t, g["amount_cents"], pr.Cents)
		tlogCheck(t, id, pr, root)

		pf, rf := filepath.Join(dir, user+".proof"), filepath.Join(dir, user+".jws")
		require.NoError(t, os.WriteFile(pf, []byte(proofBody), 0o600))
		require.NoError(t, os.WriteFile(rf, []byte(receipt), 0o600))
		if i < 3 {
			c, out, errs := run(t, nil, "verify", "proof", "--root", pub.Root, "--size", strconv.Itoa(count), pf)
			require.Equal(t, 0, c, "%s %s", out, errs)
		}
	}

	code, _, err = api.raw("GET", base+"/draw-log", api.admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, code, "no draw log while the campaign is open")
	code, m, err = api.call("POST", base+"/close", api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)
	waitFor(t, "settlement", 20*time.Second, func() bool {
		_, m, err := api.call("GET", base, api.admin, "")
		return err == nil && m["state"] == "settled"
	})
	require.Equal(t, early, commitment(api.admin), "unchanged after the campaign")

	code, _, err = api.raw("GET", base+"/draw-log", api.userToken(t, "player-1"))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code, "the draw log takes the admin key")
	code, drawLog, err := api.raw("GET", base+"/draw-log", api.admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, drawLog)
	res, err := fairness.VerifyDrawLog(strings.NewReader(drawLog), pub)
	require.NoError(t, err)
	require.EqualValues(t, users+1, res.Granted, "the players and the probe")
	require.NotContains(t, drawLog, "player-", "holders are pseudonyms")
	// Every receipt states the grant time the ledger recorded (the draw
	// log's), to the millisecond, and it is not after the signing.
	checked := 0
	for _, l := range strings.Split(strings.TrimSpace(drawLog), "\n") {
		var line fairness.DrawLine
		require.NoError(t, json.Unmarshal([]byte(l), &line))
		claims, ok := receipts[fmt.Sprintf("%s/%d", id, line.Seq)]
		if !ok {
			continue
		}
		require.NotNil(t, line.GrantedAt, "packet %d has a holder and a grant time", line.Seq)
		at, err := time.Parse(time.RFC3339Nano, claims["granted_at"].(string))
		require.NoError(t, err)
		require.True(t, line.GrantedAt.Equal(at), "packet %d: the receipt says %v, the ledger %v", line.Seq, at, *line.GrantedAt)
		require.LessOrEqual(t, at.Unix(), int64(claims["iat"].(float64)), "granted before the receipt was signed")
		require.True(t, at.After(opens.Add(-time.Second)) && at.Before(time.Now()), "granted in the window: %v", at)
		checked++
	}
	require.Equal(t, users, checked, "every player's receipt")

	cf, jf, lf := filepath.Join(dir, "commitment.json"), filepath.Join(dir, "jwks.json"), filepath.Join(dir, "draw.jsonl")
	require.NoError(t, os.WriteFile(cf, []byte(early), 0o600))
	require.NoError(t, os.WriteFile(jf, jwks, 0o600))
	require.NoError(t, os.WriteFile(lf, []byte(drawLog), 0o600))
	verify := func(args ...string) (int, string) {
		c, out, errs := run(t, nil, append([]string{"verify"}, args...)...)
		return c, out + errs
	}
	c, out := verify("draw-log", "--commitment", cf, lf)
	require.Equal(t, 0, c, out)
	c, out = verify("receipt", "--jwks", jf, filepath.Join(dir, "player-0.jws"))
	require.Equal(t, 0, c, out)
	c, out = verify("proof", "--commitment", cf, filepath.Join(dir, "player-1.proof"))
	require.Equal(t, 0, c, out)

	lines := strings.Split(strings.TrimSpace(drawLog), "\n")
	edit := func(name string, change func([]map[string]any)) string {
		var rows []map[string]any
		for _, l := range lines {
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &r))
			rows = append(rows, r)
		}
		change(rows)
		var b strings.Builder
		for _, r := range rows {
			j, _ := json.Marshal(r)
			b.Write(append(j, '\n'))
		}
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	// One cent moved from one packet to the next: the total holds.
	c, out = verify("draw-log", "--commitment", cf, edit("cent.jsonl", func(r []map[string]any) {
		r[3]["cents"] = r[3]["cents"].(float64) + 1
		r[4]["cents"] = r[4]["cents"].(float64) - 1
	}))
	require.Equal(t, 1, c, out)
	c, out = verify("draw-log", "--commitment", cf, edit("salt.jsonl", func(r []map[string]any) {
		r[0]["salt"], r[1]["salt"] = r[1]["salt"], r[0]["salt"]
	}))
	require.Equal(t, 1, c, out)
	// A proof whose amount was raised by one cent.
	var pr map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "player-1.proof"))
	require.NoError(t, json.Unmarshal(b, &pr))
	pr["cents"] = pr["cents"].(float64) + 1
	b, _ = json.Marshal(pr)
	bad := filepath.Join(dir, "bad.proof")
	require.NoError(t, os.WriteFile(bad, b, 0o600))
	c, out = verify("proof", "--root", pub.Root, "--size", strconv.Itoa(count), bad)
	require.Equal(t, 1, c, out)
	// A receipt whose amount was raised, under the real signature.
	jws, _ := os.ReadFile(filepath.Join(dir, "player-0.jws"))
	parts := strings.Split(string(jws), ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(payload, &claims))
	claims["amount_cents"] = 999999
	payload, _ = json.Marshal(claims)
	forged := filepath.Join(dir, "forged.jws")
	require.NoError(t, os.WriteFile(forged, []byte(parts[0]+"."+base64.RawURLEncoding.EncodeToString(payload)+"."+parts[2]), 0o600))
	c, out = verify("receipt", "--jwks", jf, forged)
	require.Equal(t, 1, c, out)
	// Bad input: 2.
	c, out = verify("receipt", "--jwks", jf, cf)
	require.Equal(t, 2, c, out)
	c, out = verify("draw-log", "--commitment", jf, lf)
	require.Equal(t, 2, c, out)

	code, out, errs := run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "%s %s", out, errs)
	require.Contains(t, out, "commitment root "+pub.Root)
}

// ed25519Claims checks a compact JWS with crypto/ed25519 against the key
// its kid names in jwks, and returns its payload.
func ed25519Claims(t *testing.T, compact string, jwks []byte) map[string]any {
	t.Helper()
	parts := strings.Split(compact, ".")
	require.Len(t, parts, 3)
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	var hdr struct{ Alg, Kid string }
	require.NoError(t, json.Unmarshal(hb, &hdr))
	require.Equal(t, "EdDSA", hdr.Alg)
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid string }
	}
	require.NoError(t, json.Unmarshal(jwks, &set))
	var pub ed25519.PublicKey
	for _, k := range set.Keys {
		if k.Kid == hdr.Kid && k.Kty == "OKP" && k.Crv == "Ed25519" {
			pub, err = base64.RawURLEncoding.DecodeString(k.X)
			require.NoError(t, err)
		}
	}
	require.Len(t, pub, ed25519.PublicKeySize, "kid %q in the JWKS", hdr.Kid)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	require.True(t, ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig), "the receipt's signature")
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(body, &claims))
	return claims
}

// tlogCheck checks a proof with golang.org/x/mod/sumdb/tlog.
func tlogCheck(t *testing.T, campaign string, p fairness.Proof, root fairness.Hash) {
	t.Helper()
	salt, err := hex.DecodeString(p.Salt)
	require.NoError(t, err)
	proof := make(tlog.RecordProof, len(p.Path))
	for i, s := range p.Path {
		h, err := fairness.ParseHash(s)
		require.NoError(t, err)
		proof[i] = tlog.Hash(h)
	}
	leaf := tlog.RecordHash([]byte(fmt.Sprintf("hongbao-packet-v1:%s:%d:%d:%s", campaign, p.Seq, p.Cents, hex.EncodeToString(salt))))
	require.NoError(t, tlog.CheckRecord(proof, p.TreeSize, tlog.Hash(root), p.LeafIndex, leaf))
}
