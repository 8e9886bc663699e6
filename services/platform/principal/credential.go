package principal

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Kind is the kind of credential a method requires of its caller: the one enum of it. The
// RPC's rule declares it (options' Credential, which rpcrule.KindOf reads); the service's
// guard and the gateway's header rules read this.
type Kind int

// Credential kinds. The zero Kind is no kind at all: a method without a rule.
const (
	// None: no credential (health checks; a method that proves the caller itself, like the
	// first-key bootstrap with the client secret).
	None Kind = iota + 1
	// APIKey: a client's API key in X-API-KEY; X-CLIENT-ID, when sent, must match it.
	APIKey
	// SDKToken: a client's SDK token in X-SDK-TOKEN, with X-CLIENT-ID.
	SDKToken
	// Internal: the calling mnv process's own token, of one of the callers the rule names.
	Internal
	// Admin: the operator credential (mnvctl).
	Admin
	// Session: a person's console session, the __Host-mnv-session cookie; the session names
	// its client (docs/api-decisions.md#console).
	Session
)

// kind is what mnv knows of a kind of credential. A client credential (one a client presents
// in a header, resolved by accounts to a principal) has its header and its shape; the services'
// own credentials travel as bearer tokens and have neither.
type kind struct {
	// name is the kind as the rules spell it (options' CREDENTIAL_ and the name).
	name string
	// header is the header that carries it, as the API's documentation writes it; gRPC
	// metadata carries it under the same name in lower case.
	header string
	// prefix starts every credential of the kind, followed by 32 to 128 letters and digits.
	prefix string
	// noun names the kind in messages, with its article.
	noun string
	// withClientID: a credential of the kind names no client by itself, so X-CLIENT-ID must
	// come with it.
	withClientID bool
	// cookie is the cookie that carries it, for a kind a browser holds instead of a header;
	// md is then its gRPC metadata key.
	cookie, md string
}

// kinds is the one table of credential kinds. Adding a kind is a row here, a value of options'
// Credential, and what resolves it (the Authenticator, accounts' issuing of it).
var kinds = map[Kind]kind{
	None:     {name: "NONE"},
	APIKey:   {name: "API_KEY", header: "X-API-KEY", prefix: APIKeyPrefix, noun: "an API key"},
	SDKToken: {name: "SDK_TOKEN", header: "X-SDK-TOKEN", prefix: SDKTokenPrefix, noun: "an SDK token", withClientID: true},
	Internal: {name: "INTERNAL"},
	Admin:    {name: "ADMIN"},
	Session:  {name: "SESSION", cookie: SessionCookie, md: "x-mnv-session", prefix: SessionPrefix, noun: "a console session"},
}

// String is k as the rules spell it, without options' CREDENTIAL_ prefix.
func (k Kind) String() string {
	if n := kinds[k].name; n != "" {
		return n
	}
	return "UNSPECIFIED"
}

// Client reports whether k is a client's credential, which names a client and resolves to its
// principal.
func (k Kind) Client() bool { return kinds[k].header != "" || kinds[k].cookie != "" }

// Header is the header a client sends a credential of kind k in ("X-API-KEY"); "" for a kind
// that is no client's, or that travels in a cookie.
func (k Kind) Header() string { return kinds[k].header }

// MD is the gRPC metadata key of a credential of kind k: its header in lower case, as the
// gateway forwards it.
func (k Kind) MD() string {
	if md := kinds[k].md; md != "" {
		return md
	}
	return strings.ToLower(kinds[k].header)
}

// Cookie is the cookie a browser sends a credential of kind k in; "" for a kind sent in a
// header.
func (k Kind) Cookie() string { return kinds[k].cookie }

// WellFormed reports whether s has the shape of a credential of kind k.
func (k Kind) WellFormed(s string) bool {
	p := kinds[k].prefix
	return p != "" && crypto.WellFormed(p, s)
}

// Prefix starts every credential of kind k.
func (k Kind) Prefix() string { return kinds[k].prefix }

// WithClientID reports whether a credential of kind k must come with X-CLIENT-ID: an API key
// names its client itself (the client id is then optional where a rule says so), an SDK token
// does not.
func (k Kind) WithClientID() bool { return kinds[k].withClientID }

// Noun names kind k in a message, with its article ("an API key").
func (k Kind) Noun() string { return kinds[k].noun }

// ClientKinds are the kinds of client credential, in order.
func ClientKinds() []Kind {
	var out []Kind
	for k := None; k <= Session; k++ {
		if k.Client() {
			out = append(out, k)
		}
	}
	return out
}

// Authenticator resolves client credentials: accounts, or a cache in front of it. It returns
// ErrUnauthenticated for a credential that is wrong, revoked, expired or of another client, and
// any other error for a failure to decide.
type Authenticator interface {
	AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (Principal, error)
	AuthenticateSDKToken(ctx context.Context, sdkToken, clientID string) (Principal, error)
	// AuthenticateSession resolves a console session; the session names its client. Never
	// cached: each use moves the session's idle timeout.
	AuthenticateSession(ctx context.Context, token string) (Principal, error)
}

// Resolve asks authn about secret, a credential of client kind k, for clientID ("" when the
// caller named none; the client id in its canonical form, ParseClientID's).
func Resolve(ctx context.Context, authn Authenticator, k Kind, secret, clientID string) (Principal, error) {
	switch k {
	case APIKey:
		return authn.AuthenticateAPIKey(ctx, secret, clientID)
	case SDKToken:
		return authn.AuthenticateSDKToken(ctx, secret, clientID)
	case Session:
		p, err := authn.AuthenticateSession(ctx, secret)
		if err == nil && clientID != "" && p.ClientID != clientID {
			return Principal{}, ErrUnauthenticated
		}
		return p, err
	}
	return Principal{}, ErrUnauthenticated
}

// KindOfValue is the client credential kind whose shape s has, 0 when none: what tells a
// credential sent in the wrong header.
func KindOfValue(s string) Kind {
	for _, k := range ClientKinds() {
		if k.WellFormed(s) {
			return k
		}
	}
	return 0
}

// Prefixes of the generated credentials.
const (
	APIKeyPrefix       = "mnv_"
	SDKTokenPrefix     = "mnvsdk_"
	ClientSecretPrefix = "mnvsec_"
	SessionPrefix      = "mnvses_"
	InvitationPrefix   = "mnvinv_"
)

// SessionCookie is the console session's cookie: __Host- makes the browser keep it only when
// it was set Secure, for the whole host (Path=/), by the host itself (no Domain).
const SessionCookie = "__Host-mnv-session"

// The header that names the client beside its credential, as the API's documentation writes
// it, and its gRPC metadata key.
const (
	HeaderClientID = "X-CLIENT-ID"
	MDClientID     = "x-client-id"
)

// WellFormedAPIKey reports whether s has the shape of an API key.
func WellFormedAPIKey(s string) bool { return APIKey.WellFormed(s) }

// WellFormedSDKToken reports whether s has the shape of an SDK token.
func WellFormedSDKToken(s string) bool { return SDKToken.WellFormed(s) }

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
