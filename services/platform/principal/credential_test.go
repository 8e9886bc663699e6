package principal_test

import (
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func TestParseClientID(t *testing.T) {
	const canonical = "0f8fad5b-d9cb-469f-a165-70867728950e"
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{"canonical", canonical, canonical, true},
		{"upper case is canonicalised", strings.ToUpper(canonical), canonical, true},
		{"mixed case is canonicalised", "0F8fad5B-D9CB-469f-A165-70867728950E", canonical, true},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", true},

		{"empty", "", "", false},
		{"32 hex without dashes", strings.ReplaceAll(canonical, "-", ""), "", false},
		{"braces", "{" + canonical + "}", "", false},
		{"double quotes", `"` + canonical + `"`, "", false},
		{"single quotes", "'" + canonical + "'", "", false},
		{"leading space", " " + canonical, "", false},
		{"trailing space", canonical + " ", "", false},
		{"trailing newline", canonical + "\n", "", false},
		{"urn:uuid form", "urn:uuid:" + canonical, "", false},
		{"dashes misplaced", "0f8fad5bd-9cb-469f-a165-70867728950e", "", false},
		{"non-hex character", "0f8fad5b-d9cb-469f-a165-70867728950g", "", false},
		{"36 characters with space for dash", "0f8fad5b d9cb-469f-a165-70867728950e", "", false},
		{"too short", canonical[:35], "", false},
		{"too long", canonical + "0", "", false},
		{"non-ASCII", "0f8fad5b-d9cb-469f-a165-7086772895é", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := principal.ParseClientID(tt.in)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("ParseClientID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestWellFormedCredentials(t *testing.T) {
	apiKey := crypto.NewToken(principal.APIKeyPrefix)
	sdkToken := crypto.NewToken(principal.SDKTokenPrefix)
	secret := crypto.NewToken(principal.ClientSecretPrefix)
	tests := []struct {
		name                string
		s                   string
		api, sdk, clientSec bool
	}{
		{"api key", apiKey, true, false, false},
		{"sdk token", sdkToken, false, true, false},
		{"client secret", secret, false, false, true},
		{"empty", "", false, false, false},
		{"bare random", crypto.NewToken(""), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := principal.WellFormedAPIKey(tt.s); got != tt.api {
				t.Errorf("WellFormedAPIKey = %v, want %v", got, tt.api)
			}
			if got := principal.WellFormedSDKToken(tt.s); got != tt.sdk {
				t.Errorf("WellFormedSDKToken = %v, want %v", got, tt.sdk)
			}
			if got := principal.WellFormedClientSecret(tt.s); got != tt.clientSec {
				t.Errorf("WellFormedClientSecret = %v, want %v", got, tt.clientSec)
			}
		})
	}
}
