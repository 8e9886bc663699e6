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
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/rowid"
)

const lockBalanceSQL = `SELECT b.balance, b.expires_at, c.status, b.low_balance_threshold, now()
	FROM accounts.balances b JOIN accounts.clients c ON c.id = b.client_id
	WHERE b.client_id = $1 FOR UPDATE OF b`

// LockBalance locks a client's balance row until the transaction ends.
func (s *Store) LockBalance(ctx context.Context, clientID string) (domain.BalanceState, error) {
	var b domain.BalanceState
	err := s.db.QueryRow(ctx, lockBalanceSQL, clientID).Scan(&b.Balance, &b.ExpiresAt, &b.Status, &b.LowThreshold, &b.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, fault.ErrNotFound
	}
	if err != nil {
		return b, fmt.Errorf("lock balance: %w", err)
	}
	return b, nil
}

// refKey is the ledger's ref_key of a reference, as the generated column computes it.
func refKey(clientID, reference string) string { return domain.LedgerKey(clientID, reference) }

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
func (s *Store) LockForDebits(ctx context.Context, clientIDs []string, lookup [][2]string) (domain.DebitSnapshot, error) {
	ids := slices.Clone(clientIDs)
	slices.Sort(ids)
	b := &pgx.Batch{}
	// Ids travel as text[] and are cast by the server: pgx has no binary plan for []string into
	// uuid[], and finding that out (an error built with fmt) before falling back to text cost
	// about a tenth of accounts' CPU on the debit path.
	b.Queue(`SELECT b.client_id::text, b.balance, b.expires_at, c.status, b.low_balance_threshold, now()
		FROM accounts.balances b JOIN accounts.clients c ON c.id = b.client_id
		WHERE b.client_id = ANY($1::text[]::uuid[]) ORDER BY b.client_id FOR UPDATE OF b`, ids)
	b.Queue(`SELECT client_id::text, kind, variant, amount FROM accounts.prices WHERE client_id = ANY($1::text[]::uuid[])`, ids)
	if len(lookup) > 0 {
		b.Queue(ledgerByRefKeysSQL, refKeys(lookup))
	}
	br := s.db.SendBatch(ctx, b)
	defer br.Close()

	snap := domain.DebitSnapshot{Balances: map[string]domain.BalanceState{}, Overrides: map[string][]domain.Price{}, Existing: map[string]domain.LedgerEntry{}}
	rows, err := br.Query()
	if err != nil {
		return snap, fmt.Errorf("lock balances: %w", err)
	}
	for rows.Next() {
		var id string
		var st domain.BalanceState
		if err := rows.Scan(&id, &st.Balance, &st.ExpiresAt, &st.Status, &st.LowThreshold, &st.Now); err != nil {
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
func (s *Store) LedgerByReferences(ctx context.Context, refs [][2]string) (map[string]domain.LedgerEntry, error) {
	rows, err := s.db.Query(ctx, ledgerByRefKeysSQL, refKeys(refs))
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
func (s *Store) LedgerByReference(ctx context.Context, clientID, reference string) (domain.LedgerEntry, error) {
	e, err := scanLedger(s.db.QueryRow(ctx, `SELECT `+ledgerColumns+` FROM accounts.ledger WHERE ref_key = $1`,
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
// returns the entries with their ids (rowid: in the order written) and times. The caller holds
// the balance locks. When a reference is already in the ledger it returns
// domain.ErrReferenceTaken: the insert fails, so nothing after it in the round trip runs, and
// the transaction must be rolled back. In a piped transaction (pg.InPipedTx) the same round
// trip commits it (pg.QueueCommit): nothing may follow an append there.
func (s *Store) AppendLedger(ctx context.Context, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	n := len(entries)
	ids := make([]string, n)
	clients := make([]string, n)
	kinds := make([]string, n)
	amounts := make([]int64, n)
	after := make([]int64, n)
	refs := make([]string, n)
	variants := make([]string, n)
	descs := make([]*string, n)
	final := map[string]int64{}
	for i, e := range entries {
		ids[i] = rowid.New()
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
		SELECT id, c, k, a, ba, r, v, d
		FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
			WITH ORDINALITY AS t(id, c, k, a, ba, r, v, d, ord)
		ORDER BY ord
		RETURNING client_id::text, reference, id::text, created_at`, ids, clients, kinds, amounts, after, refs, variants, descs)
	b.Queue(`UPDATE accounts.balances b SET balance = v.balance, updated_at = now()
		FROM unnest($1::text[]::uuid[], $2::bigint[]) AS v(client_id, balance) WHERE b.client_id = v.client_id`, balClients, balances)
	pg.QueueCommit(s.db, b)
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, appendErr(err)
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
		return nil, appendErr(err)
	}
	out := make([]domain.LedgerEntry, n)
	for i, e := range entries {
		in, ok := byKey[refKey(e.ClientID, e.Reference)]
		if !ok {
			return nil, fmt.Errorf("append ledger: no entry came back for reference %q", e.Reference)
		}
		e.ID, e.CreatedAt = in.id, in.created
		out[i] = e
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("set balances: %w", err)
	}
	return out, br.Close()
}

// appendErr is the error of AppendLedger's insert: a reference already in the ledger (a retried
// debit) is domain.ErrReferenceTaken.
func appendErr(err error) error {
	if pg.IsUniqueViolation(err, "ledger_ref_key") {
		return domain.ErrReferenceTaken
	}
	return fmt.Errorf("append ledger: %w", err)
}

// SetExpiry replaces a client's balance expiry. The caller holds the balance lock.
func (s *Store) SetExpiry(ctx context.Context, clientID string, expiresAt time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE accounts.balances SET expires_at = $2, updated_at = now() WHERE client_id = $1`, clientID, expiresAt); err != nil {
		return fmt.Errorf("set expiry: %w", err)
	}
	return nil
}

// ListLedger reads a page of a client's ledger, newest first, with the total, from one snapshot
// (pg.Page).
func (s *Store) ListLedger(ctx context.Context, clientID string, limit, offset int64) ([]domain.LedgerEntry, int64, error) {
	q := pg.PageQuery{
		Columns: ledgerColumns,
		From:    `FROM accounts.ledger WHERE client_id = $1`,
		Order:   `seq DESC`,
		Args:    []any{clientID},
	}
	out, total, err := pg.Page(ctx, s.db, q, limit, offset, scanLedger)
	if err != nil {
		return nil, 0, fmt.Errorf("list ledger: %w", err)
	}
	return out, total, nil
}

// LedgerSum is the sum of a client's ledger amounts and the stored balance: equal, always.
func (s *Store) LedgerSum(ctx context.Context, clientID string) (sum, balance int64, err error) {
	err = s.db.QueryRow(ctx, `SELECT (SELECT coalesce(sum(amount), 0)::bigint FROM accounts.ledger WHERE client_id = $1),
		(SELECT balance FROM accounts.balances WHERE client_id = $1)`, clientID).Scan(&sum, &balance)
	if err != nil {
		return 0, 0, fmt.Errorf("ledger sum: %w", err)
	}
	return sum, balance, nil
}

// PriceOverrides reads a client's price overrides.
func (s *Store) PriceOverrides(ctx context.Context, clientID string) ([]domain.Price, error) {
	rows, err := s.db.Query(ctx, `SELECT kind, variant, amount FROM accounts.prices WHERE client_id = $1 ORDER BY kind, variant`, clientID)
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
func (s *Store) SetPriceOverride(ctx context.Context, clientID string, kind money.Kind, variant string, amount *int64) error {
	var err error
	if amount == nil {
		_, err = s.db.Exec(ctx, `DELETE FROM accounts.prices WHERE client_id = $1 AND kind = $2 AND variant = $3`, clientID, kind, variant)
	} else {
		_, err = s.db.Exec(ctx, `INSERT INTO accounts.prices (client_id, kind, variant, amount) VALUES ($1, $2, $3, $4)
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

// ExpiriesDue locks (skipping those a debit holds: the next run takes them) and reads up to
// limit balances that expire within notice, or have expired, and whose expiry was not yet
// notified for, in client id order.
func (s *Store) ExpiriesDue(ctx context.Context, notice time.Duration, limit int) ([]domain.ExpiryDue, error) {
	rows, err := s.db.Query(ctx, `SELECT client_id::text, balance, expires_at, expiring_notified_for, expired_notified_for, now()
		FROM accounts.balances
		WHERE expires_at IS NOT NULL AND expires_at <= now() + make_interval(secs => $1)
			AND (expired_notified_for IS DISTINCT FROM expires_at
				AND (expires_at <= now() OR expiring_notified_for IS DISTINCT FROM expires_at))
		ORDER BY client_id LIMIT $2 FOR UPDATE SKIP LOCKED`, notice.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("expiries due: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ExpiryDue, error) {
		var d domain.ExpiryDue
		return d, r.Scan(&d.ClientID, &d.Balance, &d.ExpiresAt, &d.ExpiringNotifiedFor, &d.ExpiredNotifiedFor, &d.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("expiries due: %w", err)
	}
	return out, nil
}

// SetExpiryNotified records the expiries the events of ns were sent for, in one statement. The
// caller holds the balance locks (ExpiriesDue).
func (s *Store) SetExpiryNotified(ctx context.Context, ns []domain.ExpiryNotified) error {
	if len(ns) == 0 {
		return nil
	}
	ids := make([]string, len(ns))
	expiring := make([]*time.Time, len(ns))
	expired := make([]*time.Time, len(ns))
	for i, n := range ns {
		ids[i], expiring[i], expired[i] = n.ClientID, n.Expiring, n.Expired
	}
	_, err := s.db.Exec(ctx, `UPDATE accounts.balances b
		SET expiring_notified_for = coalesce(v.expiring, b.expiring_notified_for),
			expired_notified_for = coalesce(v.expired, b.expired_notified_for)
		FROM unnest($1::text[]::uuid[], $2::timestamptz[], $3::timestamptz[]) AS v(client_id, expiring, expired)
		WHERE b.client_id = v.client_id`, ids, expiring, expired)
	if err != nil {
		return fmt.Errorf("set expiry notified: %w", err)
	}
	return nil
}
