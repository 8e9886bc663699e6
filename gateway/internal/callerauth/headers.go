package callerauth

import (
	"net/http"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/idempotency/idemkey"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// What is wrong with a credential header, as the messages say it: each names what to fix,
// never a value (it may be a credential) and never whether something exists.
const (
	missing     = "header is missing"
	repeated    = "header is sent more than once"
	empty       = "header is empty"
	malformedID = "header is malformed: a client id is a UUID (8-4-4-4-12 hexadecimal digits)"
	// A client secret in the API key's header: say where it goes.
	secretAsKey = "header holds a client secret: the secret goes in the request body (secretKey), never in a header"
)

// misplaced says what a credential of one kind (the value's) is doing in the header of another
// (the route's). A pair not here gets the header's malformed message.
var misplaced = map[[2]principal.Kind]string{
	{principal.APIKey, principal.SDKToken}: "header holds an SDK token: an SDK token goes in X-SDK-TOKEN, on POST /v1/api/sdk/session only",
	{principal.SDKToken, principal.APIKey}: "header holds an API key: this route takes an SDK token",
}

// notHere is added to the API key's missing message when an SDK token was sent instead, which
// is dropped on every route but its own: say where it belongs.
const notHere = " (X-SDK-TOKEN is accepted on POST /v1/api/sdk/session only)"

// malformed is the message of a credential of kind k that does not have its shape.
func malformed(k principal.Kind) string {
	return "header is malformed: " + k.Noun() + " is " + k.Prefix() + " followed by 32 to 128 letters and digits"
}

// Credential is what Check let through: the route's client credential (Kind 0 when it takes
// none) and the client id sent, in its canonical form ("" when none).
type Credential struct {
	Kind     principal.Kind
	Secret   string
	ClientID string
}

// Check applies the rule e to h, and removes the credentials the route must not see. It
// returns the credential that may go on, or what is wrong with the credential headers, one
// message each (the credential first, then X-CLIENT-ID). Any message means 401. The client id
// is parsed here, once for the request.
func Check(e rpcrule.Edge, h http.Header) (Credential, []string) {
	var (
		c        Credential
		problems []string
	)
	tokenSent := len(h.Values(principal.SDKToken.Header())) > 0
	for _, k := range principal.ClientKinds() {
		if k != e.Credential {
			h.Del(k.Header())
		}
	}
	if e.Credential.Client() {
		v, p := credentialProblem(h, e.Credential)
		switch {
		case p == missing && e.Credential == principal.APIKey && tokenSent:
			problems = append(problems, e.Credential.Header()+" "+missing+notHere)
		case p != "":
			problems = append(problems, e.Credential.Header()+" "+p)
		}
		c = Credential{Kind: e.Credential, Secret: v}
	}
	if e.ClientID == rpcrule.ClientIDDropped {
		h.Del(principal.HeaderClientID)
		return c, problems
	}
	v := h.Values(principal.HeaderClientID)
	var p string
	switch {
	case len(v) == 0:
		if e.ClientID == rpcrule.ClientIDRequired {
			p = missing
		}
	case len(v) > 1:
		p = repeated
	case v[0] == "":
		p = empty
	default:
		var ok bool
		if c.ClientID, ok = principal.ParseClientID(v[0]); !ok {
			p = malformedID
		}
	}
	if p != "" {
		problems = append(problems, principal.HeaderClientID+" "+p)
	}
	return c, problems
}

// credentialProblem returns the one value of the header of credential kind k, and what is wrong
// with it: "" when it has the kind's shape.
func credentialProblem(h http.Header, k principal.Kind) (string, string) {
	v := h.Values(k.Header())
	switch {
	case len(v) == 0:
		return "", missing
	case len(v) > 1:
		return "", repeated
	case v[0] == "":
		return "", empty
	case k.WellFormed(v[0]):
		return v[0], ""
	}
	if m, ok := misplaced[[2]principal.Kind{k, principal.KindOfValue(v[0])}]; ok {
		return "", m
	}
	if k == principal.APIKey && principal.WellFormedClientSecret(v[0]) {
		return "", secretAsKey
	}
	return "", malformed(k)
}

// HeaderIdemKey is the header of a request's idempotency key.
const HeaderIdemKey = "Idempotency-Key"

// CheckIdempotencyKey applies the services' grammar of Idempotency-Key on a route that
// honours it, and removes the header from a route that does not. It returns the 400 of a key
// that is not exactly one well-formed key, nil when the request may go on. It runs after the
// credential headers' rules, so a 401 comes first, as in the services.
//
// The services check the key too, but a key grpc-gateway cannot carry as gRPC metadata (a tab,
// a letter outside ASCII) was dropped on the way with a log line, and the request ran without
// its key: a retry ran, and charged, twice.
func CheckIdempotencyKey(honoured bool, h http.Header) *envelope.Error {
	if !honoured {
		h.Del(HeaderIdemKey)
		return nil
	}
	v := h.Values(HeaderIdemKey)
	msg := ""
	switch {
	case len(v) == 0:
		return nil
	case len(v) > 1:
		msg = "must be sent once"
	case !idemkey.Valid(v[0]):
		msg = "must be " + idemkey.Rule // the services' message
	default:
		return nil
	}
	return &envelope.Error{Status: http.StatusBadRequest, Code: string(fault.InvalidArgument), Message: msg, Field: HeaderIdemKey}
}

// Unauthenticated is the 401 of the problems Check found, one message each.
func Unauthenticated(problems []string) []envelope.Error {
	es := make([]envelope.Error, len(problems))
	for i, p := range problems {
		es[i] = envelope.Error{Status: http.StatusUnauthorized, Code: string(fault.Unauthenticated), Message: p}
	}
	return es
}
