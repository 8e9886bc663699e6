package openapi_test

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/mnvhq/mnv/gateway/internal/openapi"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	usagev1 "github.com/mnvhq/mnv/proto/gen/mnv/usage/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
)

const gatewayYAML = "../../../proto/gateway.yaml"

// request is what buf sends the plugin, made from the compiled-in descriptors (which carry no
// comments), with change applied to the rule of the named method.
func request(t *testing.T, method string, change func(*optionsv1.Rule) *optionsv1.Rule) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	req := &pluginpb.CodeGeneratorRequest{}
	changed := false
	for _, fd := range []protoreflect.FileDescriptor{
		descriptorpb.File_google_protobuf_descriptor_proto, timestamppb.File_google_protobuf_timestamp_proto,
		durationpb.File_google_protobuf_duration_proto,
		optionsv1.File_mnv_options_v1_options_proto, principalv1.File_mnv_principal_v1_principal_proto,
		usagev1.File_mnv_usage_v1_usage_proto,
		accountsv1.File_mnv_accounts_v1_types_proto, accountsv1.File_mnv_accounts_v1_people_proto,
		accountsv1.File_mnv_accounts_v1_accounts_proto, accountsv1.File_mnv_accounts_v1_admin_proto,
		accountsv1.File_mnv_accounts_v1_internal_proto, verificationv1.File_mnv_verification_v1_workflows_proto,
		verificationv1.File_mnv_verification_v1_verification_proto,
		connectv1.File_mnv_connect_v1_connect_proto, connectv1.File_mnv_connect_v1_webhooks_proto,
	} {
		fdp := protodesc.ToFileDescriptorProto(fd)
		for _, svc := range fdp.GetService() {
			for _, m := range svc.GetMethod() {
				if strings.TrimPrefix(fdp.GetPackage()+"."+svc.GetName()+"."+m.GetName(), ".") != method {
					continue
				}
				rule, _ := proto.GetExtension(m.GetOptions(), optionsv1.E_Rule).(*optionsv1.Rule)
				if rule = change(proto.Clone(rule).(*optionsv1.Rule)); rule == nil {
					m.Options = &descriptorpb.MethodOptions{}
				} else {
					proto.SetExtension(m.GetOptions(), optionsv1.E_Rule, rule)
				}
				changed = true
			}
		}
		req.ProtoFile = append(req.ProtoFile, fdp)
		if strings.HasPrefix(fd.Path(), "mnv/") {
			req.FileToGenerate = append(req.FileToGenerate, fd.Path())
		}
	}
	if method != "" && !changed {
		t.Fatalf("no method %s", method)
	}
	return req
}

func generate(t *testing.T, req *pluginpb.CodeGeneratorRequest) (*protogen.Plugin, error) {
	t.Helper()
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	return gen, openapi.Generate(gen, gatewayYAML)
}

// TestRoutesAreTheCommittedOnes: the table of routes the gateway's header rules use is what
// the generator writes from gateway.yaml and the rules (it depends on no comment).
func TestRoutesAreTheCommittedOnes(t *testing.T) {
	gen, err := generate(t, request(t, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../../proto/gen/openapi/" + openapi.RoutesFile)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range gen.Response().GetFile() {
		files[f.GetName()] = f.GetContent()
	}
	if files[openapi.RoutesFile] != string(committed) {
		t.Errorf("the generated routes differ from the committed ones:\n%s", files[openapi.RoutesFile])
	}
	if !strings.HasPrefix(files[openapi.DocumentFile], `{`) || !strings.Contains(files[openapi.DocumentFile], `"openapi": "3.1.0"`) {
		t.Errorf("document: %.200s", files[openapi.DocumentFile])
	}
}

// TestGenerateRefuses: a rule that the HTTP edge cannot serve stops make generate.
func TestGenerateRefuses(t *testing.T) {
	tests := []struct {
		name, method string
		change       func(*optionsv1.Rule) *optionsv1.Rule
		wantErr      string
	}{
		{"a /me route that needs X-CLIENT-ID", "mnv.accounts.v1.AccountsService.ListApiKeys", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.ClientId = optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED
			return r
		}, "X-CLIENT-ID must be optional"},
		{"the operator's credential on a route", "mnv.accounts.v1.AccountsService.GetClient", func(r *optionsv1.Rule) *optionsv1.Rule {
			return &optionsv1.Rule{Credential: optionsv1.Credential_CREDENTIAL_ADMIN, SuccessMessage: "x"}
		}, "has no HTTP route"},
		{"an internal route the gateway may not call", "mnv.verification.v1.VerificationService.CaptureTransaction", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.Callers = []optionsv1.Caller{optionsv1.Caller_CALLER_VERIFICATION}
			return r
		}, "must admit the gateway"},
		{"a route without a success message", "mnv.verification.v1.VerificationService.ListOperators", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.SuccessMessage = ""
			return r
		}, "needs a success_message"},
		{"Idempotency-Key on a GET", "mnv.accounts.v1.AccountsService.GetClient", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.Idempotent = true
			return r
		}, "Idempotency-Key is for POST routes"},
		{"an unrouted RPC without a rule", "mnv.accounts.v1.AccountsAdminService.CreateClient", func(*optionsv1.Rule) *optionsv1.Rule {
			return nil
		}, "declares no rule"},
		{"two routes with one operation id", "mnv.accounts.v1.AccountsService.GetMe", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.OperationIds = []string{"GetClient"}
			return r
		}, "operationId GetClient names both"},
		{"an RPC with two routes and one operation id", "mnv.accounts.v1.AccountsService.RotateApiKey", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.OperationIds = []string{"RotateApiKey"}
			return r
		}, "operation_ids names 1 routes"},
		{"a tag the document does not have", "mnv.accounts.v1.AccountsService.GetMe", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.Tag = "AccountsService"
			return r
		}, `not "AccountsService"`},
		{"a route without a summary", "mnv.accounts.v1.AccountsService.GetMe", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.Summary = ""
			return r
		}, "needs a summary"},
		{"a gateway route bound twice", "mnv.connect.v1.ConnectService.GetImportSample", func(r *optionsv1.Rule) *optionsv1.Rule {
			r.GatewayRoute.Path = "/v1/api/me/connect/overview"
			return r
		}, "is bound twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := generate(t, request(t, tt.method, tt.change)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Generate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
