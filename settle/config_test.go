package settle_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestConfigErrors: every refusal of a settle.Config is a
// *settle.ConfigError naming the field, by Validate and by New alike.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	rc := testenv.SharedRedis(t).Client
	led := struct{ ledger.Ledger }{} // never called: New reads nothing
	sink := struct{ settle.Sink }{}
	cases := []struct {
		name  string
		cfg   settle.Config
		field string
		value string
	}{
		{"no redis", settle.Config{Ledger: led}, "Config.Redis", ""},
		{"no ledger nor sink", settle.Config{Redis: rc}, "Config.Ledger", ""},
		{"ledger and sink", settle.Config{Redis: rc, Ledger: led, Sink: sink}, "Config.Sink", ""},
		{"wait replicas", settle.Config{Redis: rc, Ledger: led, WaitReplicas: -1}, "Config.WaitReplicas", "-1"},
		{"wait timeout", settle.Config{Redis: rc, Ledger: led, WaitTimeout: -time.Second}, "Config.WaitTimeout", "-1s"},
		{"namespace", settle.Config{Redis: rc, Ledger: led, Namespace: "a{b}"}, "Config.Namespace", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, nerr := settle.New(tc.cfg)
			for _, err := range []error{tc.cfg.Validate(), nerr} {
				require.ErrorIs(t, err, settle.ErrConfig)
				var ce *settle.ConfigError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tc.field, ce.Field)
				require.Equal(t, tc.value, ce.Value)
				require.Contains(t, err.Error(), "settle: invalid configuration: "+tc.field+": ")
			}
		})
	}
	require.NoError(t, settle.Config{Redis: rc, Sink: sink}.Validate())
	require.NoError(t, settle.Config{Redis: rc, Ledger: led, Namespace: "tenant-1"}.Validate())
}
