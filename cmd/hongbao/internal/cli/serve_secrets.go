package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/random"
)

// fileList is a flag that may be given several times; an environment
// variable gives several values separated by commas.
type fileList []string

func (l *fileList) String() string { return strings.Join(*l, ",") }

func (l *fileList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// readSecretFile reads a key or secret: raw text with surrounding
// whitespace trimmed, at least httpapi.MinSecretLen bytes.
func readSecretFile(flagName, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--%s: %v", flagName, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < httpapi.MinSecretLen {
		return nil, usageErrorf("--%s %s: the secret is %d bytes; at least %d are needed", flagName, path, len(b), httpapi.MinSecretLen)
	}
	return b, nil
}

// keySpec splits a key file's flag value, "[kid=]PATH", into its kid and
// its path. Either may hold "=" (a kid such as a padded base64 value, a
// path such as keys/v=2.pem), so the value is not cut at its first "=":
// every reading that names a file is tried, the whole value as a path
// (no kid) and each KID=PATH split at one of its "=", and exactly one of
// them must name a file. None is an error that names the paths tried;
// several are an error that asks for the ambiguity to be removed (rename
// the file). A kid is printable text without spaces, at most 128 bytes.
func keySpec(flagName, spec string) (kid, path string, err error) {
	if spec == "" {
		return "", "", usageErrorf("--%s: empty; want [kid=]PATH", flagName)
	}
	type reading struct{ kid, path string }
	var found, tried []reading
	try := func(kid, path string) {
		if path == "" {
			return
		}
		tried = append(tried, reading{kid, path})
		if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
			found = append(found, reading{kid, path})
		}
	}
	try("", spec)
	for i := 0; i < len(spec); i++ {
		if spec[i] == '=' && i > 0 {
			try(spec[:i], spec[i+1:])
		}
	}
	switch {
	case len(found) == 0 && strings.HasPrefix(spec, "="):
		return "", "", usageErrorf("--%s %s: no such file (an empty kid before \"=\"? give PATH alone for the default kid)", flagName, spec)
	case len(found) == 0 && len(tried) == 1:
		return "", "", usageErrorf("--%s %s: no such file", flagName, spec)
	case len(found) == 0:
		paths := make([]string, len(tried))
		for i, r := range tried {
			paths[i] = r.path
		}
		return "", "", usageErrorf("--%s %s: no such file, read as [kid=]PATH: none of %s exists", flagName, spec, strings.Join(paths, ", "))
	case len(found) > 1:
		var opts []string
		for _, r := range found {
			if r.kid == "" {
				opts = append(opts, fmt.Sprintf("the file %s without a kid", r.path))
			} else {
				opts = append(opts, fmt.Sprintf("kid %q and the file %s", r.kid, r.path))
			}
		}
		return "", "", usageErrorf("--%s %s: ambiguous, it reads as %s; rename the file", flagName, spec, strings.Join(opts, ", or "))
	}
	kid, path = found[0].kid, found[0].path
	if kid != "" {
		if len(kid) > 128 {
			return "", "", usageErrorf("--%s: the kid before %s is %d bytes, at most 128", flagName, path, len(kid))
		}
		for _, r := range kid {
			if !unicode.IsPrint(r) || unicode.IsSpace(r) {
				return "", "", usageErrorf("--%s: the kid %q holds a space or a character that is not printable", flagName, kid)
			}
		}
	}
	return kid, path, nil
}

// tokenSecrets reads --token-secret-file values, each "[kid=]path".
func tokenSecrets(specs []string) ([]httpapi.Secret, error) {
	var out []httpapi.Secret
	for _, s := range specs {
		kid, path, err := keySpec("token-secret-file", s)
		if err != nil {
			return nil, err
		}
		key, err := readSecretFile("token-secret-file", path)
		if err != nil {
			return nil, err
		}
		out = append(out, httpapi.Secret{KID: kid, Key: key})
	}
	return out, nil
}

// defaultDataDir is serve's data directory when --data-dir is not given
// (relative to the working directory), where campaign and token look for
// its generated secrets too.
const defaultDataDir = "hongbao-data"

// Files of the secrets serve makes in its data directory when none are
// given, so a newcomer's first run needs no setup.
const (
	defaultAdminKeyFile    = "admin.key"
	defaultTokenSecretFile = "token.secret"
	// defaultReceiptKeyFile is the Ed25519 seed that signs receipts.
	defaultReceiptKeyFile = "receipt.key"
	// defaultRedisPassFile is the password of the embedded redis-server.
	defaultRedisPassFile = "redis.pass"
)

// ensureSecretFile returns path, writing a fresh random secret there
// (mode 0600) when the file does not exist. The secret is written to a
// temporary file first and linked into place, so a second process starting
// at the same moment reads either no file or the whole secret, never a
// half-written one.
func ensureSecretFile(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(dir, ".secret-*") // mode 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name())
	if _, err := fmt.Fprintln(f, random.Hex(32)); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil // another process made it first
		}
		return false, err
	}
	return true, nil
}
