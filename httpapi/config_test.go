package httpapi_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestConfigRefusesUselessSecrets: a configuration whose secrets could not
// all be used, or are too short, is refused rather than half applied.
func TestConfigRefusesUselessSecrets(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	noKID := httpapi.Secret{Key: userSecret2.Key}
	for name, tc := range map[string]struct {
		secrets []httpapi.Secret
		admin   [][]byte
		msg     string
	}{
		"no kid after the first": {[]httpapi.Secret{userSecret, noKID}, [][]byte{adminKey}, "only the first"},
		"kid twice":              {[]httpapi.Secret{userSecret, {KID: userSecret.KID, Key: userSecret2.Key}}, [][]byte{adminKey}, "two user token secrets"},
		"short secret":           {[]httpapi.Secret{{KID: "k", Key: []byte("short")}}, [][]byte{adminKey}, "at least 32"},
		"short admin key":        {[]httpapi.Secret{userSecret}, [][]byte{[]byte("short")}, "at least 32"},
		"long admin key":         {[]httpapi.Secret{userSecret}, [][]byte{bytes.Repeat([]byte("k"), 4097)}, "at most 4096"},
		"no secret":              {nil, [][]byte{adminKey}, "at least one user token secret"},
		"no admin key":           {[]httpapi.Secret{userSecret}, nil, "at least one admin key"},
	} {
		_, err := httpapi.New(httpapi.Config{Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""), UserSecrets: tc.secrets, AdminKeys: tc.admin})
		require.ErrorContains(t, err, tc.msg, name)
	}
	// The first without a kid and the others with one is fine.
	_, err = httpapi.New(httpapi.Config{Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""), UserSecrets: []httpapi.Secret{noKID, userSecret}, AdminKeys: [][]byte{adminKey}})
	require.NoError(t, err)
}
