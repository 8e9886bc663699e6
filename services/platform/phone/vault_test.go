package phone_test

import (
	"bytes"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/phone"
)

func TestVaultBindsANumberToItsRow(t *testing.T) {
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("k1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	verification := phone.NewVault("verification", keyring, hasher)
	connect := phone.NewVault("connect", keyring, hasher)
	const number = "+971501234567"
	sealed := verification.Seal(number, "verifications", "row-1")

	if got, err := verification.Open(sealed, "verifications", "row-1"); err != nil || got != number {
		t.Fatalf("Open on its own row = %q, %v", got, err)
	}
	for _, c := range []struct {
		name         string
		vault        *phone.Vault
		table, rowID string
	}{
		{"another row", verification, "verifications", "row-2"},
		{"another table", verification, "stuck_plus_sessions", "row-1"},
		{"another service", connect, "verifications", "row-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := c.vault.Open(sealed, c.table, c.rowID); err == nil {
				t.Fatalf("opened %q elsewhere", got)
			}
		})
	}
	// Both services must compute one hash of a number: it is how a verified number finds the
	// client's Connect profiles.
	if !bytes.Equal(verification.Hash(number), connect.Hash(number)) {
		t.Fatal("the services hash one number differently")
	}
}
