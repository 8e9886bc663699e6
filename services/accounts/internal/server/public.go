package server

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/accounts/internal/reports"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/paging"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/usage/usagepb"
)

// Deps are what the handlers call.
type Deps struct {
	Clients     *clients.Service
	Credentials *credentials.Service
	Ledger      *billing.Ledger
	People      *people.Service
	Reports     *reports.Service
	Log         *zap.Logger
	// Now is the clock of derived fields (balanceValid, daysUntilBalanceExpiry).
	Now func() time.Time
}

// fail turns a handler's error into its gRPC status (logging the unexpected ones).
func (d *Deps) fail(ctx context.Context, err error) error { return grpcserver.Status(ctx, d.Log, err) }

// Public implements AccountsService, the API a client calls about itself.
type Public struct {
	accountsv1.UnimplementedAccountsServiceServer
	Deps
}

// principal is set by the auth interceptor for every method whose rule needs a client.
func principalOf(ctx context.Context) principal.Principal {
	p, _ := principal.FromContext(ctx)
	return p
}

// GetClient answers GET /v1/api/clients: the client's details and balance.
func (s *Public) GetClient(ctx context.Context, _ *accountsv1.GetClientRequest) (*accountsv1.GetClientResponse, error) {
	c, err := s.Clients.Get(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetClientResponse{Client: clientToProto(c, s.Now())}, nil
}

// GetMe tells the caller who it is: its client and the key it called with.
func (s *Public) GetMe(ctx context.Context, _ *accountsv1.GetMeRequest) (*accountsv1.GetMeResponse, error) {
	p := principalOf(ctx)
	c, err := s.Clients.Get(ctx, p.ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	k, err := s.Credentials.CallerKey(ctx, p)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetMeResponse{
		ClientId: c.ID, ClientName: c.Name, ClientStatus: statusToProto(c.Status),
		EnabledFeatures: featuresToProto(c.Features), ApiKey: keyToProto(k),
	}, nil
}

// RotateApiKey rotates the key it is called with, at /v1/api/clients/rotate-key and
// /v1/api/me/api-key/rotate (docs/api-decisions.md#credentials).
func (s *Public) RotateApiKey(ctx context.Context, req *accountsv1.RotateApiKeyRequest) (*accountsv1.RotateApiKeyResponse, error) {
	key, err := s.rotate(ctx, req.GetSecretKey(), req.OldKeyGraceSeconds)
	if err != nil {
		return nil, err
	}
	return &accountsv1.RotateApiKeyResponse{NewApiKey: key}, nil
}

// RotateClientApiKey answers POST /v1/api/clients/{clientId}/rotate-key: another client's id
// is NOT_FOUND.
func (s *Public) RotateClientApiKey(ctx context.Context, req *accountsv1.RotateClientApiKeyRequest) (*accountsv1.RotateClientApiKeyResponse, error) {
	if id, ok := principal.ParseClientID(req.GetClientId()); !ok || id != principalOf(ctx).ClientID {
		return nil, s.fail(ctx, fault.ErrNotFound)
	}
	key, err := s.rotate(ctx, req.GetSecretKey(), req.OldKeyGraceSeconds)
	if err != nil {
		return nil, err
	}
	return &accountsv1.RotateClientApiKeyResponse{NewApiKey: key}, nil
}

func (s *Public) rotate(ctx context.Context, secret string, graceSeconds *int32) (string, error) {
	var grace time.Duration
	if graceSeconds != nil {
		grace = time.Duration(*graceSeconds) * time.Second
	}
	issued, err := s.Credentials.Rotate(ctx, principalOf(ctx), secret, grace)
	if err != nil {
		return "", s.fail(ctx, err)
	}
	return issued.Secret, nil
}

// GenerateFirstApiKey answers POST /v1/api/me/api-key/generate: the client proves itself with
// x-client-id and its secret, since it has no key yet.
func (s *Public) GenerateFirstApiKey(ctx context.Context, req *accountsv1.GenerateFirstApiKeyRequest) (*accountsv1.GenerateFirstApiKeyResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get(principal.MDClientID)
	if len(ids) != 1 {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	clientID, ok := principal.ParseClientID(ids[0])
	if !ok {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	issued, err := s.Credentials.GenerateFirstKey(ctx, clientID, req.GetSecretKey())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GenerateFirstApiKeyResponse{ApiKey: issued.Secret}, nil
}

// ListApiKeys lists the client's usable keys.
func (s *Public) ListApiKeys(ctx context.Context, req *accountsv1.ListApiKeysRequest) (*accountsv1.ListApiKeysResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	keys, total, err := s.Credentials.ListKeys(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListApiKeysResponse{
		Items: mapItems(keys, keyToProto), Page: pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total),
	}, nil
}

// CreateApiKey issues a further key.
func (s *Public) CreateApiKey(ctx context.Context, req *accountsv1.CreateApiKeyRequest) (*accountsv1.CreateApiKeyResponse, error) {
	issued, err := s.Credentials.CreateKey(ctx, principalOf(ctx), req.GetName(), roleFromProto(req.GetRole()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	k := keyToProto(issued.Key)
	return &accountsv1.CreateApiKeyResponse{
		Id: k.Id, Name: k.Name, Role: k.Role, Hint: k.Hint, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt, ApiKey: issued.Secret,
	}, nil
}

// RotateApiKeyById rotates a key of the client by its id (the console's rotation).
func (s *Public) RotateApiKeyById(ctx context.Context, req *accountsv1.RotateApiKeyByIdRequest) (*accountsv1.RotateApiKeyByIdResponse, error) {
	grace := time.Duration(min(max(req.GetOldKeyGraceSeconds(), -1), int32(credentials.MaxGrace/time.Second)+1)) * time.Second
	issued, until, err := s.Credentials.RotateByID(ctx, principalOf(ctx).ClientID, req.GetKeyId(), grace)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	k := keyToProto(issued.Key)
	return &accountsv1.RotateApiKeyByIdResponse{
		ApiKey: &accountsv1.CreateApiKeyResponse{
			Id: k.Id, Name: k.Name, Role: k.Role, Hint: k.Hint, CreatedAt: k.CreatedAt,
			LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt, ApiKey: issued.Secret,
		},
		OldKeyValidUntil: tsOrNil(until),
	}, nil
}

// RevokeApiKey revokes a key of the client.
func (s *Public) RevokeApiKey(ctx context.Context, req *accountsv1.RevokeApiKeyRequest) (*accountsv1.RevokeApiKeyResponse, error) {
	k, err := s.Credentials.RevokeKey(ctx, principalOf(ctx).ClientID, req.GetKeyId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RevokeApiKeyResponse{ApiKey: keyToProto(k)}, nil
}

// ListLedgerEntries lists the client's ledger.
func (s *Public) ListLedgerEntries(ctx context.Context, req *accountsv1.ListLedgerEntriesRequest) (*accountsv1.ListLedgerEntriesResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	entries, total, err := s.Ledger.ListLedger(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListLedgerEntriesResponse{
		Items: mapItems(entries, entryToProto), Page: pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total),
	}, nil
}

// GetSpendUsage sums the client's ledger per day and kind (docs/api-decisions.md#usage).
func (s *Public) GetSpendUsage(ctx context.Context, req *accountsv1.GetSpendUsageRequest) (*accountsv1.GetSpendUsageResponse, error) {
	rep, err := s.Reports.Spend(ctx, principalOf(ctx).ClientID, req.From, req.To)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetSpendUsageResponse{Usage: usagepb.ToProto(rep)}, nil
}

// CreateSdkToken issues an SDK token.
func (s *Public) CreateSdkToken(ctx context.Context, req *accountsv1.CreateSdkTokenRequest) (*accountsv1.CreateSdkTokenResponse, error) {
	var ttl *time.Duration
	if req.TtlSeconds != nil {
		// Bounded before multiplying, so a huge value cannot overflow into a valid one.
		secs := min(max(*req.TtlSeconds, -1), int64(credentials.MaxSDKTokenTTL/time.Second)+1)
		d := time.Duration(secs) * time.Second
		ttl = &d
	}
	issued, err := s.Credentials.CreateSDKToken(ctx, principalOf(ctx).ClientID, req.GetLabel(), ttl)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	t := tokenToProto(issued.Token)
	return &accountsv1.CreateSdkTokenResponse{
		Id: t.Id, Label: t.Label, Hint: t.Hint, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, SdkToken: issued.Secret,
	}, nil
}

// ListSdkTokens lists the client's usable SDK tokens.
func (s *Public) ListSdkTokens(ctx context.Context, req *accountsv1.ListSdkTokensRequest) (*accountsv1.ListSdkTokensResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	tokens, total, err := s.Credentials.ListSDKTokens(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListSdkTokensResponse{
		Items: mapItems(tokens, tokenToProto), Page: pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total),
	}, nil
}

// RevokeSdkToken revokes an SDK token of the client.
func (s *Public) RevokeSdkToken(ctx context.Context, req *accountsv1.RevokeSdkTokenRequest) (*accountsv1.RevokeSdkTokenResponse, error) {
	t, err := s.Credentials.RevokeSDKToken(ctx, principalOf(ctx).ClientID, req.GetTokenId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RevokeSdkTokenResponse{SdkToken: tokenToProto(t)}, nil
}

// ListWebOrigins lists the origins allowed to capture the client's browser flows.
func (s *Public) ListWebOrigins(ctx context.Context, _ *accountsv1.ListWebOriginsRequest) (*accountsv1.ListWebOriginsResponse, error) {
	origins, err := s.Clients.WebOrigins(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListWebOriginsResponse{Items: mapItems(origins, webOriginToProto)}, nil
}

// SetWebOrigins replaces the client's allowed origins.
func (s *Public) SetWebOrigins(ctx context.Context, req *accountsv1.SetWebOriginsRequest) (*accountsv1.SetWebOriginsResponse, error) {
	origins, err := s.Clients.SetWebOrigins(ctx, principalOf(ctx).ClientID, req.GetOrigins())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetWebOriginsResponse{Items: mapItems(origins, webOriginToProto)}, nil
}

// ListRedirectUris lists the client's registered redirect URIs.
func (s *Public) ListRedirectUris(ctx context.Context, _ *accountsv1.ListRedirectUrisRequest) (*accountsv1.ListRedirectUrisResponse, error) {
	uris, err := s.Clients.RedirectURIs(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListRedirectUrisResponse{Items: mapItems(uris, redirectURIToProto)}, nil
}

// SetRedirectUris replaces the client's registered redirect URIs.
func (s *Public) SetRedirectUris(ctx context.Context, req *accountsv1.SetRedirectUrisRequest) (*accountsv1.SetRedirectUrisResponse, error) {
	uris, err := s.Clients.SetRedirectURIs(ctx, principalOf(ctx).ClientID, req.GetRedirectUris())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetRedirectUrisResponse{Items: mapItems(uris, redirectURIToProto)}, nil
}

// GetLowBalanceThreshold reads the client's threshold of balance.low.
func (s *Public) GetLowBalanceThreshold(ctx context.Context, _ *accountsv1.GetLowBalanceThresholdRequest) (*accountsv1.GetLowBalanceThresholdResponse, error) {
	c, err := s.Clients.Get(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetLowBalanceThresholdResponse{LowBalanceThreshold: s.lowBalanceToProto(c)}, nil
}

// SetLowBalanceThreshold sets or clears the client's own threshold of balance.low: the
// operator's SetClientLowBalanceThreshold on the caller's client, one rule for both.
func (s *Public) SetLowBalanceThreshold(ctx context.Context, req *accountsv1.SetLowBalanceThresholdRequest) (*accountsv1.SetLowBalanceThresholdResponse, error) {
	c, err := s.Clients.SetLowBalanceThreshold(ctx, principalOf(ctx).ClientID, req.Threshold)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetLowBalanceThresholdResponse{LowBalanceThreshold: s.lowBalanceToProto(c)}, nil
}

// ListPrices lists what each paid operation costs the client: the configured prices with its
// own over them, as the ledger charges them.
func (s *Public) ListPrices(ctx context.Context, _ *accountsv1.ListPricesRequest) (*accountsv1.ListPricesResponse, error) {
	prices, err := s.Ledger.Prices(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListPricesResponse{Items: pricesToProto(prices)}, nil
}
