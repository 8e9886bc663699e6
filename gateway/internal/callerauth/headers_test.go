package callerauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/mnvhq/mnv/gateway/internal/callerauth"
	"github.com/mnvhq/mnv/gateway/internal/upload"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// Well-formed but obviously fake credentials, built so that no key-shaped literal sits in the
// source for secret scanners to flag.
var (
	key   = "mnv_" + strings.Repeat("T", 40)
	token = "mnvsdk_" + strings.Repeat("T", 40)
)

const clientID = "8a1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

// The header rules (docs/api-decisions.md#credentials), as EdgeOf derives them.
var (
	keyAndClient = rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDRequired}
	keyOnly      = rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional}
	bootstrap    = rpcrule.Edge{Credential: principal.None, ClientID: rpcrule.ClientIDRequired}
	sdkSession   = rpcrule.Edge{Credential: principal.SDKToken, ClientID: rpcrule.ClientIDRequired}
	public       = rpcrule.Edge{Credential: principal.None, ClientID: rpcrule.ClientIDDropped}
	// The console's: an API key or a person's session; a session alone.
	keyOrSession       = rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional, Session: true}
	keyClientOrSession = rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDRequired, Session: true}
	sessionOnly        = rpcrule.Edge{Credential: principal.Session, ClientID: rpcrule.ClientIDDropped, Session: true}
)

// TestRules: the routes get the header rules of docs/api-decisions.md#credentials, from their RPCs'
// declarations.
func TestRules(t *testing.T) {
	rs, err := callerauth.New(nil, openapigen.Routes)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, pattern string
		want            rpcrule.Edge
	}{
		{"GET", "/v1/api/clients", keyClientOrSession},
		{"POST", "/v1/api/clients/rotate-key", keyAndClient},
		{"POST", "/v1/api/clients/{client_id=*}/rotate-key", keyOnly},
		{"GET", "/v1/api/me/api-keys", keyOrSession},
		{"GET", "/v1/api/me/members", sessionOnly},
		{"GET", "/v1/api/console/session", sessionOnly},
		{"POST", "/v1/api/console/sign-in", public},
		{"POST", "/v1/api/me/api-key/rotate", keyOnly},
		{"POST", "/v1/api/me/api-key/generate", bootstrap},
		{"POST", "/v1/api/sdk/session", sdkSession},
		{"POST", "/v1/api/verify", keyAndClient},
		{"GET", "/v1/api/operators", keyClientOrSession},
		{"POST", "/v1/api/web/transactions/{transaction_id=*}/capture", public},
		{"POST", "/v1/api/web/transactions/{transaction_id=*}/complete", public},
		{"POST", "/v1/api/me/connect/import", keyOrSession},
		{"GET", "/v1/api/me/connect/import/sample.csv", keyOrSession},
		{"GET", "/v1/api/me/stuck-plus/sessions", keyOrSession},
	}
	for _, tt := range tests {
		if got, ok := rs.Edge(tt.method, tt.pattern); !ok || got != tt.want {
			t.Errorf("%s %s = %+v, %v; want %+v", tt.method, tt.pattern, got, ok, tt.want)
		}
	}
	if _, err := callerauth.New(nil, []openapigen.Route{{Method: "GET", Pattern: "/x", RPC: "/mnv.accounts.v1.AccountsService/Nope"}}); err == nil {
		t.Error("a route to an RPC without a rule was accepted")
	}
}

