package headerauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/headerauth"
)

// Well-formed but obviously fake credentials, built so that no key-shaped literal sits in the
// source for secret scanners to flag.
var (
	key   = "mnv_" + strings.Repeat("T", 40)
	token = "mnvsdk_" + strings.Repeat("T", 40)
)

const clientID = "8a1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

func TestClassify(t *testing.T) {
	tests := []struct {
		pattern string
		want    headerauth.Kind
	}{
		{"/v1/api/clients", headerauth.KeyAndClient},
		{"/v1/api/clients/rotate-key", headerauth.KeyAndClient},
		{"/v1/api/clients/{client_id=*}/rotate-key", headerauth.KeyOnly},
		{"/v1/api/me/api-keys", headerauth.KeyOnly},
		{"/v1/api/me/api-key/rotate", headerauth.KeyOnly},
		{"/v1/api/me/api-key/generate", headerauth.Bootstrap},
		{"/v1/api/sdk/session", headerauth.SDKSession},
		{"/v1/api/verify", headerauth.KeyAndClient},
		{"/v1/api/web/transactions/{transaction_id=*}/capture", headerauth.Public},
	}
	for _, tt := range tests {
		if got := headerauth.Classify(tt.pattern); got != tt.want {
			t.Errorf("Classify(%q) = %d, want %d", tt.pattern, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	type hdr = map[string][]string
	tests := []struct {
		name string
		kind headerauth.Kind
		h    hdr
		ok   bool
		// gone lists headers the check must remove before the request goes on.
		gone []string
	}{
		{"key and client", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, true, nil},
		{"upper-case client id", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {strings.ToUpper(clientID)}}, true, nil},
		{"no client id", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}}, false, nil},
		{"no key", headerauth.KeyAndClient, hdr{"X-Client-Id": {clientID}}, false, nil},
		{"nothing", headerauth.KeyAndClient, hdr{}, false, nil},
		{"quoted key", headerauth.KeyAndClient, hdr{"X-Api-Key": {`"` + key + `"`}, "X-Client-Id": {clientID}}, false, nil},
		{"key with a space inside", headerauth.KeyAndClient, hdr{"X-Api-Key": {key[:10] + " " + key[10:]}, "X-Client-Id": {clientID}}, false, nil},
		{"key with a line break", headerauth.KeyAndClient, hdr{"X-Api-Key": {key + "\n"}, "X-Client-Id": {clientID}}, false, nil},
		{"quoted client id", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {`"` + clientID + `"`}}, false, nil},
		{"client id without dashes", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {strings.ReplaceAll(clientID, "-", "")}}, false, nil},
		{"two keys", headerauth.KeyAndClient, hdr{"X-Api-Key": {key, key}, "X-Client-Id": {clientID}}, false, nil},
		{"empty key", headerauth.KeyAndClient, hdr{"X-Api-Key": {""}, "X-Client-Id": {clientID}}, false, nil},
		{"SDK token instead of key", headerauth.KeyAndClient, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}}, false, nil},
		{"SDK token beside key is dropped", headerauth.KeyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}, "X-Sdk-Token": {token}}, true, []string{"X-Sdk-Token"}},
		{"me: key alone", headerauth.KeyOnly, hdr{"X-Api-Key": {key}}, true, nil},
		{"me: malformed client id", headerauth.KeyOnly, hdr{"X-Api-Key": {key}, "X-Client-Id": {"acme"}}, false, nil},
		{"me: empty client id", headerauth.KeyOnly, hdr{"X-Api-Key": {key}, "X-Client-Id": {""}}, false, nil},
		{"bootstrap", headerauth.Bootstrap, hdr{"X-Client-Id": {clientID}}, true, nil},
		{"bootstrap ignores a key", headerauth.Bootstrap, hdr{"X-Client-Id": {clientID}, "X-Api-Key": {key}}, true, []string{"X-Api-Key"}},
		{"bootstrap without client id", headerauth.Bootstrap, hdr{"X-Api-Key": {key}}, false, nil},
		{"session", headerauth.SDKSession, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}}, true, nil},
		{"session with a key only", headerauth.SDKSession, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, false, nil},
		{"session drops a key", headerauth.SDKSession, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}, "X-Api-Key": {key}}, true, []string{"X-Api-Key"}},
		{"session without client id", headerauth.SDKSession, hdr{"X-Sdk-Token": {token}}, false, nil},
		{"session with a key-shaped token", headerauth.SDKSession, hdr{"X-Sdk-Token": {key}, "X-Client-Id": {clientID}}, false, nil},
		{"public drops credentials", headerauth.Public, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, true, []string{"X-Api-Key", "X-Client-Id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tt.h {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			if got := headerauth.Check(tt.kind, h); got != tt.ok {
				t.Fatalf("Check = %v, want %v", got, tt.ok)
			}
			for _, g := range tt.gone {
				if h.Get(g) != "" {
					t.Errorf("%s was not removed", g)
				}
			}
		})
	}
}

// FuzzCheck feeds arbitrary header values: Check must never panic, and must never accept a
// value that is not exactly a credential (no quotes, spaces or control characters).
func FuzzCheck(f *testing.F) {
	f.Add(key, clientID, token)
	f.Add(`"`+key+`"`, clientID, "")
	f.Add(key+" ", " "+clientID, token+"\r\n")
	f.Add("mnv_", "{"+clientID+"}", "mnvsdk_")
	f.Fuzz(func(t *testing.T, apiKey, client, sdk string) {
		for _, kind := range []headerauth.Kind{headerauth.KeyAndClient, headerauth.KeyOnly, headerauth.Bootstrap, headerauth.SDKSession} {
			h := http.Header{"X-Api-Key": {apiKey}, "X-Client-Id": {client}, "X-Sdk-Token": {sdk}}
			if !headerauth.Check(kind, h) {
				continue
			}
			for _, v := range []string{h.Get("X-Api-Key"), h.Get("X-Client-Id"), h.Get("X-Sdk-Token")} {
				if strings.ContainsAny(v, "\"' \t\r\n\x00") {
					t.Fatalf("kind %d accepted %q", kind, v)
				}
			}
		}
	})
}
