// Package config reads service configuration from MNV_ environment variables, and secrets from
// the environment or from mounted files.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env reads typed variables and collects every problem, so that a misconfigured service reports
// all of its mistakes at once instead of one per restart.
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// FromOS reads the process environment.
func FromOS() *Env { return New(os.LookupEnv) }

// New reads variables through lookup (os.LookupEnv, or a map in tests).
func New(lookup func(string) (string, bool)) *Env { return &Env{lookup: lookup} }

// FromMap reads variables from m; for tests and for composing the all-in-one binary.
func FromMap(m map[string]string) *Env {
	return New(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

func (e *Env) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return strings.TrimSpace(v), true
}

func (e *Env) fail(name string, err error) { e.errs = append(e.errs, fmt.Errorf("%s: %w", name, err)) }

// String returns the variable or def when unset.
func (e *Env) String(name, def string) string {
	if v, ok := e.get(name); ok {
		return v
	}
	return def
}

// Int returns the variable as an integer, or def when unset.
func (e *Env) Int(name string, def int) int {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.fail(name, fmt.Errorf("not an integer: %q", v))
		return def
	}
	return n
}

// Float returns the variable as a decimal number ("2", "0.5"), or def when unset. NaN and the
// infinities are refused: no setting means them.
func (e *Env) Float(name string, def float64) float64 {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(name, fmt.Errorf("not a number: %q", v))
		return def
	}
	return f
}

// Duration returns the variable as a Go duration ("1.5s", "2m"), or def when unset.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(name, fmt.Errorf("not a duration: %q", v))
		return def
	}
	return d
}

// Bool returns the variable as a boolean, or def when unset.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, fmt.Errorf("not a boolean: %q", v))
		return def
	}
	return b
}

// Secret returns a secret from NAME, or from the file named by NAME_FILE (the Kubernetes way:
// a mounted Secret). Both set is an error, so nobody wonders which one wins. Unset is "": the
// caller decides whether the secret is required.
func (e *Env) Secret(name string) string {
	v, inline := e.get(name)
	path, fromFile := e.get(name + "_FILE")
	switch {
	case inline && fromFile:
		e.fail(name, errors.New("set either it or "+name+"_FILE, not both"))
		return ""
	case fromFile:
		b, err := os.ReadFile(path)
		if err != nil {
			e.fail(name+"_FILE", err)
			return ""
		}
		return strings.TrimSpace(string(b))
	default:
		return v
	}
}

// DatabaseURL reads a service's database URL: its own variable when set, else DATABASE_URL,
// which is then required. Both are read as plain values: Kubernetes passes them by
// secretKeyRef, and a _FILE form would be one more way to get it wrong.
func (e *Env) DatabaseURL(own string) string {
	u := e.String(own, e.String("DATABASE_URL", ""))
	e.Require("DATABASE_URL", u)
	return u
}

// Require records an error when value is empty.
func (e *Env) Require(name, value string) {
	if value == "" {
		e.fail(name, errors.New("required"))
	}
}

// Err returns every problem met so far, joined.
func (e *Env) Err() error { return errors.Join(e.errs...) }