// TestEveryMuxRouteHasARule serves every route of the generated table through a mux with the
// real route registrations, and checks that the pattern the mux matched is the table's: the
// middleware looks rules up by that pattern, so a route the table wrote differently would be
// refused.
func TestEveryMuxRouteHasARule(t *testing.T) {
	rs, err := callerauth.New(nil, openapigen.Routes)
	if err != nil {
		t.Fatal(err)
	}
	var matched string
	mux := runtime.NewServeMux(runtime.WithMiddlewares(func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
			matched = callerauth.RoutePattern(r.Context())
			if _, ok := rs.Edge(r.Method, matched); !ok {
				w.WriteHeader(http.StatusTeapot)
			}
		}
	}))
	ctx := context.Background()
	if err := errors.Join(
		accountsv1.RegisterAccountsServiceHandlerClient(ctx, mux, nil),
		accountsv1.RegisterPeopleServiceHandlerClient(ctx, mux, nil),
		verificationv1.RegisterVerificationServiceHandlerClient(ctx, mux, nil),
		connectv1.RegisterConnectServiceHandlerClient(ctx, mux, nil),
		connectv1.RegisterWebhookServiceHandlerClient(ctx, mux, nil),
		upload.Register(mux, nil),
	); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[a-z_]+=\*\}`)
	for _, rt := range openapigen.Routes {
		matched = ""
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(rt.Method, param.ReplaceAllString(rt.Pattern, "p1"), nil))
		if matched != rt.Pattern || w.Code == http.StatusTeapot {
			t.Errorf("%s %s: the mux matched %q (%d)", rt.Method, rt.Pattern, matched, w.Code)
		}
	}
	if len(openapigen.Routes) < 40 {
		t.Errorf("%d routes", len(openapigen.Routes))
	}
}

// Messages of Check, as a client reads them.
const (
	keyMissing      = "X-API-KEY header is missing"
	keyMalformed    = "X-API-KEY header is malformed: an API key is mnv_ followed by 32 to 128 letters and digits"
	keyRepeated     = "X-API-KEY header is sent more than once"
	keyEmpty        = "X-API-KEY header is empty"
	idMissing       = "X-CLIENT-ID header is missing"
	idMalformed     = "X-CLIENT-ID header is malformed: a client id is a UUID (8-4-4-4-12 hexadecimal digits)"
	idEmpty         = "X-CLIENT-ID header is empty"
	tokenMissing    = "X-SDK-TOKEN header is missing"
	tokenMalformed  = "X-SDK-TOKEN header is malformed: an SDK token is mnvsdk_ followed by 32 to 128 letters and digits"
	tokenAsKey      = "X-API-KEY header holds an SDK token: an SDK token goes in X-SDK-TOKEN, on POST /v1/api/sdk/session only"
	secretAsKey     = "X-API-KEY header holds a client secret: the secret goes in the request body (secretKey), never in a header"
	keyAsToken      = "X-SDK-TOKEN header holds an API key: this route takes an SDK token"
	keyMissingToken = "X-API-KEY header is missing (X-SDK-TOKEN is accepted on POST /v1/api/sdk/session only)"
)

func TestCheck(t *testing.T) {
	type hdr = map[string][]string
	secret := "mnvsec_" + strings.Repeat("T", 40)
	tests := []struct {
		name string
		edge rpcrule.Edge
		h    hdr
		// want are the messages of the 401, none when the request goes on.
		want []string
		// gone lists headers the check must remove before the request goes on.
		gone []string
	}{
		{"key and client", keyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, nil, nil},
		{"upper-case client id", keyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {strings.ToUpper(clientID)}}, nil, nil},
		{"no client id", keyAndClient, hdr{"X-Api-Key": {key}}, []string{idMissing}, nil},
		{"no key", keyAndClient, hdr{"X-Client-Id": {clientID}}, []string{keyMissing}, nil},
		{"nothing", keyAndClient, hdr{}, []string{keyMissing, idMissing}, nil},
		{"quoted key", keyAndClient, hdr{"X-Api-Key": {`"` + key + `"`}, "X-Client-Id": {clientID}}, []string{keyMalformed}, nil},
		{"key with a space inside", keyAndClient, hdr{"X-Api-Key": {key[:10] + " " + key[10:]}, "X-Client-Id": {clientID}}, []string{keyMalformed}, nil},
		{"key with a line break", keyAndClient, hdr{"X-Api-Key": {key + "\n"}, "X-Client-Id": {clientID}}, []string{keyMalformed}, nil},
		{"short key", keyAndClient, hdr{"X-Api-Key": {key[:20]}, "X-Client-Id": {clientID}}, []string{keyMalformed}, nil},
		{"quoted client id", keyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {`"` + clientID + `"`}}, []string{idMalformed}, nil},
		{"client id without dashes", keyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {strings.ReplaceAll(clientID, "-", "")}}, []string{idMalformed}, nil},
		{"malformed key and client id", keyAndClient, hdr{"X-Api-Key": {"nope"}, "X-Client-Id": {"acme"}}, []string{keyMalformed, idMalformed}, nil},
		{"two keys", keyAndClient, hdr{"X-Api-Key": {key, key}, "X-Client-Id": {clientID}}, []string{keyRepeated}, nil},
		{"empty key", keyAndClient, hdr{"X-Api-Key": {""}, "X-Client-Id": {clientID}}, []string{keyEmpty}, nil},
		{"SDK token in the key header", keyAndClient, hdr{"X-Api-Key": {token}, "X-Client-Id": {clientID}}, []string{tokenAsKey}, nil},
		{"client secret in the key header", keyAndClient, hdr{"X-Api-Key": {secret}, "X-Client-Id": {clientID}}, []string{secretAsKey}, nil},
		{"SDK token instead of key", keyAndClient, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}}, []string{keyMissingToken}, []string{"X-Sdk-Token"}},
		{"SDK token beside key is dropped", keyAndClient, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}, "X-Sdk-Token": {token}}, nil, []string{"X-Sdk-Token"}},
		{"me: key alone", keyOnly, hdr{"X-Api-Key": {key}}, nil, nil},
		{"me: malformed client id", keyOnly, hdr{"X-Api-Key": {key}, "X-Client-Id": {"acme"}}, []string{idMalformed}, nil},
		{"me: empty client id", keyOnly, hdr{"X-Api-Key": {key}, "X-Client-Id": {""}}, []string{idEmpty}, nil},
		{"me: nothing", keyOnly, hdr{}, []string{keyMissing}, nil},
		{"bootstrap", bootstrap, hdr{"X-Client-Id": {clientID}}, nil, nil},
		{"bootstrap ignores a key", bootstrap, hdr{"X-Client-Id": {clientID}, "X-Api-Key": {key}}, nil, []string{"X-Api-Key"}},
		{"bootstrap without client id", bootstrap, hdr{"X-Api-Key": {key}}, []string{idMissing}, []string{"X-Api-Key"}},
		{"session", sdkSession, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}}, nil, nil},
		{"session with a key only", sdkSession, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, []string{tokenMissing}, []string{"X-Api-Key"}},
		{"session drops a key", sdkSession, hdr{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}, "X-Api-Key": {key}}, nil, []string{"X-Api-Key"}},
		{"session without client id", sdkSession, hdr{"X-Sdk-Token": {token}}, []string{idMissing}, nil},
		{"session with a key-shaped token", sdkSession, hdr{"X-Sdk-Token": {key}, "X-Client-Id": {clientID}}, []string{keyAsToken}, nil},
		{"session with a malformed token", sdkSession, hdr{"X-Sdk-Token": {"mnvsdk_x"}, "X-Client-Id": {clientID}}, []string{tokenMalformed}, nil},
		{"public drops credentials", public, hdr{"X-Api-Key": {key}, "X-Client-Id": {clientID}}, nil, []string{"X-Api-Key", "X-Client-Id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tt.h {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			if _, got := callerauth.Check(tt.edge, h); !slices.Equal(got, tt.want) {
				t.Fatalf("Check = %q, want %q", got, tt.want)
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
		for _, edge := range []rpcrule.Edge{keyAndClient, keyOnly, bootstrap, sdkSession} {
			h := http.Header{"X-Api-Key": {apiKey}, "X-Client-Id": {client}, "X-Sdk-Token": {sdk}}
			if _, problems := callerauth.Check(edge, h); len(problems) > 0 {
				continue
			}
			for _, v := range []string{h.Get("X-Api-Key"), h.Get("X-Client-Id"), h.Get("X-Sdk-Token")} {
				if strings.ContainsAny(v, "\"' \t\r\n\x00") {
					t.Fatalf("rule %+v accepted %q", edge, v)
				}
			}
		}
	})
}

// TestCheckGivesTheCredential: what Check lets through is the route's credential and the client
// id in its canonical form, parsed there once for the request; a route that takes no client
// credential gives none.
func TestCheckGivesTheCredential(t *testing.T) {
	tests := []struct {
		name string
		edge rpcrule.Edge
		h    http.Header
		want callerauth.Credential
	}{
		{"key and upper-case client id", keyAndClient, http.Header{"X-Api-Key": {key}, "X-Client-Id": {strings.ToUpper(clientID)}},
			callerauth.Credential{Kind: principal.APIKey, Secret: key, ClientID: clientID}},
		{"me: key alone", keyOnly, http.Header{"X-Api-Key": {key}}, callerauth.Credential{Kind: principal.APIKey, Secret: key}},
		{"session", sdkSession, http.Header{"X-Sdk-Token": {token}, "X-Client-Id": {clientID}},
			callerauth.Credential{Kind: principal.SDKToken, Secret: token, ClientID: clientID}},
		{"bootstrap: the client id, no credential", bootstrap, http.Header{"X-Client-Id": {clientID}, "X-Api-Key": {key}},
			callerauth.Credential{ClientID: clientID}},
		{"public: nothing", public, http.Header{"X-Client-Id": {clientID}, "X-Api-Key": {key}}, callerauth.Credential{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := callerauth.Check(tt.edge, tt.h)
			if len(problems) > 0 || got != tt.want {
				t.Errorf("Check = %+v, %q; want %+v", got, problems, tt.want)
			}
		})
	}
}

// TestCheckIdempotencyKey: where the RPC honours the header, a key is exactly one key of the
// services' grammar or the request is 400 naming the header; elsewhere the header is dropped.
func TestCheckIdempotencyKey(t *testing.T) {
	rs, err := callerauth.New(nil, openapigen.Routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		method, pattern string
		want            bool
	}{
		{"POST", "/v1/api/me/sdk-tokens", true}, {"POST", "/v1/api/verify", true}, {"POST", "/v1/api/me/api-key/generate", true},
		{"GET", "/v1/api/me/api-keys", false}, {"DELETE", "/v1/api/me/api-keys/{key_id=*}", false}, {"POST", "/v1/api/me/connect/import", false},
	} {
		if got := rs.Idempotent(r.method, r.pattern); got != r.want {
			t.Errorf("%s %s honours Idempotency-Key: %v, want %v", r.method, r.pattern, got, r.want)
		}
	}

	const malformed = "must be 1 to 255 visible ASCII characters (letters, digits and punctuation; no spaces)"
	tests := []struct {
		name     string
		honoured bool
		keys     []string
		want     string // the 400's message, "" to go on
		kept     bool   // the header goes on to the service
	}{
		{"none", true, nil, "", false},
		{"a key", true, []string{"ios-token-1"}, "", true},
		{"punctuation", true, []string{`"!~{}"`}, "", true},
		{"the longest", true, []string{strings.Repeat("k", 255)}, "", true},
		{"too long", true, []string{strings.Repeat("k", 256)}, malformed, true},
		{"empty", true, []string{""}, malformed, true},
		{"space", true, []string{"has space"}, malformed, true},
		{"tab", true, []string{"tab\there"}, malformed, true},
		{"not ASCII", true, []string{"ключ"}, malformed, true},
		{"twice", true, []string{"a", "b"}, "must be sent once", true},
		{"not honoured: dropped", false, []string{"a"}, "", false},
		{"not honoured: a bad one dropped too", false, []string{"has space"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, k := range tt.keys {
				h.Add("Idempotency-Key", k)
			}
			bad := callerauth.CheckIdempotencyKey(tt.honoured, h)
			switch {
			case tt.want == "" && bad != nil:
				t.Fatalf("refused: %+v", bad)
			case tt.want != "" && (bad == nil || bad.Message != tt.want || bad.Field != "Idempotency-Key" || bad.Status != http.StatusBadRequest || bad.Code != "INVALID_ARGUMENT"):
				t.Fatalf("got %+v, want 400 INVALID_ARGUMENT %q on Idempotency-Key", bad, tt.want)
			}
			if tt.want == "" && (len(h.Values("Idempotency-Key")) > 0) != tt.kept {
				t.Errorf("header kept: %v, want %v", !tt.kept, tt.kept)
			}
		})
	}
}
