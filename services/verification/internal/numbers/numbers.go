// Package numbers keeps mobile numbers at rest: sealed with the service's keyring (the table and
// row as associated data, so a sealed number moved to another row does not open), with a keyed
// hash beside them for equality lookups and a masked form for display.
package numbers

import (
	"fmt"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Vault seals, opens, hashes and masks numbers.
type Vault struct {
	keyring *crypto.Keyring
	hasher  *phone.Hasher
}

// NewVault returns a Vault.
func NewVault(keyring *crypto.Keyring, hasher *phone.Hasher) *Vault {
	return &Vault{keyring: keyring, hasher: hasher}
}

func ad(table, rowID string) []byte { return []byte("verification." + table + ":" + rowID) }

// Seal seals an E.164 number for the row rowID of table.
func (v *Vault) Seal(e164, table, rowID string) []byte {
	return v.keyring.Seal([]byte(e164), ad(table, rowID))
}

// Open opens a number sealed for the row rowID of table.
func (v *Vault) Open(sealed []byte, table, rowID string) (string, error) {
	b, err := v.keyring.Open(sealed, ad(table, rowID))
	if err != nil {
		return "", fmt.Errorf("open number of %s %s: %w", table, rowID, err)
	}
	return string(b), nil
}

// Hash is the keyed hash of an E.164 number; Connect computes the same one.
func (v *Vault) Hash(e164 string) []byte { return v.hasher.Sum(e164) }

// Mask is the display form of a number (+97150*****67).
func (v *Vault) Mask(e164 string) string { return phone.Mask(e164) }
