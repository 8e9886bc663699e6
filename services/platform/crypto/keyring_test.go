package crypto_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

// key returns 32 bytes filled with b.
func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func std(b byte) string { return base64.StdEncoding.EncodeToString(key(b)) }

func mustKeyring(t *testing.T, spec string) *crypto.Keyring {
	t.Helper()
	k, err := crypto.ParseKeyring(spec)
	if err != nil {
		t.Fatalf("ParseKeyring(%q): %v", spec, err)
	}
	return k
}

func TestParseKeyring(t *testing.T) {
	// 0xff bytes encode to '/' in standard base64 and '_' in URL base64, so the URL cases
	// really exercise the URL alphabet.
	stdPadded := base64.StdEncoding.EncodeToString(key(0xff))
	stdRaw := base64.RawStdEncoding.EncodeToString(key(0xff))
	urlPadded := base64.URLEncoding.EncodeToString(key(0xff))
	urlRaw := base64.RawURLEncoding.EncodeToString(key(0xfb))
	if !strings.ContainsAny(urlPadded, "-_") || !strings.ContainsAny(stdPadded, "+/") {
		t.Fatal("test keys do not exercise both alphabets")
	}

	tests := []struct {
		name        string
		spec        string
		wantErr     bool
		wantCurrent string
	}{
		{"one key, standard base64", "k1:" + stdPadded, false, "k1"},
		{"one key, standard base64 without padding", "k1:" + stdRaw, false, "k1"},
		{"one key, URL base64", "k1:" + urlPadded, false, "k1"},
		{"one key, URL base64 without padding", "k1:" + urlRaw, false, "k1"},
		{"two keys, first is current", "new:" + std(1) + ",old:" + std(2), false, "new"},
		{"two keys, other order", "old:" + std(2) + ",new:" + std(1), false, "old"},
		{"spaces around parts", " a:" + std(1) + " , b:" + std(2) + " ", false, "a"},
		{"32-character id", strings.Repeat("i", 32) + ":" + std(1), false, strings.Repeat("i", 32)},
		{"generated spec", crypto.NewKeySpec("dev"), false, "dev"},

		{"empty", "", true, ""},
		{"only spaces", "   ", true, ""},
		{"no colon", "k1" + std(1), true, ""},
		{"empty id", ":" + std(1), true, ""},
		{"33-character id", strings.Repeat("i", 33) + ":" + std(1), true, ""},
		{"empty key", "k1:", true, ""},
		{"not base64", "k1:not-base64-at-all!!", true, ""},
		{"31-byte key", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 31)), true, ""},
		{"33-byte key", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 33)), true, ""},
		{"16-byte key (AES-128 is not accepted)", "k1:" + base64.StdEncoding.EncodeToString(make([]byte, 16)), true, ""},
		{"hex instead of base64", "k1:" + strings.Repeat("ab", 32), true, ""},
		{"duplicate id", "k1:" + std(1) + ",k1:" + std(2), true, ""},
		{"trailing comma", "k1:" + std(1) + ",", true, ""},
		{"leading comma", ",k1:" + std(1), true, ""},
		{"second key bad", "k1:" + std(1) + ",k2:short", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := crypto.ParseKeyring(tt.spec)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseKeyring(%q) succeeded, want an error", tt.spec)
				}
				if k != nil {
					t.Errorf("ParseKeyring(%q) returned a keyring with its error", tt.spec)
				}
				// An error must never quote key material.
				for _, part := range strings.Split(tt.spec, ",") {
					if _, b64, ok := strings.Cut(part, ":"); ok && len(b64) >= 16 && strings.Contains(err.Error(), strings.TrimSpace(b64)) {
						t.Errorf("error %q quotes the key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeyring(%q): %v", tt.spec, err)
			}
			if got := k.CurrentKeyID(); got != tt.wantCurrent {
				t.Errorf("CurrentKeyID = %q, want %q", got, tt.wantCurrent)
			}
			// A parsed keyring must work.
			ct := k.Seal([]byte("x"), nil)
			if pt, err := k.Open(ct, nil); err != nil || string(pt) != "x" {
				t.Errorf("round trip = %q, %v", pt, err)
			}
		})
	}
}

