package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/ledgertest"
	"github.com/hongbao/hongbao/ledger/sqlite"
)

func fresh(t testing.TB) string { return filepath.Join(t.TempDir(), "ledger.db") }

func dial(ctx context.Context, path string) (ledger.Ledger, error) {
	l, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, ledgertest.PerTest(fresh, dial))
}

func BenchmarkApplyGrants(b *testing.B) {
	l, err := sqlite.Open(context.Background(), fresh(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ledgertest.Bench(b, l)
}

// BenchmarkApplyGrantsWriters settles one campaign with one and with two
// concurrent writers of disjoint parts.
func BenchmarkApplyGrantsWriters(b *testing.B) {
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l, err := sqlite.Open(context.Background(), fresh(b))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ledgertest.BenchWriters(b, l, writers)
		})
	}
}

func BenchmarkApplyGrantsReplay(b *testing.B) {
	l, err := sqlite.Open(context.Background(), fresh(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ledgertest.BenchReplay(b, l)
}

// BenchmarkWritePackets records a campaign of 1,000,000 packets per
// iteration; run it once: go test -run XXX -bench WritePackets -benchtime 1x
func BenchmarkWritePackets(b *testing.B) {
	l, err := sqlite.Open(context.Background(), fresh(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ledgertest.BenchPackets(b, l)
}
