package hongbao_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
)

// BenchmarkCreateMillion creates campaigns of 1,000,000 packets into a
// redis-server of its own (no persistence) with a SQLite ledger: the
// split, the load, the packets recorded and, where the ledger keeps them,
// the commitment (salts, the tree's root, written before the campaign
// goes live).
func BenchmarkCreateMillion(b *testing.B) {
	ctx := context.Background()
	r := testenv.NewRedis(b, redisserver.Options{AOF: "off"})
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		n++
		if _, err := eng.Create(ctx, hongbao.Spec{ID: "million-" + strconv.Itoa(n), Total: 100_000_000, Count: 1_000_000}); err != nil {
			b.Fatal(err)
		}
	}
}
