package rebuild_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/rebuild"
)

// TestConfigErrors: every refusal of a rebuild.Config is a
// *hongbao.ConfigError naming the field from this package, by Validate
// and by Rebuild alike, before anything is read.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	rc := testenv.SharedRedis(t).Client
	led := struct{ ledger.Ledger }{} // never called
	cases := []struct {
		name  string
		cfg   rebuild.Config
		field string
	}{
		{"no redis", rebuild.Config{Ledger: led}, "rebuild.Config.Redis"},
		{"no ledger", rebuild.Config{Redis: rc}, "rebuild.Config.Ledger"},
		{"namespace", rebuild.Config{Redis: rc, Ledger: led, Namespace: "a b"}, "rebuild.Config.Namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, rerr := rebuild.Rebuild(t.Context(), tc.cfg, "c1")
			for _, err := range []error{tc.cfg.Validate(), rerr} {
				require.ErrorIs(t, err, hongbao.ErrInvalidConfig)
				var ce *hongbao.ConfigError
				require.True(t, errors.As(err, &ce), "%v", err)
				require.Equal(t, tc.field, ce.Field)
			}
		})
	}
	require.NoError(t, rebuild.Config{Redis: rc, Ledger: led}.Validate())
}
