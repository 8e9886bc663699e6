// Package findup finds a file in the working directory or the nearest directory above it: how
// the developer tools (tests, mnvctl) find the checkout's scripts and local state without
// being told where the checkout is.
package findup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNotFound is returned when no directory up to the root holds the file.
var ErrNotFound = errors.New("not found in the working directory or above it")

// Path returns the path of rel (e.g. "deploy/local/pg-ensure.sh") in the working directory or
// the nearest directory above it that has it.
func Path(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNotFound
		}
		dir = parent
	}
}

// Output runs the program rel (found as Path finds it, e.g. "deploy/local/pg-ensure.sh") and
// returns its standard output, trimmed; its standard error, when it fails, is in the error.
func Output(rel string) (string, error) {
	p, err := Path(rel)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(p).Output() //nolint:gosec // G204: a script of the checkout, named by the caller (developer tools)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("%s: %w", filepath.Base(rel), err)
	}
	return string(bytes.TrimSpace(out)), nil
}
