package server

import (
	"context"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/paging"
)

// Admin implements AccountsAdminService, the operator's API (mnvctl).
type Admin struct {
	accountsv1.UnimplementedAccountsAdminServiceServer
	Deps
}

// CreateClient creates a client with its credentials.
func (s *Admin) CreateClient(ctx context.Context, req *accountsv1.CreateClientRequest) (*accountsv1.CreateClientResponse, error) {
	created, err := s.Clients.Create(ctx, clients.CreateRequest{
		Name: req.GetClientName(),
		Contact: domain.Contact{
			Name: req.GetContactPersonName(), Email: req.GetContactPersonEmail(), Phone: req.GetContactPhoneNumber(),
		},
		InitialBalance:   req.GetInitialBalance(),
		BalanceExpiresAt: timeOrNil(req.GetBalanceExpiresAt()),
		Features:         featuresFromProto(req.GetFeatures()),
		WithoutAPIKey:    req.GetWithoutApiKey(),
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.CreateClientResponse{
		Client: clientToProto(created.Client, s.Now()), ClientSecret: created.ClientSecret, ApiKey: created.APIKey,
	}, nil
}

// DescribeClient reads a client with its prices.
func (s *Admin) DescribeClient(ctx context.Context, req *accountsv1.DescribeClientRequest) (*accountsv1.DescribeClientResponse, error) {
	c, err := s.Clients.Get(ctx, req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	prices, err := s.Ledger.Prices(ctx, c.ID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	keys, err := s.Credentials.CountKeys(ctx, c.ID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	origins, err := s.Clients.WebOrigins(ctx, c.ID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	redirects, err := s.Clients.RedirectURIs(ctx, c.ID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.DescribeClientResponse{Details: &accountsv1.ClientDetails{
		Client: clientToProto(c, s.Now()), Prices: pricesToProto(prices), CreatedAt: ts(c.CreatedAt), ActiveApiKeys: int32(keys),
		WebOrigins: originNames(origins), LowBalanceThreshold: c.LowBalanceThreshold,
		EffectiveLowBalanceThreshold: s.effectiveLowBalance(c), Operators: operatorsToProto(c.Operators),
		RedirectUris: redirectURIs(redirects),
	}}, nil
}

// ListClients lists clients, newest first.
func (s *Admin) ListClients(ctx context.Context, req *accountsv1.ListClientsRequest) (*accountsv1.ListClientsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	cs, total, err := s.Clients.List(ctx, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	now := s.Now()
	return &accountsv1.ListClientsResponse{
		Items: mapItems(cs, func(c domain.Client) *accountsv1.Client { return clientToProto(c, now) }),
		Page:  pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total),
	}, nil
}

// TopUpBalance adds credit.
func (s *Admin) TopUpBalance(ctx context.Context, req *accountsv1.TopUpBalanceRequest) (*accountsv1.TopUpBalanceResponse, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.Ledger.TopUp(ctx, nil, billing.TopUpRequest{
		ClientID: cid, Amount: req.GetAmount(), ExpiresAt: timeOrNil(req.GetBalanceExpiresAt()),
		Reference: req.GetReference(), Description: req.Description,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	c, err := s.Clients.Get(ctx, cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.TopUpBalanceResponse{Client: clientToProto(c, s.Now()), Entry: entryToProto(res.Entry), Replayed: res.Replayed}, nil
}

// SetClientStatus activates or suspends a client.
func (s *Admin) SetClientStatus(ctx context.Context, req *accountsv1.SetClientStatusRequest) (*accountsv1.SetClientStatusResponse, error) {
	c, err := s.Clients.SetStatus(ctx, req.GetClientId(), statusFromProto(req.GetStatus()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientStatusResponse{Client: clientToProto(c, s.Now())}, nil
}

// SetClientFeatures replaces a client's features.
func (s *Admin) SetClientFeatures(ctx context.Context, req *accountsv1.SetClientFeaturesRequest) (*accountsv1.SetClientFeaturesResponse, error) {
	c, err := s.Clients.SetFeatures(ctx, req.GetClientId(), featuresFromProto(req.GetFeatures()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientFeaturesResponse{Client: clientToProto(c, s.Now())}, nil
}

// SetClientPrice sets or clears a price override.
func (s *Admin) SetClientPrice(ctx context.Context, req *accountsv1.SetClientPriceRequest) (*accountsv1.SetClientPriceResponse, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	prices, err := s.Ledger.SetPrice(ctx, cid, kindFromProto(req.GetKind()), req.GetVariant(), req.Amount)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientPriceResponse{Prices: pricesToProto(prices)}, nil
}

// SetClientWebOrigins replaces the origins allowed to capture a client's browser flows.
func (s *Admin) SetClientWebOrigins(ctx context.Context, req *accountsv1.SetClientWebOriginsRequest) (*accountsv1.SetClientWebOriginsResponse, error) {
	origins, err := s.Clients.SetWebOrigins(ctx, req.GetClientId(), req.GetOrigins())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientWebOriginsResponse{WebOrigins: originNames(origins)}, nil
}

// SetClientRedirectUris replaces the redirect URIs registered for a client's authorization
// code flow.
func (s *Admin) SetClientRedirectUris(ctx context.Context, req *accountsv1.SetClientRedirectUrisRequest) (*accountsv1.SetClientRedirectUrisResponse, error) {
	uris, err := s.Clients.SetRedirectURIs(ctx, req.GetClientId(), req.GetRedirectUris())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientRedirectUrisResponse{RedirectUris: redirectURIs(uris)}, nil
}

// SetClientOperators replaces the operators a client may use, or returns it to the default set.
func (s *Admin) SetClientOperators(ctx context.Context, req *accountsv1.SetClientOperatorsRequest) (*accountsv1.SetClientOperatorsResponse, error) {
	ops, err := operatorsFromProto(req.GetOperators())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	c, err := s.Clients.SetOperators(ctx, req.GetClientId(), ops)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientOperatorsResponse{Operators: operatorsToProto(c.Operators)}, nil
}

// SetClientLowBalanceThreshold sets or clears the client's own threshold of balance.low.
func (s *Admin) SetClientLowBalanceThreshold(ctx context.Context, req *accountsv1.SetClientLowBalanceThresholdRequest) (*accountsv1.SetClientLowBalanceThresholdResponse, error) {
	c, err := s.Clients.SetLowBalanceThreshold(ctx, req.GetClientId(), req.Threshold)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetClientLowBalanceThresholdResponse{
		LowBalanceThreshold: c.LowBalanceThreshold, EffectiveLowBalanceThreshold: s.effectiveLowBalance(c),
	}, nil
}

// effectiveLowBalance is the threshold that applies to c: its own, else the service's default.
func (d *Deps) effectiveLowBalance(c domain.Client) int64 {
	if c.LowBalanceThreshold != nil {
		return *c.LowBalanceThreshold
	}
	return d.Ledger.LowBalance
}

// lowBalanceToProto is c's threshold as the client reads it.
func (d *Deps) lowBalanceToProto(c domain.Client) *accountsv1.LowBalanceThreshold {
	return &accountsv1.LowBalanceThreshold{
		Threshold: c.LowBalanceThreshold, EffectiveThreshold: d.effectiveLowBalance(c), DefaultThreshold: d.Ledger.LowBalance,
	}
}

func originNames(origins []domain.WebOrigin) []string {
	return mapItems(origins, func(o domain.WebOrigin) string { return o.Origin })
}

func redirectURIs(uris []domain.RedirectURI) []string {
	return mapItems(uris, func(u domain.RedirectURI) string { return u.URI })
}
