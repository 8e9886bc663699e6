package server

import (
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
)

// Policy is the access rule of every method of the verification service. A method missing here
// is refused.
func Policy() auth.Policy {
	apiKey := auth.Rule{Credential: auth.APIKey}
	adminKey := auth.Rule{Credential: auth.APIKey, AdminRole: true}
	return auth.Policy{
		verificationv1.VerificationService_ListOperators_FullMethodName:     apiKey,
		verificationv1.VerificationService_CreateSdkSession_FullMethodName:  {Credential: auth.SDKToken},
		verificationv1.VerificationService_Verify_FullMethodName:            apiKey,
		verificationv1.VerificationService_GetVerification_FullMethodName:   apiKey,
		verificationv1.VerificationService_ListVerifications_FullMethodName: apiKey,
		verificationv1.VerificationService_CreateOpportunity_FullMethodName: apiKey,
		verificationv1.VerificationService_GetOpportunity_FullMethodName:    apiKey,
		// The browser has no credential: the capture is bound to the client's allowed web
		// origins, and only the gateway, which resolves the client address and passes the
		// page's Origin, may present it or ask about an origin.
		verificationv1.VerificationService_CaptureWebTransaction_FullMethodName:  {Credential: auth.Internal, Callers: []string{auth.CallerGateway}},
		verificationv1.VerificationService_CheckWebOrigin_FullMethodName:         {Credential: auth.Internal, Callers: []string{auth.CallerGateway}},
		verificationv1.VerificationService_ListStuckPlusSessions_FullMethodName:  apiKey,
		verificationv1.VerificationService_RevealStuckPlusSession_FullMethodName: adminKey,
		verificationv1.VerificationService_ListStuckPlusReveals_FullMethodName:   adminKey,
	}
}

// IdempotentMethods honour the Idempotency-Key header: the methods that charge or create.
func IdempotentMethods() []string {
	return []string{
		verificationv1.VerificationService_CreateSdkSession_FullMethodName,
		verificationv1.VerificationService_Verify_FullMethodName,
		verificationv1.VerificationService_CreateOpportunity_FullMethodName,
		verificationv1.VerificationService_RevealStuckPlusSession_FullMethodName,
	}
}
