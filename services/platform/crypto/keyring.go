package crypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Keyring encrypts data at rest with AES-256-GCM under versioned keys. It seals with the
// current key and opens with any key it holds, so keys can be rotated without rewriting data
// first. The key id travels inside each ciphertext.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	// raw keys, only for Derive: nothing else uses a data key but its AEAD.
	raw map[string][]byte
}

// ErrOpen is returned for a ciphertext that does not open: unknown key, tampered data or wrong
// associated data. It says nothing more, on purpose.
var ErrOpen = errors.New("ciphertext does not open")

const sealFormat = 1

// ParseKeyring reads keys as "id:base64key[,id:base64key...]" (standard or URL base64, 32-byte
// keys). The first key is the current one.
func ParseKeyring(spec string) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}, raw: map[string][]byte{}}
	for i, part := range strings.Split(spec, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || id == "" || len(id) > 32 {
			return nil, fmt.Errorf("key %d: want id:base64key", i+1)
		}
		raw, err := decodeKey(b64)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("key %q: want 32 bytes of base64", id)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("key %q: listed twice", id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
		k.aeads[id] = aead
		k.raw[id] = raw
		if i == 0 {
			k.current = id
		}
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// NewKeySpec returns a keyring specification with one fresh random key: a new MNV_DATA_KEYS,
// or the entry to put first in one when rotating.
func NewKeySpec(id string) string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return id + ":" + base64.StdEncoding.EncodeToString(key)
}

// NewSecret returns 32 random bytes in URL-safe base64 (43 characters): a pepper, hash key or
// token for the configuration.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// CurrentKeyID is the id of the key that seals.
func (k *Keyring) CurrentKeyID() string { return k.current }

// Seal encrypts plaintext bound to ad (associated data: what the ciphertext belongs to, e.g.
// a client id), so a ciphertext moved to another row does not open.
//
// Layout: format(1) | len(keyID)(1) | keyID | nonce(12) | ciphertext+tag.
func (k *Keyring) Seal(plaintext, ad []byte) []byte {
	aead := k.aeads[k.current]
	out := make([]byte, 0, 2+len(k.current)+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out = append(out, sealFormat, byte(len(k.current)))
	out = append(out, k.current...)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, ad)
}

// Open decrypts a ciphertext made by Seal with the same ad.
func (k *Keyring) Open(ciphertext, ad []byte) ([]byte, error) {
	if len(ciphertext) < 2 || ciphertext[0] != sealFormat {
		return nil, ErrOpen
	}
	idLen := int(ciphertext[1])
	if len(ciphertext) < 2+idLen {
		return nil, ErrOpen
	}
	aead, ok := k.aeads[string(ciphertext[2:2+idLen])]
	if !ok {
		return nil, ErrOpen
	}
	rest := ciphertext[2+idLen:]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrOpen
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// DerivedKeys are keys derived from a keyring's data keys for one purpose, by the id of the key
// each comes from; Current is the id of the one to key new values with. The others check what
// was keyed before a rotation.
type DerivedKeys struct {
	Current string
	Keys    map[string][]byte
}

// Derive returns a 32-byte key for purpose from each data key (HKDF-SHA-256, the purpose as its
// info), so a MAC or a second cipher is keyed from the service's data keys without ever using a
// sealing key itself for anything but sealing: a derived key that leaks opens nothing, and each
// purpose's keys are independent of every other's.
func (k *Keyring) Derive(purpose string) DerivedKeys {
	d := DerivedKeys{Current: k.current, Keys: make(map[string][]byte, len(k.raw))}
	for id, raw := range k.raw {
		key, err := hkdf.Key(sha256.New, raw, nil, "mnv.keyring.derive.v1|"+purpose, 32)
		if err != nil { // only for a length HKDF cannot give; 32 it always can
			panic(err)
		}
		d.Keys[id] = key
	}
	return d
}
