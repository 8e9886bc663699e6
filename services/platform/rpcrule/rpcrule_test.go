package rpcrule_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	_ "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	_ "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// everyMethod is every RPC of every mnv service: public, internal and admin.
func everyMethod(t *testing.T) []rpcrule.Method {
	t.Helper()
	var out []rpcrule.Method
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "mnv.") {
			return true
		}
		for i := range fd.Services().Len() {
			out = append(out, rpcrule.MethodsOf(fd.Services().Get(i))...)
		}
		return true
	})
	if len(out) < 50 {
		t.Fatalf("found %d methods: are the generated packages linked in?", len(out))
	}
	return out
}

// TestEveryRPCDeclaresAConsistentRule walks every service: an RPC without the rule, or with a
// contradictory one, fails here before any server refuses to start with it.
func TestEveryRPCDeclaresAConsistentRule(t *testing.T) {
	methods := everyMethod(t)
	if err := rpcrule.CheckAll(methods); err != nil {
		t.Fatal(err)
	}
	// The policies built from them are ones a server accepts.
	g := auth.NewGuard(auth.PolicyOf(methods), nil, auth.NewServiceTokens(auth.Callers{}, ""))
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestFeatureNamesAreAccounts: a product a rule requires is one accounts can grant, under the
// same name, since the gate compares it with the client's features as accounts names them.
func TestFeatureNamesAreAccounts(t *testing.T) {
	for v := range optionsv1.Feature_name {
		f := optionsv1.Feature(v)
		if f == optionsv1.Feature_FEATURE_UNSPECIFIED {
			continue
		}
		if _, ok := accountsv1.Feature_value[f.String()]; !ok {
			t.Errorf("%s is no mnv.accounts.v1.Feature", f)
		}
		if rpcrule.FeatureName(f) != strings.TrimPrefix(f.String(), "FEATURE_") {
			t.Errorf("FeatureName(%s) = %q", f, rpcrule.FeatureName(f))
		}
	}
	for v := range optionsv1.Caller_name {
		c := optionsv1.Caller(v)
		if c != optionsv1.Caller_CALLER_UNSPECIFIED && !contains(auth.KnownCallers, rpcrule.CallerName(c)) {
			t.Errorf("%s is caller %q, which auth does not know", c, rpcrule.CallerName(c))
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestCheck shows each contradiction Check refuses, on a real method (GetClient).
func TestCheck(t *testing.T) {
	md := accountsv1.File_mnv_accounts_v1_accounts_proto.Services().ByName("AccountsService").Methods().ByName("GetClient")
	key := optionsv1.Credential_CREDENTIAL_API_KEY
	tests := []struct {
		name    string
		rule    *optionsv1.Rule
		wantErr string // "" for none
	}{
		{"no rule", nil, "declares no rule"},
		{"no credential", &optionsv1.Rule{}, "names no credential"},
		{"api key", &optionsv1.Rule{Credential: key}, ""},
		{"internal without callers", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_INTERNAL}, "must name its callers"},
		{"internal with callers", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_INTERNAL, Callers: []optionsv1.Caller{optionsv1.Caller_CALLER_GATEWAY}}, ""},
		{"callers on an api key rule", &optionsv1.Rule{Credential: key, Callers: []optionsv1.Caller{optionsv1.Caller_CALLER_GATEWAY}}, "CREDENTIAL_INTERNAL rules only"},
		{"unspecified caller", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_INTERNAL, Callers: []optionsv1.Caller{0}}, "is no caller"},
		{"admin role on an sdk token", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_SDK_TOKEN, AdminRole: true}, "admin_role needs CREDENTIAL_API_KEY"},
		{"admin role on the operator's credential", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_ADMIN, AdminRole: true}, "admin_role needs CREDENTIAL_API_KEY"},
		{"suspended on internal", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_INTERNAL, Callers: []optionsv1.Caller{1}, AllowSuspended: true}, "allow_suspended needs a client credential"},
		{"feature without a client", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_NONE, Feature: optionsv1.Feature_FEATURE_CONNECT}, "feature needs a client credential"},
		{"idempotent admin call", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_ADMIN, Idempotent: true}, "idempotent needs"},
		{"idempotent bootstrap", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_NONE, Idempotent: true, ClientId: optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED}, ""},
		{"optional client id with an sdk token", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_SDK_TOKEN, ClientId: optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL}, "with an API key only"},
		{"client id dropped with an api key", &optionsv1.Rule{Credential: key, ClientId: optionsv1.ClientIdHeader_CLIENT_ID_HEADER_DROPPED}, "cannot be dropped"},
		{"client id required by an internal rule", &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_INTERNAL, Callers: []optionsv1.Caller{1}, ClientId: optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED}, "cannot be required"},
		{"an error status", &optionsv1.Rule{Credential: key, HttpStatus: 404}, "is not a success"},
		{"202 from a generated route", &optionsv1.Rule{Credential: key, HttpStatus: 202}, "needs a gateway_route"},
		{"a gateway route", &optionsv1.Rule{Credential: key, HttpStatus: 202, GatewayRoute: &optionsv1.GatewayRoute{Method: "GET", Path: "/v1/api/clients", ResponseBody: "client"}}, ""},
		{"a gateway route outside the API", &optionsv1.Rule{Credential: key, GatewayRoute: &optionsv1.GatewayRoute{Method: "GET", Path: "/clients", ResponseBody: "client"}}, "under /v1/api/"},
		{"a gateway route answering no field", &optionsv1.Rule{Credential: key, GatewayRoute: &optionsv1.GatewayRoute{Method: "GET", Path: "/v1/api/clients", ResponseBody: "nope"}}, `has no field "nope"`},
		{"a file part without multipart", &optionsv1.Rule{Credential: key, GatewayRoute: &optionsv1.GatewayRoute{Method: "POST", Path: "/v1/api/x", FilePart: "file", ResponseBody: "client"}}, "file_part goes with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rpcrule.Check(rpcrule.Method{FullMethod: "/t/M", Desc: md, Rule: tt.rule})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Check = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestEdgeOf derives the header rules (docs/api-decisions.md#credentials) from the rules of real
// RPCs.
func TestEdgeOf(t *testing.T) {
	tests := []struct {
		method, path string
		want         rpcrule.Edge
	}{
		{"/mnv.accounts.v1.AccountsService/GetClient", "/v1/api/clients", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDRequired, Session: true}},
		{"/mnv.accounts.v1.AccountsService/RotateApiKey", "/v1/api/clients/rotate-key", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDRequired}},
		{"/mnv.accounts.v1.AccountsService/RotateApiKey", "/v1/api/me/api-key/rotate", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional}},
		{"/mnv.accounts.v1.AccountsService/RotateClientApiKey", "/v1/api/clients/{client_id=*}/rotate-key", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional}},
		{"/mnv.accounts.v1.AccountsService/ListApiKeys", "/v1/api/me/api-keys", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional, Session: true}},
		{"/mnv.accounts.v1.PeopleService/ListMembers", "/v1/api/me/members", rpcrule.Edge{Credential: principal.Session, ClientID: rpcrule.ClientIDDropped, Session: true}},
		{"/mnv.accounts.v1.PeopleService/SignIn", "/v1/api/console/sign-in", rpcrule.Edge{Credential: principal.None, ClientID: rpcrule.ClientIDDropped}},
		{"/mnv.accounts.v1.AccountsService/GenerateFirstApiKey", "/v1/api/me/api-key/generate", rpcrule.Edge{Credential: principal.None, ClientID: rpcrule.ClientIDRequired}},
		{"/mnv.verification.v1.VerificationService/CreateSdkSession", "/v1/api/sdk/session", rpcrule.Edge{Credential: principal.SDKToken, ClientID: rpcrule.ClientIDRequired}},
		{"/mnv.verification.v1.VerificationService/Verify", "/v1/api/verify", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDRequired}},
		{"/mnv.verification.v1.VerificationService/CaptureTransaction", "/v1/api/web/transactions/{transaction_id=*}/capture", rpcrule.Edge{Credential: principal.None, ClientID: rpcrule.ClientIDDropped}},
		{"/mnv.connect.v1.ConnectService/UploadImport", "/v1/api/me/connect/import", rpcrule.Edge{Credential: principal.APIKey, ClientID: rpcrule.ClientIDOptional, Session: true}},
	}
	for _, tt := range tests {
		r, ok := rpcrule.Lookup(tt.method)
		if !ok {
			t.Fatalf("no rule for %s", tt.method)
		}
		if got := rpcrule.EdgeOf(r, tt.path); got != tt.want {
			t.Errorf("EdgeOf(%s, %s) = %+v, want %+v", tt.method, tt.path, got, tt.want)
		}
	}
	if _, ok := rpcrule.Lookup("/mnv.accounts.v1.AccountsService/Nope"); ok {
		t.Error("Lookup found a method that does not exist")
	}
	if !proto.Equal(mustLookup(t, "/mnv.connect.v1.ConnectService/UploadImport").GetGatewayRoute(), &optionsv1.GatewayRoute{
		Method: "POST", Path: "/v1/api/me/connect/import", RequestMediaTypes: []string{"multipart/form-data", "text/csv"},
		FilePart: "file", ResponseBody: "job",
	}) {
		t.Error("UploadImport's gateway route is not the upload's")
	}
}

func mustLookup(t *testing.T, m string) *optionsv1.Rule {
	t.Helper()
	r, ok := rpcrule.Lookup(m)
	if !ok {
		t.Fatalf("no rule for %s", m)
	}
	return r
}

// TestKindOfEveryRuleCredential: every credential a rule can declare is a kind, and back, so a
// value added to options' Credential without its row in the table fails here, not at a route.
func TestKindOfEveryRuleCredential(t *testing.T) {
	for v, name := range optionsv1.Credential_name {
		c := optionsv1.Credential(v)
		k := rpcrule.KindOf(c)
		if c == optionsv1.Credential_CREDENTIAL_UNSPECIFIED {
			if k != 0 {
				t.Errorf("KindOf(%s) = %v, want no kind", name, k)
			}
			continue
		}
		if k == 0 || "CREDENTIAL_"+k.String() != name {
			t.Errorf("KindOf(%s) = %v", name, k)
		}
	}
}
