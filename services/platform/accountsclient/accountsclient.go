// Package accountsclient is how the other services use accounts: it authenticates callers
// (an auth.Authenticator over AccountsInternalService) and moves money with Debit, turning
// accounts' error reasons back into values the callers' rules can test.
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

// Balance reads a client's balance.
func (c *Client) Balance(ctx context.Context, clientID string) (int64, error) {
	resp, err := c.internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: clientID})
	if err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	return resp.GetBalance(), nil
}
