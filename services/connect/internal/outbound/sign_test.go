package outbound

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignKnownVector(t *testing.T) {
	// Computed independently:
	//   printf '1700000000.[{"id":"p_1"}]' | openssl dgst -sha256 -hmac whsec_test
	got := Sign([]byte("whsec_test"), []byte(`[{"id":"p_1"}]`), time.Unix(1700000000, 999_000_000))
	want := "t=1700000000,v1=79a0c05e447ceac0adca8a5b2a63ec0231cf3e10d20ea47fc96f004c6c3900b7"
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerify(t *testing.T) {
	secret := []byte("whsec_0123456789abcdef")
	body := []byte(`[{"externalId":"42","mobile":"+447700900123"}]`)
	signedAt := time.Unix(1_750_000_000, 0)
	header := Sign(secret, body, signedAt)
	_, v1, _ := strings.Cut(header, ",v1=")
	otherSig := Sign([]byte("another"), body, signedAt)
	_, otherV1, _ := strings.Cut(otherSig, ",v1=")

	tests := []struct {
		name      string
		secret    []byte
		body      []byte
		header    string
		now       time.Time
		tolerance time.Duration
		want      error // nil: valid
	}{
		{"valid", secret, body, header, signedAt, time.Minute, nil},
		{"valid within tolerance", secret, body, header, signedAt.Add(4 * time.Minute), 5 * time.Minute, nil},
		{"valid slightly in the future", secret, body, header, signedAt.Add(-30 * time.Second), time.Minute, nil},
		{"spaces after comma", secret, body, "t=1750000000, v1=" + v1, signedAt, time.Minute, nil},
		{"rotation: second v1 matches", secret, body, "t=1750000000,v1=" + otherV1 + ",v1=" + v1, signedAt, time.Minute, nil},
		{"unknown keys ignored", secret, body, header + ",v0=abc", signedAt, time.Minute, nil},
		{"zero tolerance means default", secret, body, header, signedAt.Add(DefaultTolerance - time.Second), 0, nil},

		{"wrong secret", []byte("whsec_wrong"), body, header, signedAt, time.Minute, ErrSignatureMismatch},
		{"tampered body", secret, []byte(`[{"externalId":"43","mobile":"+447700900123"}]`), header, signedAt, time.Minute, ErrSignatureMismatch},
		{"empty body", secret, nil, header, signedAt, time.Minute, ErrSignatureMismatch},
		{"tampered timestamp", secret, body, "t=1750000001,v1=" + v1, signedAt, time.Minute, ErrSignatureMismatch},
		{"stale", secret, body, header, signedAt.Add(6 * time.Minute), 5 * time.Minute, ErrSignatureExpired},
		{"stale beyond default", secret, body, header, signedAt.Add(DefaultTolerance + time.Second), 0, ErrSignatureExpired},
		{"too far in the future", secret, body, header, signedAt.Add(-2 * time.Minute), time.Minute, ErrSignatureExpired},

		{"empty header", secret, body, "", signedAt, time.Minute, ErrSignatureMalformed},
		{"no v1", secret, body, "t=1750000000", signedAt, time.Minute, ErrSignatureMalformed},
		{"no t", secret, body, "v1=" + v1, signedAt, time.Minute, ErrSignatureMalformed},
		{"two t", secret, body, "t=1,t=1750000000,v1=" + v1, signedAt, time.Minute, ErrSignatureMalformed},
		{"non-hex v1", secret, body, "t=1750000000,v1=zz", signedAt, time.Minute, ErrSignatureMalformed},
		{"short v1", secret, body, "t=1750000000,v1=abcd", signedAt, time.Minute, ErrSignatureMalformed},
		{"bad t", secret, body, "t=soon,v1=" + v1, signedAt, time.Minute, ErrSignatureMalformed},
		{"negative t", secret, body, "t=-5,v1=" + v1, signedAt, time.Minute, ErrSignatureMalformed},
		{"part without =", secret, body, header + ",junk", signedAt, time.Minute, ErrSignatureMalformed},
		{"oversized", secret, body, header + "," + strings.Repeat("x=y,", 2000), signedAt, time.Minute, ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.body, tt.header, tt.now, tt.tolerance)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}

	if err := Verify(nil, body, header, signedAt, time.Minute); err == nil {
		t.Fatal("Verify accepted an empty secret")
	}
}
