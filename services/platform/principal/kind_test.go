package principal_test

import (
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestClientKinds: the client credentials have their header, metadata key and shape; the
// services' own have none, so no header can carry them.
func TestClientKinds(t *testing.T) {
	tests := []struct {
		kind           principal.Kind
		header, md     string
		wellFormed     string
		client         bool
		kindOfWellForm principal.Kind
	}{
		{principal.APIKey, "X-API-KEY", "x-api-key", crypto.NewToken(principal.APIKeyPrefix), true, principal.APIKey},
		{principal.SDKToken, "X-SDK-TOKEN", "x-sdk-token", crypto.NewToken(principal.SDKTokenPrefix), true, principal.SDKToken},
		{principal.None, "", "", crypto.NewToken(principal.ClientSecretPrefix), false, 0},
		{principal.Internal, "", "", crypto.NewToken(""), false, 0},
		{principal.Admin, "", "", crypto.NewToken(""), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			if tt.kind.Header() != tt.header || tt.kind.MD() != tt.md || tt.kind.Client() != tt.client {
				t.Errorf("header %q, md %q, client %v; want %q, %q, %v", tt.kind.Header(), tt.kind.MD(), tt.kind.Client(), tt.header, tt.md, tt.client)
			}
			if tt.kind.WithClientID() != (tt.kind == principal.SDKToken) {
				t.Errorf("WithClientID = %v: only an SDK token names no client by itself", tt.kind.WithClientID())
			}
			if tt.kind.WellFormed(tt.wellFormed) != tt.client {
				t.Errorf("WellFormed(%q) = %v, want %v", tt.wellFormed, !tt.client, tt.client)
			}
			if got := principal.KindOfValue(tt.wellFormed); got != tt.kindOfWellForm {
				t.Errorf("KindOfValue(%q) = %v, want %v", tt.wellFormed, got, tt.kindOfWellForm)
			}
		})
	}
}
