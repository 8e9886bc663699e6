package server

import (
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
)

// Policy is the access rule of every method of the connect service. A method missing here is
// refused. (The CONNECT feature is checked by the handlers' requireConnect.) Integration writes
// need an ADMIN key: an integration decides where profiles and the stored CRM credential are
// sent. Reads stay open to MEMBER keys.
func Policy() auth.Policy {
	apiKey := auth.Rule{Credential: auth.APIKey}
	adminKey := auth.Rule{Credential: auth.APIKey, AdminRole: true}
	return auth.Policy{
		connectv1.ConnectService_ListProfiles_FullMethodName:      apiKey,
		connectv1.ConnectService_GetProfile_FullMethodName:        apiKey,
		connectv1.ConnectService_CreateProfile_FullMethodName:     apiKey,
		connectv1.ConnectService_DeleteProfile_FullMethodName:     apiKey,
		connectv1.ConnectService_EnrichProfile_FullMethodName:     apiKey,
		connectv1.ConnectService_UploadImport_FullMethodName:      apiKey,
		connectv1.ConnectService_GetImportSample_FullMethodName:   apiKey,
		connectv1.ConnectService_ListImportJobs_FullMethodName:    apiKey,
		connectv1.ConnectService_GetImportJob_FullMethodName:      apiKey,
		connectv1.ConnectService_CreateIntegration_FullMethodName: adminKey,
		connectv1.ConnectService_ListIntegrations_FullMethodName:  apiKey,
		connectv1.ConnectService_GetIntegration_FullMethodName:    apiKey,
		connectv1.ConnectService_UpdateIntegration_FullMethodName: adminKey,
		connectv1.ConnectService_DeleteIntegration_FullMethodName: adminKey,
		connectv1.ConnectService_SyncIntegration_FullMethodName:   adminKey,
		connectv1.ConnectService_ListSyncHistory_FullMethodName:   apiKey,
		connectv1.ConnectService_GetOverview_FullMethodName:       apiKey,

		// Verified numbers come from verification's outbox relay, and from nowhere else.
		connectv1.ConnectInternalService_RecordVerifiedNumbers_FullMethodName: {Credential: auth.Internal, Callers: []string{auth.CallerVerification}},
	}
}

// IdempotentMethods honour the Idempotency-Key header: the methods that charge or create.
func IdempotentMethods() []string {
	return []string{
		connectv1.ConnectService_CreateProfile_FullMethodName,
		connectv1.ConnectService_EnrichProfile_FullMethodName,
		connectv1.ConnectService_CreateIntegration_FullMethodName,
		connectv1.ConnectService_SyncIntegration_FullMethodName,
	}
}
