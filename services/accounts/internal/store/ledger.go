package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// BalanceState is a client's balance as locked for a change.
type BalanceState struct {
	Balance   int64
	ExpiresAt *time.Time
	Status    auth.Status
	// Now is the database's transaction time, the clock every expiry is judged by.
	Now time.Time
}

// DebitSnapshot is everything a batch of debits needs to decide, read in one round trip under
// the balance lock: the balance, the client's price overrides and, when asked for, the ledger
// rows of references already used.
type DebitSnapshot struct {
	BalanceState
	Existing  map[string]domain.LedgerEntry
	Overrides []domain.Price
}

// ErrReferenceTaken is returned by AppendLedger when an entry's reference is already in the
// client's ledger; the caller rolls back and decides again knowing the existing entries.
var ErrReferenceTaken = errors.New("ledger reference already used")

const lockBalanceSQL = `SELECT b.balance, b.expires_at, c.status, now()
	FROM accounts.balances b JOIN accounts.clients c ON c.id = b.client_id
	WHERE b.client_id = $1 FOR UPDATE OF b`

// LockBalance locks a client's balance row until the transaction ends.
func LockBalance(ctx context.Context, tx pgx.Tx, clientID string) (BalanceState, error) {
	var s BalanceState
	err := tx.QueryRow(ctx, lockBalanceSQL, clientID).Scan(&s.Balance, &s.ExpiresAt, &s.Status, &s.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, domain.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("lock balance: %w", err)
	}
	return s, nil
}

// refKey is the ledger's ref_key of a reference: the client id (canonical, lower-case) and the
// reference, as the generated column computes it.
func refKey(clientID, reference string) string { return clientID + "/" + reference }

const ledgerColumns = `id::text, client_id::text, kind, amount, balance_after, reference, variant, description, created_at`

func scanLedger(row pgx.Row) (domain.LedgerEntry, error) {
	var e domain.LedgerEntry
	err := row.Scan(&e.ID, &e.ClientID, &e.Kind, &e.Amount, &e.BalanceAfter, &e.Reference, &e.Variant, &e.Description, &e.CreatedAt)
	return e, err
}

// LockForDebits locks the balance and reads the snapshot for a batch of debits. References are
// looked up only when lookup is not empty: the common batch has none in the ledger yet, and
// AppendLedger's unique constraint tells when one was (a retry), so the lookup is the exception.
func LockForDebits(ctx context.Context, tx pgx.Tx, clientID string, lookup []string) (DebitSnapshot, error) {
	b := &pgx.Batch{}
	b.Queue(lockBalanceSQL, clientID)
	b.Queue(`SELECT kind, variant, amount FROM accounts.prices WHERE client_id = $1`, clientID)
	if len(lookup) > 0 {
		keys := make([]string, len(lookup))
		for i, ref := range lookup {
			keys[i] = refKey(clientID, ref)
		}
		b.Queue(`SELECT `+ledgerColumns+` FROM accounts.ledger WHERE ref_key = ANY($1)`, keys)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	var s DebitSnapshot
	err := br.QueryRow().Scan(&s.Balance, &s.ExpiresAt, &s.Status, &s.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, domain.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("lock balance: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return s, fmt.Errorf("read prices: %w", err)
	}
	s.Overrides, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Price, error) {
		p := domain.Price{Overridden: true}
		return p, r.Scan(&p.Kind, &p.Variant, &p.Amount)
	})
	if err != nil {
		return s, fmt.Errorf("read prices: %w", err)
	}
	s.Existing = map[string]domain.LedgerEntry{}
	if len(lookup) > 0 {
		if rows, err = br.Query(); err != nil {
			return s, fmt.Errorf("read references: %w", err)
		}
		entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.LedgerEntry, error) { return scanLedger(r) })
		if err != nil {
			return s, fmt.Errorf("read references: %w", err)
		}
		for _, e := range entries {
			s.Existing[e.Reference] = e
		}
	}
	return s, br.Close()
}

// LedgerByReference reads one ledger entry of a client by reference.
func LedgerByReference(ctx context.Context, db pg.DB, clientID, reference string) (domain.LedgerEntry, error) {
	e, err := scanLedger(db.QueryRow(ctx, `SELECT `+ledgerColumns+` FROM accounts.ledger WHERE ref_key = $1`,
		refKey(clientID, reference)))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, domain.ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("ledger by reference: %w", err)
	}
	return e, nil
}

