package main

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestVerifyStandard holds benchmark E's receiver to the Standard Webhooks spec's own example,
// so a bad signature from connect cannot pass as a delivered event.
func TestVerifyStandard(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		id   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts   = "1614265330"
		body = `{"test": 2432232314}`
		sig  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	at := time.Unix(1614265330, 0).Add(time.Minute)
	tests := []struct {
		name, id, ts, sig, body string
		now                     time.Time
		ok                      bool
	}{
		{"the spec's example", id, ts, sig, body, at, true},
		{"among other signatures", id, ts, "v1,AAAA v2,xyz " + sig, body, at, true},
		{"tampered body", id, ts, sig, `{"test": 2432232315}`, at, false},
		{"another id", id + "x", ts, sig, body, at, false},
		{"stale", id, ts, sig, body, at.Add(10 * time.Minute), false},
		{"no signature", id, ts, "", body, at, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifyStandard(key, tt.id, tt.ts, tt.sig, []byte(tt.body), tt.now)
			if (err == nil) != tt.ok {
				t.Fatalf("verifyStandard = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for name, want := range map[string]string{
		"C verify many (200 clients)": "c-verify-many-200-clients",
		"A REST GET /v1/api/clients":  "a-rest-get-v1-api-clients",
	} {
		if got := slug(name); got != want {
			t.Errorf("slug(%q) = %q, want %q", name, got, want)
		}
	}
}
