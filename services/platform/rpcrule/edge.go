package rpcrule

import (
	"strings"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
)

// EdgeCredential is the credential header an HTTP route needs (docs/api-decisions.md#credentials).
type EdgeCredential int

// Credential headers of a route.
const (
	// NoCredential: the route takes no client credential (the bootstrap proves the client with
	// its secret; the browser capture is bound to the client's web origins).
	NoCredential EdgeCredential = iota
	// APIKeyHeader: X-API-KEY.
	APIKeyHeader
	// SDKTokenHeader: X-SDK-TOKEN, accepted on its own routes only.
	SDKTokenHeader
)

// ClientID is what a route does with X-CLIENT-ID.
type ClientID int

// X-CLIENT-ID rules.
const (
	ClientIDRequired ClientID = iota
	// ClientIDOptional: may be left out; when sent it must be a client id (the service checks
	// that it matches the key).
	ClientIDOptional
	// ClientIDDropped: removed before the call, like every credential header of a route that
	// takes none.
	ClientIDDropped
)

// Edge is the header rule of an HTTP route: which credential header it needs and what it does
// with X-CLIENT-ID. Every other credential header is removed before the call, so an SDK token
// never stands in for an API key.
type Edge struct {
	Credential EdgeCredential
	ClientID   ClientID
}

// MePrefix is the part of the API where the API key alone names the client
// (docs/api-decisions.md#credentials).
const MePrefix = "/v1/api/me/"

// EdgeOf derives the header rule of the route at path (a path template or grpc-gateway's
// pattern: only its /v1/api/me/ prefix matters) from the rule of the RPC it calls.
func EdgeOf(r *optionsv1.Rule, path string) Edge {
	switch r.GetCredential() {
	case optionsv1.Credential_CREDENTIAL_API_KEY:
		e := Edge{Credential: APIKeyHeader, ClientID: ClientIDRequired}
		switch r.GetClientId() {
		case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL:
			e.ClientID = ClientIDOptional
		case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL_UNDER_ME:
			if strings.HasPrefix(path, MePrefix) {
				e.ClientID = ClientIDOptional
			}
		}
		return e
	case optionsv1.Credential_CREDENTIAL_SDK_TOKEN:
		return Edge{Credential: SDKTokenHeader, ClientID: ClientIDRequired}
	case optionsv1.Credential_CREDENTIAL_NONE:
		if r.GetClientId() == optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED {
			return Edge{Credential: NoCredential, ClientID: ClientIDRequired}
		}
	}
	// Internal and admin credentials are the services' own: a client presents none of them.
	return Edge{Credential: NoCredential, ClientID: ClientIDDropped}
}

// Public reports whether the route takes no credential header at all.
func (e Edge) Public() bool { return e.Credential == NoCredential && e.ClientID == ClientIDDropped }
