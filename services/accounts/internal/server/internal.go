package server

import (
	"context"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Internal implements AccountsInternalService, called by the other mnv services.
type Internal struct {
	accountsv1.UnimplementedAccountsInternalServiceServer
	Deps
	Watch Watch
}

// clientID reads a client id field; a malformed one names no client.
func clientID(v string) (string, error) {
	id, ok := principal.ParseClientID(v)
	if !ok {
		return "", fault.Invalid("clientId", "must be a client id (UUID)")
	}
	return id, nil
}

// Authenticate resolves an API key for another service.
func (s *Internal) Authenticate(ctx context.Context, req *accountsv1.AuthenticateRequest) (*accountsv1.AuthenticateResponse, error) {
	cid := ""
	if req.GetClientId() != "" {
		var ok bool
		if cid, ok = principal.ParseClientID(req.GetClientId()); !ok {
			return nil, s.fail(ctx, principal.ErrUnauthenticated)
		}
	}
	if !principal.WellFormedAPIKey(req.GetApiKey()) {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	p, err := s.Credentials.AuthenticateAPIKey(ctx, req.GetApiKey(), cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.AuthenticateResponse{Principal: auth.PrincipalToProto(p)}, nil
}

// AuthenticateSdkToken resolves an SDK token for another service.
func (s *Internal) AuthenticateSdkToken(ctx context.Context, req *accountsv1.AuthenticateSdkTokenRequest) (*accountsv1.AuthenticateSdkTokenResponse, error) {
	cid, ok := principal.ParseClientID(req.GetClientId())
	if !ok || !principal.WellFormedSDKToken(req.GetSdkToken()) {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	p, err := s.Credentials.AuthenticateSDKToken(ctx, req.GetSdkToken(), cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.AuthenticateSdkTokenResponse{Principal: auth.PrincipalToProto(p)}, nil
}

// AuthenticateClientSecret resolves a client id and secret for verification's CAMARA token
// endpoint.
func (s *Internal) AuthenticateClientSecret(ctx context.Context, req *accountsv1.AuthenticateClientSecretRequest) (*accountsv1.AuthenticateClientSecretResponse, error) {
	cid, ok := principal.ParseClientID(req.GetClientId())
	if !ok {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	p, err := s.Credentials.AuthenticateClientSecret(ctx, cid, req.GetClientSecret())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.AuthenticateClientSecretResponse{Principal: auth.PrincipalToProto(p)}, nil
}

// GetClientPrincipal reads a client's principal for verification's CAMARA facade.
func (s *Internal) GetClientPrincipal(ctx context.Context, req *accountsv1.GetClientPrincipalRequest) (*accountsv1.GetClientPrincipalResponse, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	p, err := s.Credentials.ClientPrincipal(ctx, cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetClientPrincipalResponse{Principal: auth.PrincipalToProto(p)}, nil
}

// Debit charges a client.
func (s *Internal) Debit(ctx context.Context, req *accountsv1.DebitRequest) (*accountsv1.DebitResponse, error) {
	d, err := debitFromProto(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.Ledger.Debit(ctx, d)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return debitToProto(res), nil
}

// DebitMany charges each debit as Debit would, in their order (billing.Ledger.DebitMany): the
// call saves round trips, not rules.
func (s *Internal) DebitMany(ctx context.Context, req *accountsv1.DebitManyRequest) (*accountsv1.DebitManyResponse, error) {
	debits := req.GetDebits()
	if len(debits) == 0 || len(debits) > money.MaxDebitsPerCall {
		return nil, s.fail(ctx, fault.Invalid("debits", "must hold 1 to %d debits", money.MaxDebitsPerCall))
	}
	out := make([]*accountsv1.DebitOutcome, len(debits))
	fail := func(i int, err error) {
		e := apierr.Parse(s.fail(ctx, err))
		out[i] = &accountsv1.DebitOutcome{Result: &accountsv1.DebitOutcome_Failure{Failure: &accountsv1.DebitFailure{
			Code: uint32(e.Code), Reason: string(e.Reason), Field: e.Field, Message: e.Message,
		}}}
	}
	at := make([]int, 0, len(debits))
	reqs := make([]billing.DebitRequest, 0, len(debits))
	for i, d := range debits {
		r, err := debitFromProto(d)
		if err != nil {
			fail(i, err)
			continue
		}
		at, reqs = append(at, i), append(reqs, r)
	}
	res, errs := s.Ledger.DebitMany(ctx, reqs)
	for j, i := range at {
		if errs[j] != nil {
			fail(i, errs[j])
			continue
		}
		out[i] = &accountsv1.DebitOutcome{Result: &accountsv1.DebitOutcome_Debit{Debit: debitToProto(res[j])}}
	}
	return &accountsv1.DebitManyResponse{Outcomes: out}, nil
}

func debitFromProto(req *accountsv1.DebitRequest) (billing.DebitRequest, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return billing.DebitRequest{}, err
	}
	return billing.DebitRequest{
		ClientID: cid, Kind: kindFromProto(req.GetKind()), Variant: req.GetVariant(),
		Reference: req.GetReference(), Description: req.Description,
	}, nil
}

func debitToProto(res billing.DebitResult) *accountsv1.DebitResponse {
	return &accountsv1.DebitResponse{
		EntryId: res.Entry.ID, Charged: res.Charged, BalanceAfter: res.Entry.BalanceAfter,
		Replayed: res.Replayed, CreatedAt: ts(res.Entry.CreatedAt),
	}
}

// Refund gives a debit back.
func (s *Internal) Refund(ctx context.Context, req *accountsv1.RefundRequest) (*accountsv1.RefundResponse, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	res, err := s.Ledger.Refund(ctx, cid, req.GetReference(), req.Description)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RefundResponse{
		EntryId: res.Entry.ID, Refunded: res.Refunded, BalanceAfter: res.Entry.BalanceAfter, Replayed: res.Replayed,
	}, nil
}

// GetBalance reads a client's balance.
func (s *Internal) GetBalance(ctx context.Context, req *accountsv1.GetBalanceRequest) (*accountsv1.GetBalanceResponse, error) {
	cid, err := clientID(req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	c, err := s.Clients.Get(ctx, cid)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.GetBalanceResponse{
		Balance: c.Balance, ExpiresAt: tsOrNil(c.BalanceExpiresAt), Valid: c.BalanceValid(s.Now()),
	}, nil
}

// CheckWebOrigin tells whether a page origin may capture the client's browser flows. A client
// that does not exist allows none.
func (s *Internal) CheckWebOrigin(ctx context.Context, req *accountsv1.CheckWebOriginRequest) (*accountsv1.CheckWebOriginResponse, error) {
	ok, err := s.Clients.AllowsWebOrigin(ctx, req.GetClientId(), req.GetOrigin())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.CheckWebOriginResponse{Allowed: ok}, nil
}

// CheckRedirectUri tells whether an authorization request of the client may send its code to
// a redirect URI (one of the client's registered URIs, exactly).
func (s *Internal) CheckRedirectUri(ctx context.Context, req *accountsv1.CheckRedirectUriRequest) (*accountsv1.CheckRedirectUriResponse, error) {
	ok, registered, err := s.Clients.AllowsRedirectURI(ctx, req.GetClientId(), req.GetRedirectUri())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.CheckRedirectUriResponse{Allowed: ok, Registered: registered}, nil
}
