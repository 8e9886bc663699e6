package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// BalanceState is a client's balance as locked for a change.
type BalanceState struct {
	Balance   int64
	ExpiresAt *time.Time
	Status    identity.Status
	// Now is the database's transaction time, the clock every expiry is judged by.
	Now time.Time
}

// DebitSnapshot is everything a batch of debits needs to decide, read in one round trip under
// the balance locks of its clients: their balances, their price overrides and, when asked for,
// the ledger rows of references already used (by ref_key).
type DebitSnapshot struct {
	Balances  map[string]BalanceState
	Overrides map[string][]domain.Price
	Existing  map[string]domain.LedgerEntry
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
		return s, fault.ErrNotFound
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

// LockForDebits locks the balance rows of clientIDs, in id order (so batches that share
// clients never deadlock, on one replica or several), and reads the snapshot of a batch. Clients
// that do not exist are absent from Balances. References are looked up only when lookup (pairs
// of client id and reference) is not empty: the common batch has none in the ledger yet, and
// AppendLedger's unique constraint tells when one was (a retry); a refused debit, which inserts
// nothing, asks LedgerByReferences.
func LockForDebits(ctx context.Context, tx pgx.Tx, clientIDs []string, lookup [][2]string) (DebitSnapshot, error) {
	ids := slices.Clone(clientIDs)
	slices.Sort(ids)
	b := &pgx.Batch{}
	// Ids travel as text[] and are cast by the server: pgx has no binary plan for []string into
	// uuid[], and finding that out (an error built with fmt) before falling back to text cost
	// about a tenth of accounts' CPU on the debit path.
	b.Queue(`SELECT b.client_id::text, b.balance, b.expires_at, c.status, now()
		FROM accounts.balances b JOIN accounts.clients c ON c.id = b.client_id
		WHERE b.client_id = ANY($1::text[]::uuid[]) ORDER BY b.client_id FOR UPDATE OF b`, ids)
	b.Queue(`SELECT client_id::text, kind, variant, amount FROM accounts.prices WHERE client_id = ANY($1::text[]::uuid[])`, ids)
	if len(lookup) > 0 {
		b.Queue(ledgerByRefKeysSQL, refKeys(lookup))
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	snap := DebitSnapshot{Balances: map[string]BalanceState{}, Overrides: map[string][]domain.Price{}, Existing: map[string]domain.LedgerEntry{}}
	rows, err := br.Query()
	if err != nil {
		return snap, fmt.Errorf("lock balances: %w", err)
	}
	for rows.Next() {
		var id string
		var st BalanceState
		if err := rows.Scan(&id, &st.Balance, &st.ExpiresAt, &st.Status, &st.Now); err != nil {
			rows.Close()
			return snap, fmt.Errorf("lock balances: %w", err)
		}
		snap.Balances[id] = st
	}
	if err := rows.Err(); err != nil {
		return snap, fmt.Errorf("lock balances: %w", err)
	}
	if rows, err = br.Query(); err != nil {
		return snap, fmt.Errorf("read prices: %w", err)
	}
	for rows.Next() {
		var id string
		p := domain.Price{Overridden: true}
		if err := rows.Scan(&id, &p.Kind, &p.Variant, &p.Amount); err != nil {
			rows.Close()
			return snap, fmt.Errorf("read prices: %w", err)
		}
		snap.Overrides[id] = append(snap.Overrides[id], p)
	}
	if err := rows.Err(); err != nil {
		return snap, fmt.Errorf("read prices: %w", err)
	}
	if len(lookup) > 0 {
		if rows, err = br.Query(); err != nil {
			return snap, fmt.Errorf("read references: %w", err)
		}
		if snap.Existing, err = collectByRefKey(rows); err != nil {
			return snap, fmt.Errorf("read references: %w", err)
		}
	}
	return snap, br.Close()
}

// ExistingKey is the key of DebitSnapshot.Existing and of LedgerByReferences' answer.
func ExistingKey(clientID, reference string) string { return refKey(clientID, reference) }

const ledgerByRefKeysSQL = `SELECT ` + ledgerColumns + ` FROM accounts.ledger WHERE ref_key = ANY($1)`

func refKeys(refs [][2]string) []string {
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = refKey(r[0], r[1])
	}
	return keys
}

func collectByRefKey(rows pgx.Rows) (map[string]domain.LedgerEntry, error) {
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.LedgerEntry, error) { return scanLedger(r) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.LedgerEntry, len(entries))
	for _, e := range entries {
		out[refKey(e.ClientID, e.Reference)] = e
	}
	return out, nil
}

