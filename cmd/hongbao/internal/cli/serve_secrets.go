package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// tokenSecrets reads --token-secret-file values, each "[kid=]path".
func tokenSecrets(specs []string) ([]httpapi.Secret, error) {
	var out []httpapi.Secret
	for _, s := range specs {
		kid, path, ok := strings.Cut(s, "=")
		if !ok {
			kid, path = "", s
		}
		key, err := readSecretFile("token-secret-file", path)
		if err != nil {
			return nil, err
		}
		out = append(out, httpapi.Secret{KID: kid, Key: key})
	}
	return out, nil
}

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
