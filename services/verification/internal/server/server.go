package server

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/paging"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/usage/usagepb"
	"github.com/mnvhq/mnv/services/verification/internal/browser"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/reports"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// Server implements VerificationService.
type Server struct {
	verificationv1.UnimplementedVerificationServiceServer
	Sessions  *sessions.Service
	Browser   *browser.Service
	Verifier  *verify.Service
	StuckPlus *stuckplus.Service
	Reports   *reports.Service
	Workflows *workflows.Service
	// NumberHeaders are the registry's number headers, read from the gateway's metadata.
	NumberHeaders []string
	// Sandbox is MNV_SANDBOX: only then is a client with the SANDBOX feature a sandbox client
	// to the pumping controls (its codes go to the sandbox SMSC, its allow-list is not asked).
	// In production no feature lets a client text the world.
	Sandbox bool
	Log     *zap.Logger
}

func (s *Server) fail(ctx context.Context, err error) error {
	return grpcserver.Status(ctx, s.Log, err)
}

func principalOf(ctx context.Context) principal.Principal {
	p, _ := principal.FromContext(ctx)
	return p
}

// ListOperators lists the operators the client may use.
func (s *Server) ListOperators(ctx context.Context, _ *verificationv1.ListOperatorsRequest) (*verificationv1.ListOperatorsResponse, error) {
	ops := s.Sessions.Operators(principalOf(ctx))
	out := make([]*verificationv1.Operator, 0, len(ops))
	for _, op := range ops {
		types := make([]verificationv1.ServiceType, 0, len(op.Methods))
		for _, m := range op.Methods {
			types = append(types, serviceTypes.Enum(m))
		}
		out = append(out, &verificationv1.Operator{
			Id: op.ID, Name: op.Name, Country: op.Country, MccMnc: op.MCCMNC, ServiceTypes: types, Sandbox: op.Sandbox,
		})
	}
	return &verificationv1.ListOperatorsResponse{Items: out}, nil
}

// CreateSdkSession captures the number of an app's request.
func (s *Server) CreateSdkSession(ctx context.Context, req *verificationv1.CreateSdkSessionRequest) (*verificationv1.CreateSdkSessionResponse, error) {
	platform := ""
	if req.GetPlatform() != verificationv1.Platform_PLATFORM_UNSPECIFIED {
		platform = strings.TrimPrefix(req.GetPlatform().String(), "PLATFORM_")
	}
	c, err := s.Sessions.Create(ctx, principalOf(ctx), sessions.Request{
		OperatorID: req.OperatorId, Platform: platform, DeviceID: req.DeviceId, AppVersion: req.AppVersion,
	}, networkOf(ctx, s.NumberHeaders))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return sessionToProto(c), nil
}

// CompleteSessionAuthorization finishes a NETWORK_API session, an SDK session's or a browser
// capture's, with the operator's redirect (called by the gateway only).
func (s *Server) CompleteSessionAuthorization(ctx context.Context, req *verificationv1.CompleteSessionAuthorizationRequest) (*verificationv1.CompleteSessionAuthorizationResponse, error) {
	c, err := s.Browser.CompleteAuthorization(ctx, sessions.Authorization{State: req.GetState(), Code: req.GetCode(), Error: req.GetError()})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if c.Transaction != nil {
		// The browser goes back to its page, which reads the transaction there; the blob is
		// the transaction's, for the client's backend.
		return &verificationv1.CompleteSessionAuthorizationResponse{RedirectUrl: &c.Redirect}, nil
	}
	p := sessionToProto(c.Capture)
	return &verificationv1.CompleteSessionAuthorizationResponse{
		SessionId: p.SessionId, Status: p.Status, EncryptedMobileNumber: p.EncryptedMobileNumber,
		OperatorId: p.OperatorId, ExpiresAt: p.ExpiresAt, AuthorizationUrl: p.AuthorizationUrl,
	}, nil
}

func sessionToProto(c sessions.Capture) *verificationv1.CreateSdkSessionResponse {
	out := &verificationv1.CreateSdkSessionResponse{
		SessionId: c.SessionID, Status: captureStatuses.Enum(c.Status), OperatorId: c.OperatorID, ExpiresAt: timestamppb.New(c.ExpiresAt),
	}
	if c.Blob != "" {
		out.EncryptedMobileNumber = &c.Blob
	}
	if c.AuthorizationURL != "" {
		out.AuthorizationUrl = &c.AuthorizationURL
	}
	return out
}