// TestParseKeyringEncodingsAgree checks that the four base64 spellings of one key are the same
// key: data sealed under one spelling opens under another.
func TestParseKeyringEncodingsAgree(t *testing.T) {
	raw := key(0xfb)
	specs := []string{
		"k:" + base64.StdEncoding.EncodeToString(raw),
		"k:" + base64.RawStdEncoding.EncodeToString(raw),
		"k:" + base64.URLEncoding.EncodeToString(raw),
		"k:" + base64.RawURLEncoding.EncodeToString(raw),
	}
	ct := mustKeyring(t, specs[0]).Seal([]byte("payload"), []byte("ad"))
	for _, spec := range specs {
		pt, err := mustKeyring(t, spec).Open(ct, []byte("ad"))
		if err != nil || string(pt) != "payload" {
			t.Errorf("keyring %q: Open = %q, %v", spec, pt, err)
		}
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := mustKeyring(t, "k1:"+std(7))
	tests := []struct {
		name      string
		plaintext []byte
		ad        []byte
	}{
		{"text with ad", []byte("+33612345678"), []byte("client-1")},
		{"empty plaintext", []byte{}, []byte("client-1")},
		{"nil plaintext and ad", nil, nil},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe}, []byte{0}},
		{"large", bytes.Repeat([]byte("0123456789"), 10_000), []byte("ad")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := k.Seal(tt.plaintext, tt.ad)
			if len(tt.plaintext) >= 4 && bytes.Contains(ct, tt.plaintext) {
				t.Error("ciphertext contains the plaintext")
			}
			pt, err := k.Open(ct, tt.ad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(pt, tt.plaintext) {
				t.Errorf("Open = %q, want %q", pt, tt.plaintext)
			}
			if ct2 := k.Seal(tt.plaintext, tt.ad); bytes.Equal(ct, ct2) {
				t.Error("two Seals of the same plaintext are equal: the nonce is not fresh")
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	k := mustKeyring(t, "a:"+std(1))
	ad := []byte("client-1")
	ct := k.Seal([]byte("secret answer"), ad)

	other := mustKeyring(t, "z:"+std(1))          // same key material, other id
	sameIDOtherKey := mustKeyring(t, "a:"+std(2)) // same id, other key material

	tests := []struct {
		name string
		k    *crypto.Keyring
		ct   []byte
		ad   []byte
	}{
		{"wrong associated data", k, ct, []byte("client-2")},
		{"missing associated data", k, ct, nil},
		{"associated data with extra byte", k, ct, append(bytes.Clone(ad), 0)},
		{"nil ciphertext", k, nil, ad},
		{"empty ciphertext", k, []byte{}, ad},
		{"unknown key id", other, ct, ad},
		{"same id, other key", sameIDOtherKey, ct, ad},
		{"sealed by a keyring with only an unknown id", k, other.Seal([]byte("secret answer"), ad), ad},
		{"appended byte", k, append(bytes.Clone(ct), 0), ad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, err := tt.k.Open(tt.ct, tt.ad)
			if !errors.Is(err, crypto.ErrOpen) {
				t.Fatalf("Open error = %v, want ErrOpen", err)
			}
			if pt != nil {
				t.Errorf("Open returned plaintext %q with its error", pt)
			}
		})
	}

	t.Run("flipped byte anywhere", func(t *testing.T) {
		for i := range ct {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(ct)
				bad[i] ^= mask
				if pt, err := k.Open(bad, ad); !errors.Is(err, crypto.ErrOpen) {
					t.Fatalf("byte %d ^ %#x: Open = %q, %v, want ErrOpen", i, mask, pt, err)
				}
			}
		}
	})
	t.Run("truncated anywhere", func(t *testing.T) {
		for n := range len(ct) {
			if pt, err := k.Open(ct[:n], ad); !errors.Is(err, crypto.ErrOpen) {
				t.Fatalf("first %d of %d bytes: Open = %q, %v, want ErrOpen", n, len(ct), pt, err)
			}
		}
	})
	t.Run("untouched still opens", func(t *testing.T) {
		// The cases above must fail for what they change, not because ct was bad to begin with.
		if pt, err := k.Open(ct, ad); err != nil || string(pt) != "secret answer" {
			t.Fatalf("Open = %q, %v", pt, err)
		}
	})
}

func TestKeyringRotation(t *testing.T) {
	keyA, keyB := std(0xa), std(0xb)
	before := mustKeyring(t, "a:"+keyA+",b:"+keyB)
	after := mustKeyring(t, "b:"+keyB+",a:"+keyA)
	onlyB := mustKeyring(t, "b:"+keyB)
	onlyA := mustKeyring(t, "a:"+keyA)

	ad := []byte("row-1")
	sealedA := before.Seal([]byte("old data"), ad)
	sealedB := after.Seal([]byte("new data"), ad)

	if before.CurrentKeyID() != "a" || after.CurrentKeyID() != "b" {
		t.Fatalf("current keys = %q, %q; want a, b", before.CurrentKeyID(), after.CurrentKeyID())
	}

	tests := []struct {
		name    string
		k       *crypto.Keyring
		ct      []byte
		want    string
		wantErr bool
	}{
		{"sealed with a opens with a,b", before, sealedA, "old data", false},
		{"sealed with a opens after rotation to b,a", after, sealedA, "old data", false},
		{"sealed with b opens with b,a", after, sealedB, "new data", false},
		{"sealed with b opens with a,b", before, sealedB, "new data", false},
		{"sealed with a opens with a only", onlyA, sealedA, "old data", false},
		{"sealed with b does not open with a only", onlyA, sealedB, "", true},
		{"sealed with a does not open once a is retired", onlyB, sealedA, "", true},
		{"sealed with b opens once a is retired", onlyB, sealedB, "new data", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, err := tt.k.Open(tt.ct, ad)
			if tt.wantErr {
				if !errors.Is(err, crypto.ErrOpen) {
					t.Fatalf("Open = %q, %v; want ErrOpen", pt, err)
				}
				return
			}
			if err != nil || string(pt) != tt.want {
				t.Fatalf("Open = %q, %v; want %q", pt, err, tt.want)
			}
		})
	}

	// The rotated keyring seals with b: only a keyring holding b opens its output.
	if _, err := onlyA.Open(after.Seal([]byte("x"), ad), ad); !errors.Is(err, crypto.ErrOpen) {
		t.Errorf("data sealed after rotation opened without key b: %v", err)
	}
	if _, err := onlyB.Open(after.Seal([]byte("x"), ad), ad); err != nil {
		t.Errorf("data sealed after rotation did not open with key b: %v", err)
	}
}

