package outbound

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStandardSignatureVector checks SignStandard against the example of the Standard Webhooks
// specification (its secret, id, timestamp, body and signature), so our scheme is theirs and
// not only consistent with itself. tests/webhooks checks real deliveries with the reference
// npm library as well.
func TestStandardSignatureVector(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := SignStandard([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %q, want the specification's %q", got, want)
	}
}

func TestStandardSignature(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	oldKey, err := ParseSecret(NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	newKey, _ := ParseSecret(NewSecret())
	otherKey, _ := ParseSecret(NewSecret())
	body := []byte(`{"id":"evt_1","type":"ping"}`)
	header := SignStandard([][]byte{oldKey, newKey}, "evt_1", now, body)
	ts := "1800000000"
	tests := []struct {
		name      string
		key       []byte
		id, ts    string
		body      []byte
		now       time.Time
		wantError error
	}{
		{"old key during rotation", oldKey, "evt_1", ts, body, now, nil},
		{"new key during rotation", newKey, "evt_1", ts, body, now, nil},
		{"another key", otherKey, "evt_1", ts, body, now, ErrSignatureMismatch},
		{"replayed under a fresh id", newKey, "evt_2", ts, body, now, ErrSignatureMismatch},
		{"changed timestamp", newKey, "evt_1", "1800000001", body, now, ErrSignatureMismatch},
		{"changed body", newKey, "evt_1", ts, []byte(`{"id":"evt_1","type":"pong"}`), now, ErrSignatureMismatch},
		{"stale", newKey, "evt_1", ts, body, now.Add(6 * time.Minute), ErrSignatureExpired},
		{"bad timestamp", newKey, "evt_1", "soon", body, now, ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyStandard(tt.key, tt.id, tt.ts, header, tt.body, tt.now, 0)
			if !errors.Is(err, tt.wantError) {
				t.Fatalf("VerifyStandard = %v, want %v", err, tt.wantError)
			}
		})
	}
	if n := len(strings.Fields(header)); n != 2 {
		t.Fatalf("%d signatures in %q, want one per key", n, header)
	}
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "whsec_!!!", "mnvwhsec_abc", SecretPrefix + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := ParseSecret(s); !errors.Is(err, ErrSecretMalformed) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecretMalformed", s, err)
		}
	}
}
