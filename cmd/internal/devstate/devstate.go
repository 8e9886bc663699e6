// Package devstate is the local state of the developer setup (make run): generated secrets and
// the demo client, kept in a git-ignored folder (.mnv by default) so that restarts keep working
// and mnvctl finds the admin credential without any setup.
package devstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/findup"
)

// Secret names and the variables they feed (as NAME_FILE).
var secrets = []struct {
	file, env string
	make      func() string
}{
	{"pepper", "MNV_PEPPER", crypto.NewSecret},
	{"data-keys", "MNV_DATA_KEYS", func() string { return crypto.NewKeySpec("dev1") }},
	{"internal-token", "MNV_INTERNAL_TOKEN", crypto.NewSecret},
	{"admin-token", "MNV_ADMIN_TOKEN", crypto.NewSecret},
	{"number-hash-key", "MNV_NUMBER_HASH_KEY", crypto.NewSecret},
}

// EnsureSecrets creates any missing secret file under dir/secrets (mode 0600) and points the
// process environment at them, unless the environment already sets the secret itself.
func EnsureSecrets(dir string) error {
	sdir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sdir, err)
	}
	for _, s := range secrets {
		if os.Getenv(s.env) != "" || os.Getenv(s.env+"_FILE") != "" {
			continue
		}
		path := filepath.Join(sdir, s.file)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			_, werr := f.WriteString(s.make() + "\n")
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return fmt.Errorf("write %s: %w", path, werr)
			}
		case !errors.Is(err, fs.ErrExist):
			return fmt.Errorf("create %s: %w", path, err)
		}
		if err := os.Setenv(s.env+"_FILE", path); err != nil {
			return err
		}
	}
	return nil
}

// FindAdminToken looks for the admin token of a local setup: .mnv/secrets/admin-token in the
// working directory or any directory above it.
func FindAdminToken() (string, error) {
	p, err := findup.Path(filepath.Join(".mnv", "secrets", "admin-token"))
	if errors.Is(err, findup.ErrNotFound) {
		return "", errors.New("no admin token: set MNV_ADMIN_TOKEN or MNV_ADMIN_TOKEN_FILE, or run mnvctl inside the checkout where make run runs")
	}
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
