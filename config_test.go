package hongbao_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestConfigErrors: every refusal of a Config is a *ConfigError naming
// the field as Go code spells it, with the value refused; New refuses
// what Validate refuses; one prefix.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	rc := testenv.SharedRedis(t).Client
	cases := []struct {
		name  string
		cfg   hongbao.Config
		field string
		value string
		cause error // also in the chain, when not nil
	}{
		{"no redis", hongbao.Config{}, "Config.Redis", "", nil},
		{"namespace", hongbao.Config{Redis: rc, Namespace: "a b"}, "Config.Namespace", "", nil},
		{"owner", hongbao.Config{Redis: rc, Owner: "has space"}, "Config.Owner", "", hongbao.ErrInvalidID},
		{"without ledger and a ledger", hongbao.Config{Redis: rc, Packets: nopRecorder{}, WithoutLedger: true}, "Config.WithoutLedger", "true", nil},
		{"window", hongbao.Config{Redis: rc, DefaultWindow: -time.Second}, "Config.DefaultWindow", "-1s", nil},
		{"batch timeout", hongbao.Config{Redis: rc, BatchTimeout: -time.Second}, "Config.BatchTimeout", "-1s", nil},
		{"wait timeout", hongbao.Config{Redis: rc, WaitTimeout: -time.Second}, "Config.WaitTimeout", "-1s", nil},
		{"max batch", hongbao.Config{Redis: rc, MaxBatch: 5000}, "Config.MaxBatch", "5000", nil},
		{"negative batch", hongbao.Config{Redis: rc, MaxBatch: -1}, "Config.MaxBatch", "-1", nil},
		{"max queue", hongbao.Config{Redis: rc, MaxQueue: -1}, "Config.MaxQueue", "-1", nil},
		{"block size", hongbao.Config{Redis: rc, BlockSize: hongbao.MaxBlockSize + 1}, "Config.BlockSize", "100001", nil},
		{"wait replicas", hongbao.Config{Redis: rc, WaitReplicas: -1}, "Config.WaitReplicas", "-1", nil},
		{"wait above batch", hongbao.Config{Redis: rc, WaitReplicas: 1, WaitTimeout: time.Second, BatchTimeout: time.Second},
			"Config.WaitTimeout", "1s", nil},
		// The default BatchTimeout counts as much as a set one.
		{"wait above default batch", hongbao.Config{Redis: rc, WaitReplicas: 1, WaitTimeout: 10 * time.Second},
			"Config.WaitTimeout", "10s", nil},
		// And the default WaitTimeout against a short BatchTimeout.
		{"default wait above batch", hongbao.Config{Redis: rc, WaitReplicas: 1, BatchTimeout: 400 * time.Millisecond},
			"Config.WaitTimeout", "500ms", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, err := range []error{tc.cfg.Validate(), newErr(tc.cfg)} {
				require.ErrorIs(t, err, hongbao.ErrInvalidConfig)
				var ce *hongbao.ConfigError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tc.field, ce.Field)
				require.Equal(t, tc.value, ce.Value)
				require.NotEmpty(t, ce.Reason)
				require.Contains(t, err.Error(), tc.field)
				requireOnePrefix(t, err)
				if tc.cause != nil {
					require.ErrorIs(t, err, tc.cause)
				}
			}
		})
	}

	// Waits shorter than the batch they run in pass, set or defaulted;
	// without replicas the WaitTimeout is not used, so not compared.
	for _, cfg := range []hongbao.Config{
		{Redis: rc, WaitReplicas: 1, WaitTimeout: 4 * time.Second},
		{Redis: rc, WaitReplicas: 1, BatchTimeout: 600 * time.Millisecond},
		{Redis: rc, WaitReplicas: 1, WaitTimeout: 9 * time.Second, BatchTimeout: 10 * time.Second},
		{Redis: rc, WaitTimeout: 10 * time.Second},
	} {
		require.NoError(t, cfg.Validate(), "%+v", cfg)
	}
}

// newErr is New's refusal of cfg.
func newErr(cfg hongbao.Config) error {
	_, err := hongbao.New(cfg)
	return err
}

// nopRecorder records nothing.
type nopRecorder struct{}

func (nopRecorder) WritePackets(context.Context, string, []int64) error { return nil }

// TestNewWarnsWithoutLedger: an engine without Config.Packets says what is
// lost, once, at New, unless Config.WithoutLedger says it is on purpose;
// one with a recorder says nothing.
func TestNewWarnsWithoutLedger(t *testing.T) {
	t.Parallel()
	rc := testenv.SharedRedis(t).Client
	for _, tc := range []struct {
		name string
		cfg  hongbao.Config
		warn bool
	}{
		{"bare", hongbao.Config{Redis: rc}, true},
		{"on purpose", hongbao.Config{Redis: rc, WithoutLedger: true}, false},
		{"recorder", hongbao.Config{Redis: rc, Packets: nopRecorder{}}, false},
	} {
		var buf bytes.Buffer
		tc.cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		_, err := hongbao.New(tc.cfg)
		require.NoError(t, err)
		if !tc.warn {
			require.Empty(t, buf.String(), tc.name)
			continue
		}
		require.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), tc.name)
		for _, word := range []string{"Config.Packets is nil", "rebuilt", "Config.WithoutLedger"} {
			require.Contains(t, buf.String(), word, tc.name)
		}
	}
}