// LedgerByReferences reads the ledger rows of refs (pairs of client id and reference) that
// exist, by ExistingKey.
func LedgerByReferences(ctx context.Context, db pg.DB, refs [][2]string) (map[string]domain.LedgerEntry, error) {
	rows, err := db.Query(ctx, ledgerByRefKeysSQL, refKeys(refs))
	if err != nil {
		return nil, fmt.Errorf("ledger by references: %w", err)
	}
	out, err := collectByRefKey(rows)
	if err != nil {
		return nil, fmt.Errorf("ledger by references: %w", err)
	}
	return out, nil
}

// LedgerByReference reads one ledger entry of a client by reference.
func LedgerByReference(ctx context.Context, db pg.DB, clientID, reference string) (domain.LedgerEntry, error) {
	e, err := scanLedger(db.QueryRow(ctx, `SELECT `+ledgerColumns+` FROM accounts.ledger WHERE ref_key = $1`,
		refKey(clientID, reference)))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fault.ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("ledger by reference: %w", err)
	}
	return e, nil
}

// AppendLedger inserts entries (each of its ClientID, in order, distinct references per client)
// and sets each client's balance to its last entry's balance_after, in one round trip, and
// returns the entries with their ids and times. The caller holds the balance locks. When a
// reference is already in the ledger it returns ErrReferenceTaken, and the transaction must be
// rolled back.
func AppendLedger(ctx context.Context, tx pgx.Tx, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	n := len(entries)
	clients := make([]string, n)
	kinds := make([]string, n)
	amounts := make([]int64, n)
	after := make([]int64, n)
	refs := make([]string, n)
	variants := make([]string, n)
	descs := make([]*string, n)
	final := map[string]int64{}
	for i, e := range entries {
		clients[i], kinds[i], amounts[i], after[i], refs[i], variants[i], descs[i] =
			e.ClientID, string(e.Kind), e.Amount, e.BalanceAfter, e.Reference, e.Variant, e.Description
		final[e.ClientID] = e.BalanceAfter
	}
	balClients := make([]string, 0, len(final))
	for c := range final {
		balClients = append(balClients, c)
	}
	slices.Sort(balClients)
	balances := make([]int64, len(balClients))
	for i, c := range balClients {
		balances[i] = final[c]
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference, variant, description)
		SELECT gen_random_uuid(), c, k, a, ba, r, v, d
		FROM unnest($1::text[]::uuid[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[])
			WITH ORDINALITY AS t(c, k, a, ba, r, v, d, ord)
		ORDER BY ord
		ON CONFLICT (ref_key) DO NOTHING
		RETURNING client_id::text, reference, id::text, created_at`, clients, kinds, amounts, after, refs, variants, descs)
	b.Queue(`UPDATE accounts.balances b SET balance = v.balance, updated_at = now()
		FROM unnest($1::text[]::uuid[], $2::bigint[]) AS v(client_id, balance) WHERE b.client_id = v.client_id`, balClients, balances)
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
	byKey := make(map[string]inserted, n)
	for rows.Next() {
		var client, ref string
		var in inserted
		if err := rows.Scan(&client, &ref, &in.id, &in.created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("append ledger: %w", err)
		}
		byKey[refKey(client, ref)] = in
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("append ledger: %w", err)
	}
	out := make([]domain.LedgerEntry, n)
	for i, e := range entries {
		in, ok := byKey[refKey(e.ClientID, e.Reference)]
		if !ok {
			return nil, ErrReferenceTaken
		}
		e.ID, e.CreatedAt = in.id, in.created
		out[i] = e
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("set balances: %w", err)
	}
	return out, br.Close()
}

// SetExpiry replaces a client's balance expiry. The caller holds the balance lock.
func SetExpiry(ctx context.Context, tx pgx.Tx, clientID string, expiresAt time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE accounts.balances SET expires_at = $2, updated_at = now() WHERE client_id = $1`, clientID, expiresAt); err != nil {
		return fmt.Errorf("set expiry: %w", err)
	}
	return nil
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
func SetPriceOverride(ctx context.Context, db pg.DB, clientID string, kind money.Kind, variant string, amount *int64) error {
	var err error
	if amount == nil {
		_, err = db.Exec(ctx, `DELETE FROM accounts.prices WHERE client_id = $1 AND kind = $2 AND variant = $3`, clientID, kind, variant)
	} else {
		_, err = db.Exec(ctx, `INSERT INTO accounts.prices (client_id, kind, variant, amount) VALUES ($1, $2, $3, $4)
			ON CONFLICT (client_id, kind, variant) DO UPDATE SET amount = excluded.amount`, clientID, kind, variant, *amount)
	}
	if pg.IsForeignKeyViolation(err) {
		return fault.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set price: %w", err)
	}
	return nil
}