// Verify decides a verification.
func (s *Server) Verify(ctx context.Context, req *verificationv1.VerifyRequest) (*verificationv1.VerifyResponse, error) {
	r, err := s.Verifier.Verify(ctx, principalOf(ctx), verify.Request{
		MobileNumber: req.GetMobileNumber(), Blob: req.GetEncryptedMobileNumber(),
		OperatorID: req.GetOperatorId(), ServiceType: req.GetServiceType(),
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.VerifyResponse{Verification: verificationToProto(r.Verification, r.MobileNumber)}, nil
}

// GetVerification reads a kept verification (number masked).
func (s *Server) GetVerification(ctx context.Context, req *verificationv1.GetVerificationRequest) (*verificationv1.GetVerificationResponse, error) {
	v, err := s.Verifier.Get(ctx, principalOf(ctx).ClientID, req.GetVerificationId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetVerificationResponse{Verification: verificationToProto(v, s.Verifier.Masked(v))}, nil
}

// ListVerifications lists kept verifications (numbers masked), newest first.
func (s *Server) ListVerifications(ctx context.Context, req *verificationv1.ListVerificationsRequest) (*verificationv1.ListVerificationsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	f := domain.VerificationFilter{
		Status: (*domain.Status)(req.Status), From: timeOrNil(req.GetFrom()), To: timeOrNil(req.GetTo()),
		Reason: req.Reason, OperatorID: req.OperatorId, Method: req.ServiceType,
	}
	page, err := s.Verifier.List(ctx, principalOf(ctx).ClientID, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	items := make([]*verificationv1.Verification, 0, len(page.Items))
	for _, v := range page.Items {
		items = append(items, verificationToProto(v, s.Verifier.Masked(v)))
	}
	return &verificationv1.ListVerificationsResponse{
		Items: items, Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetVerificationUsage counts the client's verifications per day (docs/api-decisions.md#usage).
func (s *Server) GetVerificationUsage(ctx context.Context, req *verificationv1.GetVerificationUsageRequest) (*verificationv1.GetVerificationUsageResponse, error) {
	rep, err := s.Reports.Verifications(ctx, principalOf(ctx).ClientID, req.From, req.To, req.Operator)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetVerificationUsageResponse{Usage: usagepb.ToProto(rep)}, nil
}

// CreateTransaction starts a browser flow.
func (s *Server) CreateTransaction(ctx context.Context, req *verificationv1.CreateTransactionRequest) (*verificationv1.CreateTransactionResponse, error) {
	t, err := s.Browser.CreateTransaction(ctx, principalOf(ctx), req.GetServiceCode(), req.GetMetadataId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.CreateTransactionResponse{Transaction: transactionToProto(t)}, nil
}

// GetTransaction resolves a browser flow.
func (s *Server) GetTransaction(ctx context.Context, req *verificationv1.GetTransactionRequest) (*verificationv1.GetTransactionResponse, error) {
	t, err := s.Browser.GetTransaction(ctx, principalOf(ctx).ClientID, req.GetTransactionId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.GetTransactionResponse{Transaction: transactionToProto(t)}, nil
}

// CaptureTransaction captures a browser flow (called by the gateway only).
func (s *Server) CaptureTransaction(ctx context.Context, req *verificationv1.CaptureTransactionRequest) (*verificationv1.CaptureTransactionResponse, error) {
	c, err := s.Browser.CaptureTransaction(ctx, req.GetTransactionId(),
		browser.CaptureRequest{OperatorID: req.OperatorId, ReturnURL: req.ReturnUrl, CodeChallenge: req.CodeChallenge}, networkOf(ctx, s.NumberHeaders))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &verificationv1.CaptureTransactionResponse{
		TransactionId: c.ID, Status: transactionStatuses.Enum(c.Status), OperatorId: c.OperatorID,
		EncryptedMobileNumber: c.Blob, ExpiresAt: timestamppb.New(c.ExpiresAt),
	}
	if c.AuthorizationURL != "" {
		out.AuthorizationUrl = &c.AuthorizationURL
	}
	return out, nil
}

// CompleteWebTransaction completes a browser flow for its page after an operator's
// authorization (called by the gateway only).
func (s *Server) CompleteWebTransaction(ctx context.Context, req *verificationv1.CompleteWebTransactionRequest) (*verificationv1.CompleteWebTransactionResponse, error) {
	t, err := s.Browser.CompleteTransaction(ctx, req.GetTransactionId(), req.GetCode(), req.GetCodeVerifier(), networkOf(ctx, s.NumberHeaders))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.CompleteWebTransactionResponse{
		TransactionId: t.ID, Status: transactionStatuses.Enum(t.Status), OperatorId: t.OperatorID,
		EncryptedMobileNumber: t.Blob, ExpiresAt: timestamppb.New(t.ExpiresAt),
	}, nil
}

// CheckWebOrigin tells the gateway whether a page origin may call a transaction's browser
// routes (called by the gateway only, for its CORS answers).
func (s *Server) CheckWebOrigin(ctx context.Context, req *verificationv1.CheckWebOriginRequest) (*verificationv1.CheckWebOriginResponse, error) {
	ok, err := s.Browser.OriginAllowed(ctx, req.GetTransactionId(), req.GetOrigin())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.CheckWebOriginResponse{Allowed: ok}, nil
}

// ListStuckPlusSessions lists captured stuck-plus sessions (numbers masked).
func (s *Server) ListStuckPlusSessions(ctx context.Context, req *verificationv1.ListStuckPlusSessionsRequest) (*verificationv1.ListStuckPlusSessionsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.StuckPlus.List(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	items := make([]*verificationv1.StuckPlusSession, 0, len(page.Items))
	for _, sp := range page.Items {
		items = append(items, &verificationv1.StuckPlusSession{
			Id: sp.ID, TransactionId: sp.TransactionID, MetadataId: sp.MetadataID, OperatorId: sp.OperatorID,
			MobileNumberMasked: sp.NumberMasked, CreatedAt: timestamppb.New(sp.CreatedAt), RevealedAt: tsOrNil(sp.RevealedAt),
		})
	}
	return &verificationv1.ListStuckPlusSessionsResponse{
		Items: items, Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// RevealStuckPlusSession reveals a number to an ADMIN key, audited.
func (s *Server) RevealStuckPlusSession(ctx context.Context, req *verificationv1.RevealStuckPlusSessionRequest) (*verificationv1.RevealStuckPlusSessionResponse, error) {
	r, err := s.StuckPlus.Reveal(ctx, principalOf(ctx), req.GetSessionId(), req.GetReason())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &verificationv1.RevealStuckPlusSessionResponse{
		SessionId: r.Reveal.SessionID, MobileNumber: r.MobileNumber, RevealedAt: timestamppb.New(r.Reveal.CreatedAt), Charged: r.Reveal.Charged,
	}, nil
}

// ListStuckPlusReveals lists the reveal audit.
func (s *Server) ListStuckPlusReveals(ctx context.Context, req *verificationv1.ListStuckPlusRevealsRequest) (*verificationv1.ListStuckPlusRevealsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.StuckPlus.ListReveals(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	items := make([]*verificationv1.StuckPlusReveal, 0, len(page.Items))
	for _, r := range page.Items {
		items = append(items, &verificationv1.StuckPlusReveal{
			Id: r.ID, SessionId: r.SessionID, KeyId: r.KeyID, UserId: r.PersonID, Reason: r.Reason, Charged: r.Charged, CreatedAt: timestamppb.New(r.CreatedAt),
		})
	}
	return &verificationv1.ListStuckPlusRevealsResponse{
		Items: items, Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

func verificationToProto(v domain.Verification, number string) *verificationv1.Verification {
	return &verificationv1.Verification{
		VerificationId: v.ID, Status: verificationStatuses.Enum(v.Outcome), Reason: v.Reason, Verified: v.Outcome == domain.StatusVerified,
		MobileNumber: number, OperatorId: v.OperatorID, ServiceType: v.ServiceType, SessionId: v.SessionID,
		Charged: v.Charged, BalanceAfter: v.BalanceAfter, CreatedAt: timestamppb.New(v.CreatedAt),
	}
}

func transactionToProto(t domain.Transaction) *verificationv1.Transaction {
	return &verificationv1.Transaction{
		TransactionId: t.ID, Status: transactionStatuses.Enum(t.Status), ServiceCode: t.ServiceCode, MetadataId: t.MetadataID,
		ExpiresAt: timestamppb.New(t.ExpiresAt), OperatorId: t.OperatorID, EncryptedMobileNumber: t.Blob,
		StuckPlusSessionId: t.StuckPlusSessionID, CreatedAt: timestamppb.New(t.CreatedAt),
	}
}

func tsOrNil(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func timeOrNil(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}
