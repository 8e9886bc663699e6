package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/csvimport"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/paging"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Server implements ConnectService and ConnectInternalService.
type Server struct {
	connectv1.UnimplementedConnectServiceServer
	Profiles     *profiles.Service
	Imports      *imports.Service
	Integrations *integrations.Service
	Log          *zap.Logger
}

func (s *Server) fail(ctx context.Context, err error) error {
	return grpcserver.Status(ctx, s.Log, err)
}

// client is the authenticated client (the guard put it there; the feature gate has checked
// that it has Connect, as every ConnectService rule requires).
func client(ctx context.Context) string {
	p, _ := principal.FromContext(ctx)
	return p.ClientID
}

// ListProfiles lists the client's profiles (numbers masked).
func (s *Server) ListProfiles(ctx context.Context, req *connectv1.ListProfilesRequest) (*connectv1.ListProfilesResponse, error) {
	cid := client(ctx)
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Profiles.List(ctx, cid, domain.ProfileFilter{Matched: req.Matched, Source: (*domain.Source)(req.Source), Search: req.Search}, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListProfilesResponse{
		Items: mapItems(page.Items, profileToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetProfile reads a profile.
func (s *Server) GetProfile(ctx context.Context, req *connectv1.GetProfileRequest) (*connectv1.GetProfileResponse, error) {
	cid := client(ctx)
	p, err := s.Profiles.Get(ctx, cid, req.GetProfileId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.GetProfileResponse{Profile: profileToProto(p)}, nil
}

// CreateProfile stores a profile from the API.
func (s *Server) CreateProfile(ctx context.Context, req *connectv1.CreateProfileRequest) (*connectv1.CreateProfileResponse, error) {
	p, _ := principal.FromContext(ctx)
	out, err := s.Profiles.Create(ctx, p, profiles.CreateRequest{MobileNumber: req.GetMobileNumber(), Fields: profiles.Fields{
		ExternalID: req.ExternalId, FirstName: req.FirstName, LastName: req.LastName, Email: req.Email, Attributes: req.GetAttributes(),
	}})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	// The stored answer holds the profile's data: its erasure must forget it.
	idempotency.Tag(ctx, profiles.Subject(out.ID))
	return &connectv1.CreateProfileResponse{Profile: profileToProto(out)}, nil
}

// DeleteProfile erases a profile.
func (s *Server) DeleteProfile(ctx context.Context, req *connectv1.DeleteProfileRequest) (*connectv1.DeleteProfileResponse, error) {
	cid := client(ctx)
	at, err := s.Profiles.Delete(ctx, cid, req.GetProfileId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.DeleteProfileResponse{Id: req.GetProfileId(), DeletedAt: timestamppb.New(at)}, nil
}

// EnrichProfile enriches a profile, charged.
func (s *Server) EnrichProfile(ctx context.Context, req *connectv1.EnrichProfileRequest) (*connectv1.EnrichProfileResponse, error) {
	p, _ := principal.FromContext(ctx)
	// The stored answer holds the profile's data: its erasure must forget it.
	idempotency.Tag(ctx, profiles.Subject(req.GetProfileId()))
	out, err := s.Profiles.Enrich(ctx, p, req.GetProfileId(), req.GetReason())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.EnrichProfileResponse{Profile: profileToProto(out)}, nil
}

// UploadImport receives a file: a header message, then chunks.
func (s *Server) UploadImport(stream connectv1.ConnectService_UploadImportServer) error {
	ctx := stream.Context()
	cid := client(ctx)
	first, err := stream.Recv()
	if err != nil {
		return apierr.New(codes.InvalidArgument, fault.InvalidArgument, "the upload ended before it began")
	}
	head := first.GetHeader()
	if head == nil {
		return apierr.New(codes.InvalidArgument, fault.InvalidArgument, "an upload starts with its header")
	}
	job, err := s.Imports.Upload(ctx, cid, head.GetFileName(), &chunkReader{stream: stream})
	if err != nil {
		return s.fail(ctx, err)
	}
	return stream.SendAndClose(&connectv1.UploadImportResponse{Job: jobToProto(job)})
}

// chunkReader reads the chunks of an upload stream as one byte stream.
type chunkReader struct {
	stream connectv1.ConnectService_UploadImportServer
	buf    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		m, err := r.stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		r.buf = m.GetChunk()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// GetImportSample returns the sample file.
func (s *Server) GetImportSample(ctx context.Context, _ *connectv1.GetImportSampleRequest) (*connectv1.GetImportSampleResponse, error) {
	return &connectv1.GetImportSampleResponse{Content: csvimport.Sample(), FileName: csvimport.SampleFileName}, nil
}

// ListImportJobs lists the client's jobs, newest first.
func (s *Server) ListImportJobs(ctx context.Context, req *connectv1.ListImportJobsRequest) (*connectv1.ListImportJobsResponse, error) {
	cid := client(ctx)
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Imports.List(ctx, cid, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListImportJobsResponse{
		Items: mapItems(page.Items, jobToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetImportJob reads a job.
func (s *Server) GetImportJob(ctx context.Context, req *connectv1.GetImportJobRequest) (*connectv1.GetImportJobResponse, error) {
	cid := client(ctx)
	j, err := s.Imports.Get(ctx, cid, req.GetJobId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.GetImportJobResponse{Job: jobToProto(j)}, nil
}

// CreateIntegration stores an integration; its signing secret is shown this once.
func (s *Server) CreateIntegration(ctx context.Context, req *connectv1.CreateIntegrationRequest) (*connectv1.CreateIntegrationResponse, error) {
	cid := client(ctx)
	var batch *int
	if req.BatchSize != nil {
		b := int(*req.BatchSize)
		batch = &b
	}
	c, err := s.Integrations.Create(ctx, cid, integrations.CreateRequest{
		DisplayName: req.GetDisplayName(), Type: req.GetIntegrationType(), EndpointURL: req.GetEndpointUrl(),
		HTTPMethod: strings.ToUpper(req.GetHttpMethod()), APIKey: req.GetApiKey(), TriggerEvent: req.GetTriggerEvent(),
		FieldMappings: req.GetFieldMappings(), BatchSize: batch, MatchedOnly: req.MatchedOnly,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	it := integrationToProto(c.Integration)
	it.SigningSecret, it.WebhookSecret = &c.SigningSecret, &c.WebhookSecret
	return &connectv1.CreateIntegrationResponse{Integration: it}, nil
}

// ListIntegrations lists the client's integrations.
func (s *Server) ListIntegrations(ctx context.Context, req *connectv1.ListIntegrationsRequest) (*connectv1.ListIntegrationsResponse, error) {
	cid := client(ctx)
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Integrations.List(ctx, cid, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListIntegrationsResponse{
		Items: mapItems(page.Items, integrationToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetIntegration reads an integration.
func (s *Server) GetIntegration(ctx context.Context, req *connectv1.GetIntegrationRequest) (*connectv1.GetIntegrationResponse, error) {
	cid := client(ctx)
	it, err := s.Integrations.Get(ctx, cid, req.GetIntegrationId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.GetIntegrationResponse{Integration: integrationToProto(it)}, nil
}

// UpdateIntegration applies a patch.
func (s *Server) UpdateIntegration(ctx context.Context, req *connectv1.UpdateIntegrationRequest) (*connectv1.UpdateIntegrationResponse, error) {
	cid := client(ctx)
	p := req.GetPatch()
	if p == nil { // an empty body: nothing to change
		p = &connectv1.IntegrationPatch{}
	}
	var batch *int
	if p.BatchSize != nil {
		b := int(*p.BatchSize)
		batch = &b
	}
	var method *string
	if p.HttpMethod != nil {
		m := strings.ToUpper(*p.HttpMethod)
		method = &m
	}
	it, err := s.Integrations.Update(ctx, cid, req.GetIntegrationId(), integrations.Patch{
		DisplayName: p.DisplayName, EndpointURL: p.EndpointUrl, HTTPMethod: method, APIKey: p.ApiKey,
		TriggerEvent: p.TriggerEvent, Status: (*domain.IntegrationStatus)(p.Status), FieldMappings: p.GetFieldMappings(), BatchSize: batch, MatchedOnly: p.MatchedOnly,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.UpdateIntegrationResponse{Integration: integrationToProto(it)}, nil
}

// DeleteIntegration removes an integration.
func (s *Server) DeleteIntegration(ctx context.Context, req *connectv1.DeleteIntegrationRequest) (*connectv1.DeleteIntegrationResponse, error) {
	cid := client(ctx)
	if err := s.Integrations.Delete(ctx, cid, req.GetIntegrationId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.DeleteIntegrationResponse{Id: req.GetIntegrationId()}, nil
}

// SyncIntegration queues every profile for delivery now.
func (s *Server) SyncIntegration(ctx context.Context, req *connectv1.SyncIntegrationRequest) (*connectv1.SyncIntegrationResponse, error) {
	cid := client(ctx)
	n, err := s.Integrations.Sync(ctx, cid, req.GetIntegrationId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.SyncIntegrationResponse{IntegrationId: req.GetIntegrationId(), QueuedRecords: n}, nil
}

// ListSyncHistory lists an integration's delivery attempts, newest first.
func (s *Server) ListSyncHistory(ctx context.Context, req *connectv1.ListSyncHistoryRequest) (*connectv1.ListSyncHistoryResponse, error) {
	cid := client(ctx)
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Integrations.History(ctx, cid, req.GetIntegrationId(), (*domain.SyncStatus)(req.Status), pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListSyncHistoryResponse{
		Items: mapItems(page.Items, syncEventToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetOverview reads the client's indicators.
func (s *Server) GetOverview(ctx context.Context, _ *connectv1.GetOverviewRequest) (*connectv1.GetOverviewResponse, error) {
	cid := client(ctx)
	o, err := s.Profiles.Overview(ctx, cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.GetOverviewResponse{Overview: &connectv1.Overview{
		Profiles:     &connectv1.Overview_Profiles{Total: o.Profiles, Matched: o.Matched, Enriched: o.Enriched},
		Integrations: &connectv1.Overview_Integrations{Total: o.Integrations, Active: o.Active},
		Imports:      &connectv1.Overview_Imports{Total: o.Imports, Running: o.RunningImports, LastCompletedAt: tsOrNil(o.LastImportCompletedAt)},
		Syncs:        &connectv1.Overview_Syncs{Last24H: &connectv1.Overview_SyncCounts{Succeeded: o.SyncsSucceeded, Failed: o.SyncsFailed}},
		Credits:      &connectv1.Overview_Credits{Balance: o.Balance},
	}}, nil
}

// Internal implements ConnectInternalService.
type Internal struct {
	connectv1.UnimplementedConnectInternalServiceServer
	Profiles *profiles.Service
	// Events accepts the events of other services (PublishEvents, internal.go).
	Events EventIntake
	Log    *zap.Logger
}

// RecordVerifiedNumbers marks the profiles of verified numbers matched.
func (s *Internal) RecordVerifiedNumbers(ctx context.Context, req *connectv1.RecordVerifiedNumbersRequest) (*connectv1.RecordVerifiedNumbersResponse, error) {
	items := make([]domain.VerifiedNumber, 0, len(req.GetItems()))
	for _, it := range req.GetItems() {
		if _, ok := principal.ParseClientID(it.GetClientId()); !ok || len(it.GetNumberHash()) != 32 || it.GetVerifiedAt() == nil {
			return nil, apierr.Invalid("items", "each item needs a client id, a 32-byte number hash and a time")
		}
		items = append(items, domain.VerifiedNumber{
			ClientID: it.GetClientId(), NumberHash: it.GetNumberHash(), VerificationID: it.GetVerificationId(), VerifiedAt: it.GetVerifiedAt().AsTime(),
		})
	}
	n, err := s.Profiles.RecordVerified(ctx, items)
	if err != nil {
		return nil, grpcserver.Status(ctx, s.Log, err)
	}
	return &connectv1.RecordVerifiedNumbersResponse{MatchedProfiles: n}, nil
}

func tsOrNil(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func mapItems[T, P any](in []T, f func(T) P) []P {
	out := make([]P, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}
