package server

import (
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

var serviceTypes = enumtable.New(map[operators.Method]verificationv1.ServiceType{
	operators.MethodHeaderEnrichment: verificationv1.ServiceType_SERVICE_TYPE_HEADER_ENRICHMENT,
	operators.MethodNetworkAPI:       verificationv1.ServiceType_SERVICE_TYPE_NETWORK_API,
})

var captureStatuses = enumtable.New(map[domain.Status]verificationv1.CaptureStatus{
	domain.Captured:             verificationv1.CaptureStatus_CAPTURE_STATUS_CAPTURED,
	domain.NoNetworkIdentity:    verificationv1.CaptureStatus_CAPTURE_STATUS_NO_NETWORK_IDENTITY,
	domain.AuthorizationPending: verificationv1.CaptureStatus_CAPTURE_STATUS_AUTHORIZATION_PENDING,
})

// verificationStatuses are the outcomes a client sees; PENDING and REJECTED stay inside (a
// listed verification is settled).
var verificationStatuses = enumtable.New(map[domain.Status]verificationv1.VerificationStatus{
	domain.StatusVerified:     verificationv1.VerificationStatus_VERIFICATION_STATUS_VERIFIED,
	domain.StatusNotVerified:  verificationv1.VerificationStatus_VERIFICATION_STATUS_NOT_VERIFIED,
	domain.StatusUndetermined: verificationv1.VerificationStatus_VERIFICATION_STATUS_UNDETERMINED,
	domain.StatusExpired:      verificationv1.VerificationStatus_VERIFICATION_STATUS_EXPIRED,
})

var transactionStatuses = enumtable.New(map[domain.Status]verificationv1.TransactionStatus{
	domain.TransactionPending:   verificationv1.TransactionStatus_TRANSACTION_STATUS_PENDING,
	domain.Captured:             verificationv1.TransactionStatus_TRANSACTION_STATUS_CAPTURED,
	domain.NoNetworkIdentity:    verificationv1.TransactionStatus_TRANSACTION_STATUS_NO_NETWORK_IDENTITY,
	domain.TransactionExpired:   verificationv1.TransactionStatus_TRANSACTION_STATUS_EXPIRED,
	domain.AuthorizationPending: verificationv1.TransactionStatus_TRANSACTION_STATUS_AUTHORIZATION_PENDING,
})
