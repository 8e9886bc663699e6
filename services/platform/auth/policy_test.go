package auth_test

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// TestPolicyOf reads the rules the RPCs declare into the rules the guard enforces.
func TestPolicyOf(t *testing.T) {
	p := auth.PolicyOf(rpcrule.MustServices(&accountsv1.AccountsService_ServiceDesc, &accountsv1.AccountsInternalService_ServiceDesc,
		&verificationv1.VerificationService_ServiceDesc, &connectv1.ConnectService_ServiceDesc,
		&accountsv1.PeopleService_ServiceDesc))
	tests := []struct {
		method string
		want   auth.Rule
	}{
		{accountsv1.AccountsService_GetClient_FullMethodName, auth.Rule{Credential: principal.APIKey, AllowSuspended: true, Session: true}},
		{accountsv1.AccountsService_GetMe_FullMethodName, auth.Rule{Credential: principal.APIKey, AllowSuspended: true}},
		{accountsv1.AccountsService_GenerateFirstApiKey_FullMethodName, auth.Rule{Credential: principal.None}},
		{accountsv1.AccountsService_CreateApiKey_FullMethodName, auth.Rule{Credential: principal.APIKey, AdminRole: true, Session: true, StepUp: true}},
		{accountsv1.PeopleService_ListMembers_FullMethodName, auth.Rule{Credential: principal.Session}},
		{accountsv1.PeopleService_InviteMember_FullMethodName, auth.Rule{Credential: principal.Session, AdminRole: true, StepUp: true}},
		{accountsv1.PeopleService_SignIn_FullMethodName, auth.Rule{Credential: principal.None}},
		{accountsv1.AccountsInternalService_Debit_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification, auth.CallerConnect}}},
		{accountsv1.AccountsInternalService_DebitMany_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification, auth.CallerConnect}}},
		{accountsv1.AccountsInternalService_CheckWebOrigin_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification}}},
		{accountsv1.AccountsInternalService_CheckRedirectUri_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification}}},
		{accountsv1.AccountsService_ListRedirectUris_FullMethodName, auth.Rule{Credential: principal.APIKey, Session: true}},
		{accountsv1.AccountsService_SetRedirectUris_FullMethodName, auth.Rule{Credential: principal.APIKey, AdminRole: true, Session: true, StepUp: true}},
		{accountsv1.AccountsInternalService_WatchPrincipals_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerGateway, auth.CallerVerification, auth.CallerConnect}}},
		{accountsv1.AccountsInternalService_AuthenticateClientSecret_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification}}},
		{accountsv1.AccountsInternalService_GetClientPrincipal_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerVerification}}},
		{verificationv1.VerificationService_CreateSdkSession_FullMethodName, auth.Rule{Credential: principal.SDKToken, Feature: "VERIFY"}},
		{verificationv1.VerificationService_Verify_FullMethodName, auth.Rule{Credential: principal.APIKey}},
		{verificationv1.VerificationService_CaptureTransaction_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerGateway}}},
		{verificationv1.VerificationService_CompleteWebTransaction_FullMethodName, auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerGateway}}},
		{verificationv1.VerificationService_SetWorkflowPolicy_FullMethodName, auth.Rule{Credential: principal.APIKey, AdminRole: true, Session: true, StepUp: true}},
		{verificationv1.VerificationService_CheckWorkflowCode_FullMethodName, auth.Rule{Credential: principal.APIKey}},
		{connectv1.ConnectService_CreateIntegration_FullMethodName, auth.Rule{Credential: principal.APIKey, AdminRole: true, Feature: "CONNECT", Session: true, StepUp: true}},
		{connectv1.ConnectService_UploadImport_FullMethodName, auth.Rule{Credential: principal.APIKey, Feature: "CONNECT", Session: true}},
		{accountsv1.PeopleService_DeletePasskey_FullMethodName, auth.Rule{Credential: principal.Session, AllowSuspended: true, StepUp: true}},
		{accountsv1.PeopleService_RenamePasskey_FullMethodName, auth.Rule{Credential: principal.Session, AllowSuspended: true}},
	}
	for _, tt := range tests {
		if got := p[tt.method]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.method, got, tt.want)
		}
	}
	if n := len(p); n != 109 { // every RPC of the five services above
		t.Errorf("%d rules", n)
	}
}

// TestFeatureGate: a method whose rule names a product is refused, before its handler runs,
// to a client without it, with the answer the handlers used to give.
func TestFeatureGate(t *testing.T) {
	const mConnect, mPlain = "/test.Svc/Connect", "/test.Svc/Plain"
	g := auth.NewGuard(auth.Policy{
		mConnect: {Credential: principal.APIKey, Feature: "CONNECT"},
		mPlain:   {Credential: principal.APIKey},
	}, nil, auth.NewServiceTokens(callers, ""))
	tests := []struct {
		name     string
		method   string
		features []string
		wantCode codes.Code
	}{
		{"with the product", mConnect, []string{"VERIFY", "CONNECT"}, codes.OK},
		{"without it", mConnect, []string{"VERIFY"}, codes.InvalidArgument},
		{"without any", mConnect, nil, codes.InvalidArgument},
		{"a method that needs none", mPlain, nil, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := principal.WithPrincipal(context.Background(), principal.Principal{ClientID: "c", Features: tt.features})
			ran := false
			handler := func(context.Context, any) (any, error) { ran = true; return "ok", nil }
			_, err := g.FeatureUnaryInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: tt.method}, handler)
			if code := status.Code(err); code != tt.wantCode || ran != (tt.wantCode == codes.OK) {
				t.Fatalf("err %v, handler ran %v", err, ran)
			}
			serr := g.FeatureStreamInterceptor()(nil, streamWith(ctx), &grpc.StreamServerInfo{FullMethod: tt.method},
				func(any, grpc.ServerStream) error { return nil })
			if code := status.Code(serr); code != tt.wantCode {
				t.Fatalf("stream: %v", serr)
			}
			if err == nil {
				return
			}
			if d := apierr.Parse(err); d.Reason != fault.FeatureNotEnabled || d.Field != "" || d.Message != "Connect is not enabled for this account" {
				t.Errorf("refusal %+v", d)
			}
		})
	}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

func streamWith(ctx context.Context) grpc.ServerStream { return ctxStream{ctx: ctx} }
