package server

import (
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
)

// Policy is the access rule of every method of the accounts service (contract section 3).
// A method missing here is refused.
func Policy() auth.Policy {
	apiKey := auth.Rule{Credential: auth.APIKey}
	adminKey := auth.Rule{Credential: auth.APIKey, AdminRole: true}
	// The services that authenticate their callers' credentials and charge them; the gateway
	// never calls these (it forwards credentials to the services' own methods).
	services := auth.Rule{Credential: auth.Internal, Callers: []string{auth.CallerVerification, auth.CallerConnect}}
	operator := auth.Rule{Credential: auth.Admin}
	return auth.Policy{
		// A suspended client may still read its own details, and nothing else.
		accountsv1.AccountsService_GetClient_FullMethodName:          {Credential: auth.APIKey, AllowSuspended: true},
		accountsv1.AccountsService_RotateApiKey_FullMethodName:       apiKey,
		accountsv1.AccountsService_RotateClientApiKey_FullMethodName: apiKey,
		// The bootstrap proves the client with its secret, checked by the handler.
		accountsv1.AccountsService_GenerateFirstApiKey_FullMethodName: {Credential: auth.None},
		accountsv1.AccountsService_ListApiKeys_FullMethodName:         adminKey,
		accountsv1.AccountsService_CreateApiKey_FullMethodName:        adminKey,
		accountsv1.AccountsService_RevokeApiKey_FullMethodName:        adminKey,
		accountsv1.AccountsService_ListLedgerEntries_FullMethodName:   apiKey,
		accountsv1.AccountsService_CreateSdkToken_FullMethodName:      adminKey,
		accountsv1.AccountsService_ListSdkTokens_FullMethodName:       adminKey,
		accountsv1.AccountsService_RevokeSdkToken_FullMethodName:      adminKey,
		accountsv1.AccountsService_ListWebOrigins_FullMethodName:      apiKey,
		accountsv1.AccountsService_SetWebOrigins_FullMethodName:       adminKey,

		accountsv1.AccountsInternalService_Authenticate_FullMethodName:         services,
		accountsv1.AccountsInternalService_AuthenticateSdkToken_FullMethodName: services,
		accountsv1.AccountsInternalService_Debit_FullMethodName:                services,
		accountsv1.AccountsInternalService_Refund_FullMethodName:               services,
		accountsv1.AccountsInternalService_GetBalance_FullMethodName:           services,
		// Only verification checks a browser capture's origin.
		accountsv1.AccountsInternalService_CheckWebOrigin_FullMethodName: {Credential: auth.Internal, Callers: []string{auth.CallerVerification}},

		accountsv1.AccountsAdminService_CreateClient_FullMethodName:        operator,
		accountsv1.AccountsAdminService_DescribeClient_FullMethodName:      operator,
		accountsv1.AccountsAdminService_ListClients_FullMethodName:         operator,
		accountsv1.AccountsAdminService_TopUpBalance_FullMethodName:        operator,
		accountsv1.AccountsAdminService_SetClientStatus_FullMethodName:     operator,
		accountsv1.AccountsAdminService_SetClientFeatures_FullMethodName:   operator,
		accountsv1.AccountsAdminService_SetClientPrice_FullMethodName:      operator,
		accountsv1.AccountsAdminService_SetClientWebOrigins_FullMethodName: operator,
	}
}

// IdempotentMethods honour the Idempotency-Key header (contract section 4): every public method
// that creates something. A rotation's replay needs a key that still works, so clients that
// retry rotations should rotate with oldKeyGraceSeconds.
func IdempotentMethods() []string {
	return []string{
		accountsv1.AccountsService_GenerateFirstApiKey_FullMethodName,
		accountsv1.AccountsService_RotateApiKey_FullMethodName,
		accountsv1.AccountsService_RotateClientApiKey_FullMethodName,
		accountsv1.AccountsService_CreateApiKey_FullMethodName,
		accountsv1.AccountsService_CreateSdkToken_FullMethodName,
	}
}
