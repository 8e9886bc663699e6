package billing

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/money"
)

// Store is what the ledger needs of the service's storage. The locking methods (LockBalance,
// LockForDebits) and the writes that rely on them are called only inside Tx.InTx.
// A Store that also has AppendLedgerIfUnchanged (optimisticStore, optimistic.go) lets debit
// batches go in one round trip; without it they take the locked path alone.
type Store interface {
	// LockBalance locks a client's balance row until the transaction ends; an unknown client is
	// fault.ErrNotFound.
	LockBalance(ctx context.Context, clientID string) (domain.BalanceState, error)
	// LockForDebits locks the balance rows of clientIDs and reads a batch's snapshot; the ledger
	// rows of lookup (pairs of client id and reference) are read only when it is not empty.
	LockForDebits(ctx context.Context, clientIDs []string, lookup [][2]string) (domain.DebitSnapshot, error)
	// LedgerByReferences reads the entries of refs that exist, by domain.LedgerKey.
	LedgerByReferences(ctx context.Context, refs [][2]string) (map[string]domain.LedgerEntry, error)
	// LedgerByReference reads one entry of a client; none is fault.ErrNotFound.
	LedgerByReference(ctx context.Context, clientID, reference string) (domain.LedgerEntry, error)
	// AppendLedger writes entries and sets each client's balance to its last balance_after; a
	// reference already in the ledger is domain.ErrReferenceTaken (roll back). In a debit
	// batch's transaction (Ledger.WithBatchStore) it ends the transaction, its commit in the
	// same round trip: nothing may follow it there.
	AppendLedger(ctx context.Context, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error)
	SetExpiry(ctx context.Context, clientID string, expiresAt time.Time) error
	ListLedger(ctx context.Context, clientID string, limit, offset int64) ([]domain.LedgerEntry, int64, error)
	PriceOverrides(ctx context.Context, clientID string) ([]domain.Price, error)
	// SetPriceOverride sets (amount not nil) or removes an override; an unknown client is
	// fault.ErrNotFound.
	SetPriceOverride(ctx context.Context, clientID string, kind money.Kind, variant string, amount *int64) error
	// ExpiriesDue locks and reads the balances, of up to limit after the client id after (""
	// from the first), that expire within notice, or have expired, and were not yet notified
	// for that expiry; balances a debit holds are skipped. next is the client id to go on
	// after, "" when there are no more.
	ExpiriesDue(ctx context.Context, notice time.Duration, after string, limit int) (due []domain.ExpiryDue, next string, err error)
	// SetExpiryNotified records the expiries notified for; the caller holds the locks.
	SetExpiryNotified(ctx context.Context, ns []domain.ExpiryNotified) error

	// Emit writes events in the store's transaction (refused outside one), so each commits
	// with its fact.
	Emit(ctx context.Context, evs ...events.Event) error
}

// Tx runs a function with the store inside one transaction, committed when it returns nil.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}
