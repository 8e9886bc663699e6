// Package verificationtest builds what the verification service's unit tests share: fresh keys
// that seal blobs and numbers, and an operator registry from YAML.
package verificationtest

import (
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// Keys seal what the service keeps: blobs (Sealer) and numbers at rest (Vault), under one fresh
// keyring.
type Keys struct {
	Sealer *seal.Sealer
	Vault  *phone.Vault
}

// NewKeys returns Keys under a fresh keyring and number-hash key.
func NewKeys(t testing.TB) Keys {
	t.Helper()
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	return Keys{Sealer: seal.NewSealer(keyring), Vault: phone.NewVault("verification", keyring, hasher)}
}

// Operators parses a registry (the operators file's YAML).
func Operators(t testing.TB, yaml string) *operators.Registry {
	t.Helper()
	ops, err := operators.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}
