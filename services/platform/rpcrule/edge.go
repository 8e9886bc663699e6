package rpcrule

import (
	"strings"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// kinds are the credential kinds the rules name: the one table between options' Credential and
// principal.Kind.
var kinds = map[optionsv1.Credential]principal.Kind{
	optionsv1.Credential_CREDENTIAL_NONE:      principal.None,
	optionsv1.Credential_CREDENTIAL_API_KEY:   principal.APIKey,
	optionsv1.Credential_CREDENTIAL_SDK_TOKEN: principal.SDKToken,
	optionsv1.Credential_CREDENTIAL_INTERNAL:  principal.Internal,
	optionsv1.Credential_CREDENTIAL_ADMIN:     principal.Admin,
	optionsv1.Credential_CREDENTIAL_SESSION:   principal.Session,
}

// KindOf is the kind of credential c names; 0 for UNSPECIFIED or a value this version does not
// know, which no method may have.
func KindOf(c optionsv1.Credential) principal.Kind { return kinds[c] }

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
	// Credential is the client credential the route needs (principal.APIKey or
	// principal.SDKToken), or principal.None: the route takes no client credential (the
	// bootstrap proves the client with its secret; the browser capture is bound to the client's
	// web origins), and the services' own credentials are no client's to send.
	Credential principal.Kind
	ClientID   ClientID
	// Session: a person's console session (its cookie) is taken too, or, with Credential
	// principal.Session, only it. The session names its client, so X-CLIENT-ID is dropped with it.
	Session bool
}

// MePrefix is the part of the API where the API key alone names the client (docs/api-decisions.md#credentials).
const MePrefix = "/v1/api/me/"

// EdgeOf derives the header rule of the route at path (a path template or grpc-gateway's
// pattern: only its /v1/api/me/ prefix matters) from the rule of the RPC it calls.
func EdgeOf(r *optionsv1.Rule, path string) Edge {
	switch k := KindOf(r.GetCredential()); {
	case k == principal.Session:
		return Edge{Credential: principal.Session, ClientID: ClientIDDropped, Session: true}
	case k.Client():
		e := Edge{Credential: k, ClientID: ClientIDRequired, Session: r.GetSession()}
		if k.WithClientID() { // the credential names no client: X-CLIENT-ID always comes with it
			return e
		}
		switch r.GetClientId() {
		case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL:
			e.ClientID = ClientIDOptional
		case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL_UNDER_ME:
			if strings.HasPrefix(path, MePrefix) {
				e.ClientID = ClientIDOptional
			}
		}
		return e
	case k == principal.None:
		if r.GetClientId() == optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED {
			return Edge{Credential: principal.None, ClientID: ClientIDRequired}
		}
	}
	// Internal and admin credentials are the services' own: a client presents none of them.
	return Edge{Credential: principal.None, ClientID: ClientIDDropped}
}

// Public reports whether the route takes no credential header at all.
func (e Edge) Public() bool {
	return e.Credential == principal.None && e.ClientID == ClientIDDropped && !e.Session
}
