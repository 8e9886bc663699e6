package server

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/enumtable"
)

var profileSources = enumtable.New(map[domain.Source]connectv1.ProfileSource{
	domain.SourceImport:       connectv1.ProfileSource_PROFILE_SOURCE_IMPORT,
	domain.SourceAPI:          connectv1.ProfileSource_PROFILE_SOURCE_API,
	domain.SourceVerification: connectv1.ProfileSource_PROFILE_SOURCE_VERIFICATION,
})

var importStatuses = enumtable.New(map[domain.ImportStatus]connectv1.ImportStatus{
	domain.ImportQueued:    connectv1.ImportStatus_IMPORT_STATUS_QUEUED,
	domain.ImportRunning:   connectv1.ImportStatus_IMPORT_STATUS_RUNNING,
	domain.ImportCompleted: connectv1.ImportStatus_IMPORT_STATUS_COMPLETED,
	domain.ImportFailed:    connectv1.ImportStatus_IMPORT_STATUS_FAILED,
})

var integrationStatuses = enumtable.New(map[domain.IntegrationStatus]connectv1.IntegrationStatus{
	domain.IntegrationActive: connectv1.IntegrationStatus_INTEGRATION_STATUS_ACTIVE,
	domain.IntegrationPaused: connectv1.IntegrationStatus_INTEGRATION_STATUS_PAUSED,
})

var syncStatuses = enumtable.New(map[domain.SyncStatus]connectv1.SyncStatus{
	domain.SyncSucceeded: connectv1.SyncStatus_SYNC_STATUS_SUCCEEDED,
	domain.SyncFailed:    connectv1.SyncStatus_SYNC_STATUS_FAILED,
	domain.SyncRetrying:  connectv1.SyncStatus_SYNC_STATUS_RETRYING,
})

// disabledReasons: an enabled endpoint has none ("" reads as UNSPECIFIED, which the API shows
// as null).
var disabledReasons = enumtable.New(map[domain.DisabledReason]connectv1.WebhookDisabledReason{
	domain.WebhookDisabledByClient:   connectv1.WebhookDisabledReason_WEBHOOK_DISABLED_REASON_CLIENT,
	domain.WebhookDisabledByOperator: connectv1.WebhookDisabledReason_WEBHOOK_DISABLED_REASON_OPERATOR,
	domain.WebhookDisabledFailing:    connectv1.WebhookDisabledReason_WEBHOOK_DISABLED_REASON_FAILING,
})

var deliveryStatuses = enumtable.New(map[domain.DeliveryStatus]connectv1.WebhookDeliveryStatus{
	domain.DeliveryPending:   connectv1.WebhookDeliveryStatus_WEBHOOK_DELIVERY_STATUS_PENDING,
	domain.DeliverySucceeded: connectv1.WebhookDeliveryStatus_WEBHOOK_DELIVERY_STATUS_SUCCEEDED,
	domain.DeliveryFailed:    connectv1.WebhookDeliveryStatus_WEBHOOK_DELIVERY_STATUS_FAILED,
	domain.DeliveryCancelled: connectv1.WebhookDeliveryStatus_WEBHOOK_DELIVERY_STATUS_CANCELLED,
})

func profileToProto(p domain.Profile) *connectv1.Profile {
	out := &connectv1.Profile{
		Id: p.ID, ExternalId: p.ExternalID, FirstName: p.FirstName, LastName: p.LastName, Email: p.Email,
		MobileNumberMasked: p.NumberMasked, CountryCode: p.CountryCode, Matched: p.MatchedAt != nil, MatchedAt: tsOrNil(p.MatchedAt),
		Source:     profileSources.Enum(p.Source),
		Attributes: p.Attributes, CreatedAt: timestamppb.New(p.CreatedAt), UpdatedAt: timestamppb.New(p.UpdatedAt),
	}
	if e := p.Enrichment; e != nil {
		out.Enrichment = &connectv1.Enrichment{
			Carrier: e.Carrier, LineType: e.LineType, Region: e.Region, CountryCode: e.CountryCode, Valid: e.Valid,
			LastVerifiedAt: tsOrNil(e.LastVerifiedAt), EnrichedAt: timestamppb.New(e.EnrichedAt),
		}
	}
	return out
}

func jobToProto(j domain.ImportJob) *connectv1.ImportJob {
	errs := make([]*connectv1.ImportError, 0, len(j.Errors))
	for _, e := range j.Errors {
		errs = append(errs, &connectv1.ImportError{Row: int32(e.Row), Column: e.Column, Message: e.Message})
	}
	return &connectv1.ImportJob{
		Id: j.ID, FileName: j.FileName, Status: importStatuses.Enum(j.Status),
		TotalRows: j.TotalRows, ImportedRows: j.ImportedRows, UpdatedRows: j.UpdatedRows, FailedRows: j.FailedRows,
		Errors: errs, Failure: j.Failure, CreatedAt: timestamppb.New(j.CreatedAt), StartedAt: tsOrNil(j.StartedAt), FinishedAt: tsOrNil(j.FinishedAt),
		FileSizeBytes: j.SizeBytes, BytesProcessed: j.BytesProcessed, PercentComplete: imports.PercentComplete(j),
		EstimatedCompletionAt: tsOrNil(imports.EstimatedCompletion(j)),
	}
}

func integrationToProto(it domain.Integration) *connectv1.Integration {
	return &connectv1.Integration{
		Id: it.ID, DisplayName: it.DisplayName, IntegrationType: it.Type, EndpointUrl: it.EndpointURL, HttpMethod: it.HTTPMethod,
		ApiKeyConfigured: it.APIKeySealed != nil, TriggerEvent: it.TriggerEvent, FieldMappings: it.FieldMappings,
		BatchSize: int32(it.BatchSize), MatchedOnly: it.MatchedOnly,
		Status:    integrationStatuses.Enum(it.Status),
		CreatedAt: timestamppb.New(it.CreatedAt), UpdatedAt: timestamppb.New(it.UpdatedAt),
	}
}

func syncEventToProto(e domain.SyncEvent) *connectv1.SyncEvent {
	out := &connectv1.SyncEvent{
		Id: e.ID, IntegrationId: e.IntegrationID, Trigger: e.Trigger,
		Status:      syncStatuses.Enum(e.Status),
		RecordCount: int32(e.RecordCount), Error: e.Error, Attempt: int32(e.Attempt), DurationMs: e.Duration.Milliseconds(),
		StartedAt: timestamppb.New(e.StartedAt), FinishedAt: timestamppb.New(e.FinishedAt), DeliveryId: e.DeliveryID,
	}
	if e.HTTPStatus != nil {
		s := int32(*e.HTTPStatus)
		out.HttpStatus = &s
	}
	return out
}
