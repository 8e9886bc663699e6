package crypto_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

func TestNewFingerprinterPepperLength(t *testing.T) {
	tests := []struct {
		name    string
		pepper  string
		wantErr bool
	}{
		{"empty", "", true},
		{"31 bytes", strings.Repeat("p", 31), true},
		{"32 bytes", strings.Repeat("p", 32), false},
		{"64 bytes", strings.Repeat("p", 64), false},
		// Bytes count, not runes: 16 two-byte runes are 32 bytes.
		{"32 bytes of multi-byte runes", strings.Repeat("é", 16), false},
		{"31 bytes with multi-byte runes", strings.Repeat("é", 15) + "p", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := crypto.NewFingerprinter(tt.pepper)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewFingerprinter(len %d) error = %v, wantErr %v", len(tt.pepper), err, tt.wantErr)
			}
			if !tt.wantErr && f == nil {
				t.Fatal("NewFingerprinter returned nil without an error")
			}
		})
	}
}

func TestFingerprinter(t *testing.T) {
	pepperA := strings.Repeat("a", 32)
	pepperB := strings.Repeat("b", 32)
	fa, err := crypto.NewFingerprinter(pepperA)
	if err != nil {
		t.Fatal(err)
	}
	fa2, err := crypto.NewFingerprinter(pepperA)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := crypto.NewFingerprinter(pepperB)
	if err != nil {
		t.Fatal(err)
	}

	secret := "mnv_" + strings.Repeat("T", 40) // key-shaped, fake
	sum := fa.Sum(secret)
	if len(sum) != 32 {
		t.Fatalf("Sum length = %d, want 32 (HMAC-SHA-256)", len(sum))
	}
	if bytes.Contains(sum, []byte(secret)) {
		t.Fatal("Sum contains the secret")
	}

	t.Run("deterministic", func(t *testing.T) {
		if !bytes.Equal(fa.Sum(secret), sum) {
			t.Error("two Sums of the same secret differ")
		}
		if !bytes.Equal(fa2.Sum(secret), sum) {
			t.Error("two Fingerprinters with the same pepper disagree")
		}
	})
	t.Run("differs by pepper", func(t *testing.T) {
		if bytes.Equal(fb.Sum(secret), sum) {
			t.Error("Fingerprinters with different peppers gave the same Sum")
		}
	})
	t.Run("differs by secret", func(t *testing.T) {
		if bytes.Equal(fa.Sum(secret+"x"), sum) {
			t.Error("different secrets gave the same Sum")
		}
	})

	tests := []struct {
		name   string
		f      *crypto.Fingerprinter
		secret string
		want   []byte
		match  bool
	}{
		{"same secret same pepper", fa, secret, sum, true},
		{"same secret other instance same pepper", fa2, secret, sum, true},
		{"same secret other pepper", fb, secret, sum, false},
		{"other secret", fa, secret[:len(secret)-1] + "X", sum, false},
		{"empty secret", fa, "", sum, false},
		{"truncated fingerprint", fa, secret, sum[:31], false},
		{"nil fingerprint", fa, secret, nil, false},
		{"flipped bit", fa, secret, flip(sum, 5), false},
	}
	for _, tt := range tests {
		t.Run("Matches/"+tt.name, func(t *testing.T) {
			if got := tt.f.Matches(tt.secret, tt.want); got != tt.match {
				t.Errorf("Matches = %v, want %v", got, tt.match)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}
