package scheduler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

// TestConfigErrors: every refusal of a scheduler.Config, its settlement's
// included, is a *hongbao.ConfigError naming the field from this
// package; a refusal of the settlement also matches settle.ErrConfig.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	rc := testenv.SharedRedis(t).Client
	eng, err := hongbao.New(hongbao.Config{Redis: rc, Namespace: "other", WithoutLedger: true})
	require.NoError(t, err)
	ok := settle.Config{Redis: rc, Ledger: struct{ ledger.Ledger }{}}
	cases := []struct {
		name   string
		cfg    scheduler.Config
		field  string
		value  string
		settle bool // the settlement's refusal
	}{
		{"lease ttl", scheduler.Config{Settle: ok, LeaseTTL: -time.Second}, "scheduler.Config.LeaseTTL", "-1s", false},
		{"short lease ttl", scheduler.Config{Settle: ok, LeaseTTL: time.Millisecond}, "scheduler.Config.LeaseTTL", "1ms", false},
		{"lease ttl not whole ms", scheduler.Config{Settle: ok, LeaseTTL: time.Second + 1}, "scheduler.Config.LeaseTTL", "1.000000001s", false},
		{"lease name", scheduler.Config{Settle: ok, LeaseName: "a{b}"}, "scheduler.Config.LeaseName", "a{b}", false},
		{"reap every", scheduler.Config{Settle: ok, ReapEvery: -1}, "scheduler.Config.ReapEvery", "-1ns", false},
		{"stop grace", scheduler.Config{Settle: ok, StopGrace: -1}, "scheduler.Config.StopGrace", "-1ns", false},
		{"backlog every", scheduler.Config{Settle: ok, BacklogEvery: -1}, "scheduler.Config.BacklogEvery", "-1ns", false},
		{"negative backlog", scheduler.Config{Settle: ok, MaxBacklog: -1}, "scheduler.Config.MaxBacklog", "-1", false},
		{"backlog without engine", scheduler.Config{Settle: ok, MaxBacklog: 1}, "scheduler.Config.MaxBacklog", "1", false},
		{"parts", scheduler.Config{Settle: ok, Parts: scheduler.MaxParts + 1}, "scheduler.Config.Parts", "1025", false},
		{"settle parts", scheduler.Config{Settle: settle.Config{Redis: rc, Ledger: ok.Ledger, Parts: partHolder{}}}, "scheduler.Config.Settle.Parts", "", false},
		{"settle redis", scheduler.Config{Settle: settle.Config{Ledger: ok.Ledger}}, "scheduler.Config.Settle.Redis", "", true},
		{"settle ledger", scheduler.Config{Settle: settle.Config{Redis: rc}}, "scheduler.Config.Settle.Ledger", "", true},
		{"settle wait", scheduler.Config{Settle: settle.Config{Redis: rc, Ledger: ok.Ledger, WaitReplicas: -2}}, "scheduler.Config.Settle.WaitReplicas", "-2", true},
		{"engine's namespace", scheduler.Config{Settle: ok, Engine: eng}, "scheduler.Config.Settle.Namespace", "hb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, nerr := scheduler.New(tc.cfg)
			for _, err := range []error{tc.cfg.Validate(), nerr} {
				require.ErrorIs(t, err, hongbao.ErrInvalidConfig)
				var ce *hongbao.ConfigError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tc.field, ce.Field)
				require.Equal(t, tc.value, ce.Value)
				require.Contains(t, err.Error(), tc.field)
				if tc.settle {
					require.ErrorIs(t, err, settle.ErrConfig)
				} else {
					require.NotErrorIs(t, err, settle.ErrConfig)
				}
			}
		})
	}
	require.NoError(t, scheduler.Config{Settle: ok}.Validate())
}

// partHolder is a settle.PartHolder that holds nothing.
type partHolder struct{}

func (partHolder) Parts() int             { return 1 }
func (partHolder) Held(int) (int64, bool) { return 0, false }
