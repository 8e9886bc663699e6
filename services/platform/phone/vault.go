package phone

import (
	"fmt"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

// Vault keeps mobile numbers at rest, the one way every service does: sealed with the service's
// keyring under the schema, table and row as associated data (a sealed number copied to another
// row, table or service does not open), with a keyed hash beside it for equality lookups.
// Verification and Connect compute the same hash of a number, which is how a verified number
// finds its Connect profiles without either side opening the other's rows.
type Vault struct {
	schema  string
	keyring *crypto.Keyring
	hasher  *Hasher
}

// NewVault returns the Vault of a service's schema.
func NewVault(schema string, keyring *crypto.Keyring, hasher *Hasher) *Vault {
	return &Vault{schema: schema, keyring: keyring, hasher: hasher}
}

func (v *Vault) ad(table, rowID string) []byte {
	return []byte(v.schema + "." + table + ":" + rowID)
}

// Seal seals an E.164 number for the row rowID of table.
func (v *Vault) Seal(e164, table, rowID string) []byte {
	return v.keyring.Seal([]byte(e164), v.ad(table, rowID))
}

// Open opens a number sealed for the row rowID of table.
func (v *Vault) Open(sealed []byte, table, rowID string) (string, error) {
	b, err := v.keyring.Open(sealed, v.ad(table, rowID))
	if err != nil {
		return "", fmt.Errorf("open number of %s.%s %s: %w", v.schema, table, rowID, err)
	}
	return string(b), nil
}

// Hash is the keyed hash of an E.164 number.
func (v *Vault) Hash(e164 string) []byte { return v.hasher.Sum(e164) }
