// Package credential holds what a client's credentials are, apart from how they travel: the
// shapes of API keys, SDK tokens, client secrets and client ids, and the one answer to every bad
// credential. The accounts rules that issue and check credentials use it without linking gRPC;
// the auth interceptor and the gateway use it to refuse what cannot be a credential early.
package credential

import (
	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Prefixes of the generated credentials.
const (
	APIKeyPrefix       = "mnv_"
	SDKTokenPrefix     = "mnvsdk_"
	ClientSecretPrefix = "mnvsec_"
)

// WellFormedAPIKey reports whether s has the shape of an API key.
func WellFormedAPIKey(s string) bool { return crypto.WellFormed(APIKeyPrefix, s) }

// WellFormedSDKToken reports whether s has the shape of an SDK token.
func WellFormedSDKToken(s string) bool { return crypto.WellFormed(SDKTokenPrefix, s) }

// WellFormedClientSecret reports whether s has the shape of a client secret.
func WellFormedClientSecret(s string) bool { return crypto.WellFormed(ClientSecretPrefix, s) }

// ParseClientID returns the canonical (lower-case) form of a client id, which must be a UUID
// in its 36-character form; ok is false for anything else, quotes and spaces included.
func ParseClientID(s string) (id string, ok bool) {
	if len(s) != 36 {
		return "", false
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// ErrUnauthenticated is the one answer to every bad credential: the caller learns nothing about
// which part was wrong, nor whether a key exists.
var ErrUnauthenticated = fault.New(fault.Unauthenticated, "missing or invalid credentials")
