package auth

import (
	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

// Metadata keys of the credentials, as the gateway forwards them and internal callers send them.
const (
	MDAPIKey        = "x-api-key"
	MDClientID      = "x-client-id"
	MDSDKToken      = "x-sdk-token"
	MDAuthorization = "authorization"
)

// Metadata the gateway sets on the capture routes only, for the verification service: the
// client address it resolved (behind its trusted proxies), each configured number header as
// MDHeaderPrefix + the lower-case header name, and the browser's Origin header.
const (
	MDClientIP     = "x-mnv-client-ip"
	MDHeaderPrefix = "x-mnv-hdr-"
	// MDOrigin is the Origin header of a browser capture, as the page's browser sent it.
	MDOrigin = "x-mnv-origin"
)

// Credential prefixes. Distinct prefixes let a secret scanner spot each kind and let us tell a
// misplaced credential from a malformed one.
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