func TestDerive(t *testing.T) {
	spec := crypto.NewKeySpec("k2") + "," + crypto.NewKeySpec("k1")
	k, err := crypto.ParseKeyring(spec)
	if err != nil {
		t.Fatal(err)
	}
	a, b := k.Derive("purpose-a"), k.Derive("purpose-b")
	if a.Current != "k2" || len(a.Keys) != 2 || len(a.Keys["k1"]) != 32 {
		t.Fatalf("derived keys %q, %d keys", a.Current, len(a.Keys))
	}
	if string(a.Keys["k2"]) == string(b.Keys["k2"]) || string(a.Keys["k1"]) == string(a.Keys["k2"]) {
		t.Fatal("two purposes or two data keys derived the same key")
	}
	if again := k.Derive("purpose-a"); string(again.Keys["k2"]) != string(a.Keys["k2"]) {
		t.Fatal("derivation is not deterministic")
	}
	// A derived key is not the data key: sealing with the raw key and the derived key differ.
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.Split(spec, ",")[0], "k2:"))
	if len(raw) != 32 || bytes.Equal(a.Keys["k2"], raw) {
		t.Fatal("the derived key is the sealing key")
	}
	// The same data key in another keyring derives the same key (a rotation keeps old hashes).
	other, err := crypto.ParseKeyring(strings.Split(spec, ",")[1])
	if err != nil {
		t.Fatal(err)
	}
	if string(other.Derive("purpose-a").Keys["k1"]) != string(a.Keys["k1"]) {
		t.Fatal("the same data key derived another key")
	}
}
