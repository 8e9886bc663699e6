package openapi

import (
	"net/http"
	"slices"
	"strings"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// tags are the resources the reference files operations under, in the order it shows them. A
// rule's tag must be one of them (checkRoute); a tag no operation uses is left out.
var tags = []struct{ name, description string }{
	{"Account", "The client's own details, balance and ledger."},
	{"API keys", "The keys a client's backend calls with: the first one, further ones, rotation and revocation."},
	{"SDK tokens", "The narrow tokens native apps open SDK sessions with."},
	{"Verifications", "Capturing a number in an app (SDK sessions) and verifying it from the backend."},
	{"Browser flow", "Verifying a number in a web page: the backend opens a transaction, the page captures it, the backend reads the result. The page's origin must be one of the account's web origins."},
	{"Workflows", "Verification workflows: one number through the channels of the account's policy, in order (the network's silent check, then a one-time code by SMS), until one decides; and the policy itself."},
	{"Reveal", "STUCK_PLUS: the numbers captured for the account, revealed to an ADMIN key for a reason, and the audit of the reveals."},
	{"Connect profiles", "The customer identity profiles of the CRM area, and their enrichment."},
	{"Connect imports", "Importing profiles from CSV files."},
	{"Connect integrations", "Sending profiles to the client's systems, their sync history, and the overview of Connect."},
	{"Usage", "Counts and spend per day over a range of dates, for charts and reports: verifications by status, operator and method, and the ledger by kind."},
	{"Webhooks", "Endpoints that receive the account's events, signed, with their deliveries."},
	{"Console", "The console's people: passkey sign-in, sessions, step-up, members, invitations and the audit log of what they did (docs/api-decisions.md#console)."},
	{"CAMARA", "The account's side of the CAMARA Number Verification endpoints mnv serves (under /number-verification and /oauth2, outside this document): the redirect URIs its authorization code flow may send a code to."},
}

func knownTag(name string) bool {
	return slices.ContainsFunc(tags, func(t struct{ name, description string }) bool { return t.name == name })
}

// errorStatuses are the error statuses an operation can answer, derived from its rule and its
// route, so that a client reading the document handles what may come and nothing else:
//
//   - 400 when the request carries something to refuse (a body, a path or query parameter) or
//     the RPC needs a product (FEATURE_NOT_ENABLED);
//   - 401 unless the route is a browser's, which takes no credential;
//   - 402 when it charges;
//   - 403 when it needs the ADMIN role, for a browser route (the page's origin), and for every
//     client credential unless a SUSPENDED account may still call it;
//   - 404 when the path names a resource;
//   - 409 with Idempotency-Key (a request still running) or when the RPC declares conflicts;
//   - 413 when there is a body; 422 with Idempotency-Key;
//   - 429, 500 and 503 everywhere: the per-address limit, a fault, a backend away.
func errorStatuses(r route) []int {
	edge := rpcrule.EdgeOf(r.rule, r.path)
	hasBody := r.body != "" || len(r.own.GetRequestMediaTypes()) > 0
	hasParams := len(r.pathParams()) > 0
	if r.own == nil && r.body != "*" {
		inPath := map[string]bool{r.body: true}
		for _, p := range r.pathParams() {
			inPath[p] = true
		}
		for _, f := range r.rpc.Input.Fields {
			if !inPath[string(f.Desc.Name())] {
				hasParams = true // a query parameter
			}
		}
	}
	var out []int
	add := func(ok bool, status int) {
		if ok {
			out = append(out, status)
		}
	}
	clientCredential := r.rule.GetCredential() == optionsv1.Credential_CREDENTIAL_API_KEY ||
		r.rule.GetCredential() == optionsv1.Credential_CREDENTIAL_SDK_TOKEN ||
		r.rule.GetCredential() == optionsv1.Credential_CREDENTIAL_SESSION
	// The console's own routes: signing in may fail to verify a passkey (401), and a write must
	// come from the console's origin (403).
	console := strings.HasPrefix(r.path, consolePrefix)
	add(hasBody || hasParams || r.rule.GetFeature() != optionsv1.Feature_FEATURE_UNSPECIFIED, http.StatusBadRequest)
	add(!edge.Public() || console, http.StatusUnauthorized)
	add(r.rule.GetCharges(), http.StatusPaymentRequired)
	add(r.rule.GetAdminRole() || edge.Public() || edge.Session || console || (!r.rule.GetAllowSuspended() &&
		(clientCredential || r.rule.GetCredential() == optionsv1.Credential_CREDENTIAL_NONE)), http.StatusForbidden)
	// A console route may name what is not there in its body too: an invitation, a client.
	add(len(r.pathParams()) > 0 || console, http.StatusNotFound)
	add(r.rule.GetIdempotent() || r.rule.GetConflicts(), http.StatusConflict)
	add(hasBody, http.StatusRequestEntityTooLarge)
	add(r.rule.GetIdempotent(), http.StatusUnprocessableEntity)
	out = append(out, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable)
	return out
}