// AppendLedger inserts entries (all of one client, in order, with distinct references) and sets
// the client's balance to the last entry's balance_after, in one round trip, and returns the
// entries with their ids and times. The caller holds the balance lock; expiresAt, when not nil,
// also replaces the expiry. When a reference is already in the ledger it returns
// ErrReferenceTaken, and the transaction must be rolled back.
func AppendLedger(ctx context.Context, tx pgx.Tx, clientID string, entries []domain.LedgerEntry, expiresAt *time.Time) ([]domain.LedgerEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	n := len(entries)
	kinds := make([]string, n)
	amounts := make([]int64, n)
	after := make([]int64, n)
	refs := make([]string, n)
	variants := make([]string, n)
	descs := make([]*string, n)
	for i, e := range entries {
		kinds[i], amounts[i], after[i], refs[i], variants[i], descs[i] = string(e.Kind), e.Amount, e.BalanceAfter, e.Reference, e.Variant, e.Description
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference, variant, description)
		SELECT gen_random_uuid(), $1, k, a, ba, r, v, d
		FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS t(k, a, ba, r, v, d, ord)
		ORDER BY ord
		ON CONFLICT (ref_key) DO NOTHING
		RETURNING reference, id::text, created_at`, clientID, kinds, amounts, after, refs, variants, descs)
	if expiresAt != nil {
		b.Queue(`UPDATE accounts.balances SET balance = $2, expires_at = $3, updated_at = now() WHERE client_id = $1`,
			clientID, after[n-1], *expiresAt)
	} else {
		b.Queue(`UPDATE accounts.balances SET balance = $2, updated_at = now() WHERE client_id = $1`, clientID, after[n-1])
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("append ledger: %w", err)
	}
	type inserted struct {
		id      string
		created time.Time
	}
	byRef := make(map[string]inserted, n)
	for rows.Next() {
		var ref string
		var in inserted
		if err := rows.Scan(&ref, &in.id, &in.created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("append ledger: %w", err)
		}
		byRef[ref] = in
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("append ledger: %w", err)
	}
	out := make([]domain.LedgerEntry, n)
	for i, e := range entries {
		in, ok := byRef[e.Reference]
		if !ok {
			return nil, ErrReferenceTaken
		}
		e.ClientID, e.ID, e.CreatedAt = clientID, in.id, in.created
		out[i] = e
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("set balance: %w", err)
	}
	return out, br.Close()
}

// ListLedger reads a page of a client's ledger, newest first, with the total count.
func ListLedger(ctx context.Context, db pg.DB, clientID string, limit, offset int64) ([]domain.LedgerEntry, int64, error) {
	var total int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM accounts.ledger WHERE client_id = $1`, clientID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count ledger: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT `+ledgerColumns+` FROM accounts.ledger WHERE client_id = $1
		ORDER BY seq DESC LIMIT $2 OFFSET $3`, clientID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list ledger: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.LedgerEntry, error) { return scanLedger(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list ledger: %w", err)
	}
	return out, total, nil
}

// LedgerSum is the sum of a client's ledger amounts and the stored balance: equal, always.
func LedgerSum(ctx context.Context, db pg.DB, clientID string) (sum, balance int64, err error) {
	err = db.QueryRow(ctx, `SELECT (SELECT coalesce(sum(amount), 0)::bigint FROM accounts.ledger WHERE client_id = $1),
		(SELECT balance FROM accounts.balances WHERE client_id = $1)`, clientID).Scan(&sum, &balance)
	if err != nil {
		return 0, 0, fmt.Errorf("ledger sum: %w", err)
	}
	return sum, balance, nil
}

// PriceOverrides reads a client's price overrides.
func PriceOverrides(ctx context.Context, db pg.DB, clientID string) ([]domain.Price, error) {
	rows, err := db.Query(ctx, `SELECT kind, variant, amount FROM accounts.prices WHERE client_id = $1 ORDER BY kind, variant`, clientID)
	if err != nil {
		return nil, fmt.Errorf("price overrides: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Price, error) {
		p := domain.Price{Overridden: true}
		return p, r.Scan(&p.Kind, &p.Variant, &p.Amount)
	})
	if err != nil {
		return nil, fmt.Errorf("price overrides: %w", err)
	}
	return out, nil
}

// SetPriceOverride sets (amount not nil) or removes a client's price override.
func SetPriceOverride(ctx context.Context, db pg.DB, clientID string, kind domain.Kind, variant string, amount *int64) error {
	var err error
	if amount == nil {
		_, err = db.Exec(ctx, `DELETE FROM accounts.prices WHERE client_id = $1 AND kind = $2 AND variant = $3`, clientID, kind, variant)
	} else {
		_, err = db.Exec(ctx, `INSERT INTO accounts.prices (client_id, kind, variant, amount) VALUES ($1, $2, $3, $4)
			ON CONFLICT (client_id, kind, variant) DO UPDATE SET amount = excluded.amount`, clientID, kind, variant, *amount)
	}
	if pg.IsForeignKeyViolation(err) {
		return domain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set price: %w", err)
	}
	return nil
}
