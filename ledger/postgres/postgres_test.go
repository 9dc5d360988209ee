package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
	"github.com/hongbao/hongbao/ledger/ledgertest"
	"github.com/hongbao/hongbao/ledger/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func dial(ctx context.Context, dsn string) (ledger.Ledger, error) {
	l, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, ledgertest.PerTest(pgtest.DSN, dial))
}

func BenchmarkApplyGrants(b *testing.B) {
	l, err := postgres.Open(context.Background(), pgtest.DSN(b))
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
			l, err := postgres.Open(context.Background(), pgtest.DSN(b))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ledgertest.BenchWriters(b, l, writers)
		})
	}
}

func BenchmarkApplyGrantsReplay(b *testing.B) {
	l, err := postgres.Open(context.Background(), pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ledgertest.BenchReplay(b, l)
}

// BenchmarkWritePackets records a campaign of 1,000,000 packets per
// iteration; run it once: go test -run XXX -bench WritePackets -benchtime 1x
func BenchmarkWritePackets(b *testing.B) {
	l, err := postgres.Open(context.Background(), pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ledgertest.BenchPackets(b, l)
}
