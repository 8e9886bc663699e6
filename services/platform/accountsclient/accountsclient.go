// Package accountsclient is how the other services use accounts: it authenticates callers
// (an auth.Authenticator over AccountsInternalService) and moves money with Debit and Refund,
// turning accounts' error reasons back into values the callers' rules can test.
package accountsclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
)

// Errors of a debit that the caller's rules act on.
var (
	ErrInsufficientBalance = errors.New("insufficient balance")
	ErrBalanceExpired      = errors.New("balance expired")
	ErrSuspended           = errors.New("client suspended")
	// ErrNothingToRefund: accounts holds no debit of the client with that reference.
	ErrNothingToRefund = errors.New("nothing to refund")
)

// Client calls accounts with the caller's internal credential.
type Client struct {
	conn     *grpc.ClientConn
	internal accountsv1.AccountsInternalServiceClient
}

// Dial connects to accounts at addr as the caller o names.
func Dial(addr string, o grpcclient.Options) (*Client, error) {
	conn, err := grpcclient.Dial(addr, o)
	if err != nil {
		return nil, fmt.Errorf("dial accounts at %s: %w", addr, err)
	}
	return &Client{conn: conn, internal: accountsv1.NewAccountsInternalServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// AuthenticateAPIKey implements auth.Authenticator.
func (c *Client) AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (auth.Principal, error) {
	resp, err := c.internal.Authenticate(ctx, &accountsv1.AuthenticateRequest{ApiKey: apiKey, ClientId: clientID})
	if err != nil {
		return auth.Principal{}, authErr(err)
	}
	return principal(resp.GetPrincipal()), nil
}

// AuthenticateSDKToken implements auth.Authenticator.
func (c *Client) AuthenticateSDKToken(ctx context.Context, token, clientID string) (auth.Principal, error) {
	resp, err := c.internal.AuthenticateSdkToken(ctx, &accountsv1.AuthenticateSdkTokenRequest{SdkToken: token, ClientId: clientID})
	if err != nil {
		return auth.Principal{}, authErr(err)
	}
	return principal(resp.GetPrincipal()), nil
}

func authErr(err error) error {
	if status.Code(err) == codes.Unauthenticated {
		return auth.ErrUnauthenticated
	}
	return fmt.Errorf("authenticate with accounts: %w", err)
}

func principal(p *accountsv1.Principal) auth.Principal {
	features := make([]string, 0, len(p.GetFeatures()))
	for _, f := range p.GetFeatures() {
		features = append(features, strings.TrimPrefix(f.String(), "FEATURE_"))
	}
	role := auth.Role("")
	if p.GetRole() != accountsv1.Role_ROLE_UNSPECIFIED {
		role = auth.Role(strings.TrimPrefix(p.GetRole().String(), "ROLE_"))
	}
	return auth.Principal{
		ClientID: p.GetClientId(), KeyID: p.GetKeyId(), SDKTokenID: p.GetSdkTokenId(), Role: role,
		Status: auth.Status(strings.TrimPrefix(p.GetClientStatus().String(), "CLIENT_STATUS_")), Features: features,
	}
}

// Kinds a service may charge.
const (
	KindVerification      = accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION
	KindConnectEnrichment = accountsv1.LedgerKind_LEDGER_KIND_CONNECT_ENRICHMENT
	KindStuckPlusReveal   = accountsv1.LedgerKind_LEDGER_KIND_STUCK_PLUS_REVEAL
)

// Charge is a settled debit.
type Charge struct {
	EntryID      string
	Charged      int64
	BalanceAfter int64
	Replayed     bool
}

// Debit charges clientID the price of kind/variant, once per reference. A refused debit is
// ErrInsufficientBalance, ErrBalanceExpired or ErrSuspended; any other error leaves the outcome
// unknown, and the caller retries with the same reference.
func (c *Client) Debit(ctx context.Context, clientID string, kind accountsv1.LedgerKind, variant, reference string) (Charge, error) {
	resp, err := c.internal.Debit(ctx, &accountsv1.DebitRequest{ClientId: clientID, Kind: kind, Variant: variant, Reference: reference})
	if err != nil {
		switch apierr.Parse(err).Reason {
		case apierr.InsufficientBalance:
			return Charge{}, ErrInsufficientBalance
		case apierr.BalanceExpired:
			return Charge{}, ErrBalanceExpired
		case apierr.PermissionDenied:
			return Charge{}, ErrSuspended
		}
		return Charge{}, fmt.Errorf("debit: %w", err)
	}
	return Charge{EntryID: resp.GetEntryId(), Charged: resp.GetCharged(), BalanceAfter: resp.GetBalanceAfter(), Replayed: resp.GetReplayed()}, nil
}

// Away tells an error of a call that failed because accounts could not be reached or did not
// answer in time, as opposed to one accounts answered: a caller working through a queue stops
// there instead of waiting out every item's timeout.
func Away(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Refunded is a settled refund.
type Refunded struct {
	EntryID      string
	Refunded     int64
	BalanceAfter int64
	Replayed     bool
}

// Refund gives back the debit of clientID with reference, once: a repeated refund answers the
// first. A reference that names no debit (it never committed) is ErrNothingToRefund; any other
// error leaves the outcome unknown, and the caller retries.
func (c *Client) Refund(ctx context.Context, clientID, reference string, description *string) (Refunded, error) {
	resp, err := c.internal.Refund(ctx, &accountsv1.RefundRequest{ClientId: clientID, Reference: reference, Description: description})
	if err != nil {
		if apierr.Parse(err).Reason == apierr.NotFound {
			return Refunded{}, ErrNothingToRefund
		}
		return Refunded{}, fmt.Errorf("refund: %w", err)
	}
	return Refunded{EntryID: resp.GetEntryId(), Refunded: resp.GetRefunded(), BalanceAfter: resp.GetBalanceAfter(), Replayed: resp.GetReplayed()}, nil
}

// Balance reads a client's balance.
func (c *Client) Balance(ctx context.Context, clientID string) (int64, error) {
	resp, err := c.internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: clientID})
	if err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	return resp.GetBalance(), nil
}

// AllowsWebOrigin tells whether a browser page whose Origin header is origin may capture the
// client's browser flows.
func (c *Client) AllowsWebOrigin(ctx context.Context, clientID, origin string) (bool, error) {
	resp, err := c.internal.CheckWebOrigin(ctx, &accountsv1.CheckWebOriginRequest{ClientId: clientID, Origin: origin})
	if err != nil {
		return false, fmt.Errorf("check web origin: %w", err)
	}
	return resp.GetAllowed(), nil
}
