package clients

import (
	"context"

	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Store is what clients need of the service's storage. A client is created in one transaction
// with its initial credit and first key, so the store handed to Create's transaction also serves
// the ledger and credentials: their ports are part of this one. Lookups of a client that find
// none answer fault.ErrNotFound.
type Store interface {
	billing.Store
	credentials.Store

	InsertClient(ctx context.Context, c domain.ClientRow) error
	ListClients(ctx context.Context, limit, offset int64) ([]domain.ClientRow, int64, error)
	SetClientStatus(ctx context.Context, id string, status principal.Status) error
	SetClientFeatures(ctx context.Context, id string, features []string) error
	// SetClientOperators replaces the operators the client may use.
	SetClientOperators(ctx context.Context, id string, ops principal.Operators) error
	// SetLowBalanceThreshold sets (nil: clears) the client's own balance.low threshold.
	SetLowBalanceThreshold(ctx context.Context, id string, threshold *int64) error

	WebOrigins(ctx context.Context, clientID string) ([]domain.WebOrigin, error)
	// SetWebOrigins replaces the client's origins; the caller holds the client row lock.
	SetWebOrigins(ctx context.Context, clientID string, origins []string) error
	HasWebOrigin(ctx context.Context, clientID, origin string) (bool, error)

	RedirectURIs(ctx context.Context, clientID string) ([]domain.RedirectURI, error)
	// SetRedirectURIs replaces the client's redirect URIs; the caller holds the client row lock.
	SetRedirectURIs(ctx context.Context, clientID string, uris []string) error
}

// Tx runs a function with the store inside one transaction, committed when it returns nil.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}
