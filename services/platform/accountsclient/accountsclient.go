// Package accountsclient is how the other services use accounts: it authenticates callers
// (an auth.Authenticator over AccountsInternalService) and is their money.Ledger, turning the
// reason of accounts' answer back into the value accounts' rules returned.
package accountsclient

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/credential"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/money"
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
func (c *Client) AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (identity.Principal, error) {
	resp, err := c.internal.Authenticate(ctx, &accountsv1.AuthenticateRequest{ApiKey: apiKey, ClientId: clientID})
	if err != nil {
		return identity.Principal{}, authErr(err)
	}
	return principal(resp.GetPrincipal()), nil
}

// AuthenticateSDKToken implements auth.Authenticator.
func (c *Client) AuthenticateSDKToken(ctx context.Context, token, clientID string) (identity.Principal, error) {
	resp, err := c.internal.AuthenticateSdkToken(ctx, &accountsv1.AuthenticateSdkTokenRequest{SdkToken: token, ClientId: clientID})
	if err != nil {
		return identity.Principal{}, authErr(err)
	}
	return principal(resp.GetPrincipal()), nil
}

// AuthenticateClientSecret resolves a client id and its client secret to the client's principal
// (credential.ErrUnauthenticated for an unknown client or a wrong secret).
func (c *Client) AuthenticateClientSecret(ctx context.Context, clientID, secret string) (identity.Principal, error) {
	resp, err := c.internal.AuthenticateClientSecret(ctx, &accountsv1.AuthenticateClientSecretRequest{ClientId: clientID, ClientSecret: secret})
	if err != nil {
		return identity.Principal{}, authErr(err)
	}
	return principal(resp.GetPrincipal()), nil
}

func authErr(err error) error {
	if status.Code(err) == codes.Unauthenticated {
		return credential.ErrUnauthenticated
	}
	return fmt.Errorf("authenticate with accounts: %w", err)
}

func principal(p *accountsv1.Principal) identity.Principal {
	features := make([]string, 0, len(p.GetFeatures()))
	for _, f := range p.GetFeatures() {
		features = append(features, strings.TrimPrefix(f.String(), "FEATURE_"))
	}
	role := identity.Role("")
	if p.GetRole() != accountsv1.Role_ROLE_UNSPECIFIED {
		role = identity.Role(strings.TrimPrefix(p.GetRole().String(), "ROLE_"))
	}
	return identity.Principal{
		ClientID: p.GetClientId(), KeyID: p.GetKeyId(), SDKTokenID: p.GetSdkTokenId(), Role: role,
		Status: identity.Status(strings.TrimPrefix(p.GetClientStatus().String(), "CLIENT_STATUS_")), Features: features,
	}
}

var _ money.Ledger = (*Client)(nil)

// Debit implements money.Ledger.
func (c *Client) Debit(ctx context.Context, ch money.Charge) (money.Charged, error) {
	resp, err := c.internal.Debit(ctx, &accountsv1.DebitRequest{
		ClientId: ch.ClientID, Kind: ledgerKind(ch.Kind), Variant: ch.Variant, Reference: ch.Reference,
	})
	if err != nil {
		if refused, ok := money.Refusal(apierr.Parse(err).Reason); ok {
			return money.Charged{}, refused
		}
		return money.Charged{}, unknown("debit", err)
	}
	return money.Charged{EntryID: resp.GetEntryId(), Amount: resp.GetCharged(), BalanceAfter: resp.GetBalanceAfter(), Replayed: resp.GetReplayed()}, nil
}

// Refund implements money.Ledger.
func (c *Client) Refund(ctx context.Context, r money.Refund) (money.Refunded, error) {
	resp, err := c.internal.Refund(ctx, &accountsv1.RefundRequest{ClientId: r.ClientID, Reference: r.Reference, Description: r.Description})
	if err != nil {
		if apierr.Parse(err).Reason == fault.NotFound {
			return money.Refunded{}, money.ErrNothingToRefund
		}
		return money.Refunded{}, unknown("refund", err)
	}
	return money.Refunded{EntryID: resp.GetEntryId(), Amount: resp.GetRefunded(), BalanceAfter: resp.GetBalanceAfter(), Replayed: resp.GetReplayed()}, nil
}

// Balance implements money.Ledger.
func (c *Client) Balance(ctx context.Context, clientID string) (int64, error) {
	resp, err := c.internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: clientID})
	if err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	return resp.GetBalance(), nil
}

// ledgerKind is k as accounts' protos name it (LEDGER_KIND_ and the kind).
func ledgerKind(k money.Kind) accountsv1.LedgerKind {
	return accountsv1.LedgerKind(accountsv1.LedgerKind_value["LEDGER_KIND_"+string(k)])
}

// unknown is the error of a money call that accounts did not answer with a rule of its own:
// its outcome is unknown, and the call was away when accounts could not be reached or did not
// answer in time.
func unknown(op string, err error) error {
	code := status.Code(err)
	return money.Unknown(op, err, code == codes.Unavailable || code == codes.DeadlineExceeded)
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
