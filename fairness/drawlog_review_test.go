package fairness

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func drawLogOf(t *testing.T, c Commitment, cents []int64, salts []byte, holders []string) string {
	t.Helper()
	var b strings.Builder
	for i, ct := range cents {
		d := DrawLine{Seq: int64(i + 1), Cents: ct, Salt: hex.EncodeToString(salts[SaltSize*i : SaltSize*(i+1)])}
		if holders != nil && holders[i] != "" {
			h := holders[i]
			d.Holder = &h
		}
		line, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// The commitment publishes min_cents, max_cents and a histogram; the draw
// log's check holds whatever they say, so a commitment that published a
// false distribution "holds" with hongbao verify draw-log.
func TestReviewDrawLogIgnoresDistribution(t *testing.T) {
	cents := []int64{1, 1, 1, 997}
	salts, err := NewSalts(len(cents))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Commit("c", cents, salts, 1, 1000, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.MinCents, c.MaxCents = 200, 300
	c.Histogram = []Bucket{{MinCents: 200, MaxCents: 300, Count: 4}}
	if _, err := VerifyDrawLog(strings.NewReader(drawLogOf(t, c, cents, salts, nil)), c); err == nil {
		t.Errorf("a draw log with a 997-cent packet holds against a commitment that published 200..300 cents, histogram %v", c.Histogram)
	}
}

// One user holds two packets in the draw log (the same pseudonym twice):
// the check holds.
func TestReviewDrawLogTwoPacketsOneHolder(t *testing.T) {
	cents := []int64{1, 2}
	salts, err := NewSalts(len(cents))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Commit("c", cents, salts, 1, 2, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyDrawLog(strings.NewReader(drawLogOf(t, c, cents, salts, []string{"ab", "ab"})), c); err == nil {
		t.Errorf("a draw log where one holder holds two packets holds")
	}
}
