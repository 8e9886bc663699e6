package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/rowid"
	"github.com/mnvhq/mnv/services/platform/tenancy"
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
// clients never deadlock, on one replica or several), and reads the snapshot of a batch, in one
// round trip: a statement that locks the balances and one that reads the price overrides, for
// the batch or per client (Store.WithSpread; each then names its one client, and a database
// distributed by client routes it to the client's node, docs/operations.md#past-one-postgresql).
// Clients that do not exist are absent from Balances. References are looked up only when
// lookup (pairs of client id and reference) is not empty: the common batch has none in the
// ledger yet, and AppendLedger's unique constraint tells when one was (a retry); a refused
// debit, which inserts nothing, asks LedgerByReferences.
func (s *Store) LockForDebits(ctx context.Context, clientIDs []string, lookup [][2]string) (domain.DebitSnapshot, error) {
	ids := slices.Clone(clientIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	snap := domain.DebitSnapshot{
		Balances:  make(map[string]domain.BalanceState, len(ids)),
		Overrides: map[string][]domain.Price{},
		Existing:  map[string]domain.LedgerEntry{},
	}
	b := &pgx.Batch{}
	groups := s.spread.Groups(len(ids), func(i int) string { return ids[i] }, true)
	args := make([][]any, len(groups))
	for k, g := range groups {
		gids := make([]string, len(g.Items))
		for j, i := range g.Items {
			gids[j] = ids[i]
		}
		args[k] = g.Args([]any{gids})
	}
	for _, a := range args {
		b.Queue(lockBalancesSQL.For(s.spread), a...).Query(func(rows pgx.Rows) error {
			var id string
			var st domain.BalanceState
			_, err := pgx.ForEachRow(rows, []any{&id, &st.Balance, &st.ExpiresAt, &st.Status, &st.LowThreshold, &st.Now}, func() error {
				snap.Balances[id] = st
				return nil
			})
			if err != nil {
				return fmt.Errorf("lock balances: %w", err)
			}
			return nil
		})
	}
	for _, a := range args {
		b.Queue(pricesSQL.For(s.spread), a...).Query(func(rows pgx.Rows) error {
			var id string
			p := domain.Price{Overridden: true}
			_, err := pgx.ForEachRow(rows, []any{&id, &p.Kind, &p.Variant, &p.Amount}, func() error {
				snap.Overrides[id] = append(snap.Overrides[id], p)
				return nil
			})
			if err != nil {
				return fmt.Errorf("read prices: %w", err)
			}
			return nil
		})
	}
	queueLedgerByReferences(b, lookup, snap.Existing)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return snap, fmt.Errorf("lock for debits: %w", err)
	}
	return snap, nil
}

// lockBalancesSQL locks the balance rows of clients ($1, in order; per client, $2 the one
// client, tenancy.NewStatement) and reads them, in client order: the rows are locked in the
// order the sort gives them. Ids travel as text[] and are cast by the server: pgx has no binary
// plan for []string into uuid[], and finding that out (an error built with fmt) before falling
// back to text cost about a tenth of accounts' CPU on the debit path.
var lockBalancesSQL = tenancy.NewStatement(`SELECT b.client_id::text, b.balance, b.expires_at, c.status, b.low_balance_threshold, now()
	FROM unnest($1::text[]::uuid[]) AS i(client_id)
	JOIN accounts.balances b ON b.client_id = {client i}
	JOIN accounts.clients c ON c.id = b.client_id
	ORDER BY b.client_id FOR UPDATE OF b`, 2)

// pricesSQL reads the price overrides of clients ($1; per client, $2 the one client).
var pricesSQL = tenancy.NewStatement(`SELECT p.client_id::text, p.kind, p.variant, p.amount
	FROM unnest($1::text[]::uuid[]) AS i(client_id) JOIN accounts.prices p ON p.client_id = {client i}`, 2)

// ledgerByRefKeySQL reads one reference of one client: both by equality, which the unique index
// (client_id, ref_key) answers whatever the statistics say. An ANY over references let the
// planner, with statistics from when every client had a row or two, read the client's whole
// ledger instead (migration 002 tells the same of an earlier key).
const ledgerByRefKeySQL = `SELECT ` + ledgerColumns + ` FROM accounts.ledger WHERE client_id = $1 AND ref_key = $2`

// queueLedgerByReferences queues one statement per reference of refs (pairs of client id and
// reference) that reads its ledger row into out, by domain.LedgerKey, when there is one.
func queueLedgerByReferences(b *pgx.Batch, refs [][2]string, out map[string]domain.LedgerEntry) {
	for _, r := range refs {
		key := refKey(r[0], r[1])
		b.Queue(ledgerByRefKeySQL, r[0], key).QueryRow(func(row pgx.Row) error {
			e, err := scanLedger(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read references: %w", err)
			}
			out[key] = e
			return nil
		})
	}
}

// LedgerByReferences reads the ledger rows of refs (pairs of client id and reference) that
// exist, by ExistingKey, in one round trip.
func (s *Store) LedgerByReferences(ctx context.Context, refs [][2]string) (map[string]domain.LedgerEntry, error) {
	out := make(map[string]domain.LedgerEntry)
	if len(refs) == 0 {
		return out, nil
	}
	b := &pgx.Batch{}
	queueLedgerByReferences(b, refs, out)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("ledger by references: %w", err)
	}
	return out, nil
}

// LedgerByReference reads one ledger entry of a client by reference.
func (s *Store) LedgerByReference(ctx context.Context, clientID, reference string) (domain.LedgerEntry, error) {
	e, err := scanLedger(s.db.QueryRow(ctx, ledgerByRefKeySQL, clientID, refKey(clientID, reference)))
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
// returns the entries with their ids (rowid: in the order written) and times: an insert of the
// entries and an update of the balances, for the batch or per client in client id order
// (Store.WithSpread, docs/operations.md#past-one-postgresql). The caller holds the balance
// locks. When a reference is already in the ledger it returns domain.ErrReferenceTaken: the
// insert fails, so nothing after it in the round trip runs, and the transaction must be rolled
// back. In a piped transaction (pg.InPipedTx) the same round trip commits it (pg.QueueCommit):
// nothing may follow an append there.
func (s *Store) AppendLedger(ctx context.Context, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	written := s.queueAppend(b, entries)
	pg.QueueCommit(s.db, b)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, appendErr(err)
	}
	return written()
}

// AppendLedgerIfUnchanged is AppendLedger for a debit batch decided against what the ledger saw
// of its clients (seen, one per client of entries) instead of under their locks: in the same
// round trip, before the append, a statement locks the clients' balance rows in id order, as
// LockForDebits would, and checks that each still holds what was seen (lockSeenSQL); when one
// does not, it fails, so the append after it (and the commit queued behind it) never runs,
// and it returns domain.ErrBalanceChanged: nothing is written and the transaction must be
// rolled back. In a piped transaction the batch is then one round trip, BEGIN to COMMIT.
func (s *Store) AppendLedgerIfUnchanged(ctx context.Context, seen []domain.SeenBalance, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	seen = slices.Clone(seen)
	slices.SortFunc(seen, func(a, b domain.SeenBalance) int { return strings.Compare(a.ClientID, b.ClientID) })
	b := &pgx.Batch{}
	for _, g := range s.spread.Groups(len(seen), func(i int) string { return seen[i].ClientID }, true) {
		n := len(g.Items)
		ids, statuses, prices := make([]string, n), make([]string, n), make([]string, n)
		balances, thresholds, unexpired := make([]int64, n), make([]*int64, n), make([]bool, n)
		for j, i := range g.Items {
			c := seen[i]
			o, err := overridesJSON(c.Overrides)
			if err != nil {
				return nil, err
			}
			ids[j], balances[j], statuses[j], thresholds[j], prices[j], unexpired[j] =
				c.ClientID, c.Balance, string(c.Status), c.LowThreshold, o, c.Unexpired
		}
		b.Queue(lockSeenSQL.For(s.spread), g.Args([]any{ids, balances, statuses, thresholds, prices, unexpired, n})...)
	}
	written := s.queueAppend(b, entries)
	pg.QueueCommit(s.db, b)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		if isStale(err) {
			return nil, domain.ErrBalanceChanged
		}
		return nil, appendErr(err)
	}
	return written()
}

// lockSeenSQL locks the balance rows of clients ($1; per client, $8 the one client) in id
// order and fails unless there are $7 of them and each still holds what a debit batch saw of
// it: the balance ($2), the client's status ($3), its own balance.low threshold ($4) and its
// price overrides ($5, a JSON object of kind/variant to amount, overridesJSON), and, where $6,
// a balance that has not expired by the transaction's clock. FOR UPDATE waits for a batch
// holding a row (another replica's) and then reads the row as that batch left it, so the check
// judges the latest balance; the status and overrides are read as LockForDebits reads them,
// without a lock, as of the statement. The failure is a cast of a text that names it, which
// aborts the transaction, the statements behind it and their commit (the form matters: an
// expression made of constants and parameters alone would be folded when the statement is
// planned and fail every time; a count is not).
var lockSeenSQL = tenancy.NewStatement(`SELECT CASE WHEN count(*) = $7 AND coalesce(bool_and(s.holds), false) THEN 0
	ELSE ('`+staleMark+` (' || count(*) FILTER (WHERE NOT s.holds) || ' changed)')::int END
	FROM (SELECT b.balance = v.balance
			AND c.status = v.status
			AND b.low_balance_threshold IS NOT DISTINCT FROM v.threshold
			AND (NOT v.unexpired OR b.expires_at IS NULL OR b.expires_at > now())
			AND (SELECT coalesce(jsonb_object_agg(p.kind || '/' || p.variant, p.amount), '{}')
				FROM accounts.prices p WHERE p.client_id = {client v}) = v.prices AS holds
		FROM unnest($1::text[]::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]::jsonb[], $6::boolean[])
			AS v(client_id, balance, status, threshold, prices, unexpired)
		JOIN accounts.balances b ON b.client_id = {client v}
		JOIN accounts.clients c ON c.id = b.client_id
		ORDER BY b.client_id FOR UPDATE OF b) s`, 8)

// staleMark names lockSeenSQL's failure, in its message: a text cast to an integer, which
// fails with invalidTextRepresentation.
const (
	staleMark                 = "debit batch: seen balances changed"
	invalidTextRepresentation = "22P02"
)

// isStale reports whether err is lockSeenSQL's failure.
func isStale(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == invalidTextRepresentation && strings.Contains(pgErr.Message, staleMark)
}

// overridesJSON is lockSeenSQL's form of a client's price overrides: an object of kind/variant
// (a kind has no slash) to amount, which jsonb compares whatever the order of its keys.
func overridesJSON(overrides []domain.Price) (string, error) {
	m := make(map[string]int64, len(overrides))
	for _, p := range overrides {
		m[string(p.Kind)+"/"+p.Variant] = p.Amount
	}
	out, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("seen overrides: %w", err)
	}
	return string(out), nil
}

// queueAppend queues AppendLedger's statements for entries on b, and returns what reads the
// entries written once b has been sent and closed without error.
func (s *Store) queueAppend(b *pgx.Batch, entries []domain.LedgerEntry) func() ([]domain.LedgerEntry, error) {
	type inserted struct {
		id      string
		created time.Time
	}
	byKey := make(map[string]inserted, len(entries))
	for _, g := range s.spread.Groups(len(entries), func(i int) string { return entries[i].ClientID }, true) {
		n := len(g.Items)
		clients, ids, kinds, refs, variants := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		amounts, after := make([]int64, n), make([]int64, n)
		descs := make([]*string, n)
		final := map[string]int64{} // each client's last balance_after
		for j, i := range g.Items {
			e := entries[i]
			clients[j], ids[j], kinds[j], amounts[j], after[j], refs[j], variants[j], descs[j] =
				e.ClientID, rowid.New(), string(e.Kind), e.Amount, e.BalanceAfter, e.Reference, e.Variant, e.Description
			final[e.ClientID] = e.BalanceAfter
		}
		balClients := slices.Sorted(maps.Keys(final))
		balances := make([]int64, len(balClients))
		for j, c := range balClients {
			balances[j] = final[c]
		}
		b.Queue(insertLedgerSQL, clients, ids, kinds, amounts, after, refs, variants, descs).Query(func(rows pgx.Rows) error {
			var client, ref string
			var in inserted
			_, err := pgx.ForEachRow(rows, []any{&client, &ref, &in.id, &in.created}, func() error {
				byKey[refKey(client, ref)] = in
				return nil
			})
			return err
		})
		b.Queue(setBalancesSQL.For(s.spread), g.Args([]any{balClients, balances})...)
	}
	return func() ([]domain.LedgerEntry, error) {
		out := make([]domain.LedgerEntry, len(entries))
		for i, e := range entries {
			in, ok := byKey[refKey(e.ClientID, e.Reference)]
			if !ok {
				return nil, fmt.Errorf("append ledger: no entry came back for reference %q", e.Reference)
			}
			e.ID, e.CreatedAt = in.id, in.created
			out[i] = e
		}
		return out, nil
	}
}

// insertLedgerSQL inserts ledger entries in the order given ($1 their clients, $2 ids, $3 to $8
// their columns). A client's entries are its rows alone: the insert needs no filter to name it.
const insertLedgerSQL = `INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference, variant, description)
	SELECT id, c, k, a, ba, r, v, d
	FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
		WITH ORDINALITY AS t(c, id, k, a, ba, r, v, d, ord)
	ORDER BY ord
	RETURNING client_id::text, reference, id::text, created_at`

// setBalancesSQL sets balances ($1 the clients, $2 their balances; per client, $3 the one
// client, tenancy.NewStatement).
var setBalancesSQL = tenancy.NewStatement(`UPDATE accounts.balances b SET balance = v.balance, updated_at = now()
	FROM unnest($1::text[]::uuid[], $2::bigint[]) AS v(client_id, balance) WHERE b.client_id = {client v}`, 3)

// appendErr is the error of AppendLedger's round trip: a reference already in the ledger (a
// retried debit) is domain.ErrReferenceTaken. Any unique violation is taken for one, whatever
// the constraint's name: a table rebuilt by partition (tenancy.Partition) names its index
// otherwise, and the ledger's other keys (seq, a fresh rowid) never collide; a caller told so
// decides again after reading the references, which is right whatever the violation was.
func appendErr(err error) error {
	if pg.IsUniqueViolation(err, "") {
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

const priceOverridesSQL = `SELECT kind, variant, amount FROM accounts.prices WHERE client_id = $1 ORDER BY kind, variant`

// PriceOverrides reads a client's price overrides.
func (s *Store) PriceOverrides(ctx context.Context, clientID string) ([]domain.Price, error) {
	rows, err := s.db.Query(ctx, priceOverridesSQL, clientID)
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

// expiryDue is the condition of a balance whose expiry is within notice ($1) or past and not
// yet notified for.
const expiryDue = `expires_at IS NOT NULL AND expires_at <= now() + make_interval(secs => $1)
	AND (expired_notified_for IS DISTINCT FROM expires_at
		AND (expires_at <= now() OR expiring_notified_for IS DISTINCT FROM expires_at))`

// ExpiriesDue reads up to limit balances, after the client id after ("" from the first), that
// expire within notice, or have expired, and whose expiry was not yet notified for, in client
// id order; it locks each, skipping those a debit holds (the next run takes them), and returns
// the ones it locked, as they are once locked, and next, the client id to go on after (""
// when there are no more). The candidates are read without a lock, across clients (a sweep's
// read, which a database distributed by client answers from every node); each is then locked
// by a statement naming that one client, all in one round trip, never a FOR UPDATE across
// clients (docs/operations.md#past-one-postgresql).
func (s *Store) ExpiriesDue(ctx context.Context, notice time.Duration, after string, limit int) (due []domain.ExpiryDue, next string, err error) {
	var from any // NULL: from the first
	if after != "" {
		from = after
	}
	rows, err := s.db.Query(ctx, `SELECT client_id::text FROM accounts.balances
		WHERE `+expiryDue+` AND ($2::uuid IS NULL OR client_id > $2::uuid)
		ORDER BY client_id LIMIT $3`, notice.Seconds(), from, limit)
	if err != nil {
		return nil, "", fmt.Errorf("expiries due: %w", err)
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, "", fmt.Errorf("expiries due: %w", err)
	}
	if len(candidates) == 0 {
		return nil, "", nil
	}
	if len(candidates) == limit {
		next = candidates[len(candidates)-1]
	}
	b := &pgx.Batch{}
	for _, id := range candidates {
		b.Queue(`SELECT client_id::text, balance, expires_at, expiring_notified_for, expired_notified_for, now()
			FROM accounts.balances WHERE client_id = $2 AND `+expiryDue+` FOR UPDATE SKIP LOCKED`, notice.Seconds(), id).QueryRow(func(row pgx.Row) error {
			var d domain.ExpiryDue
			err := row.Scan(&d.ClientID, &d.Balance, &d.ExpiresAt, &d.ExpiringNotifiedFor, &d.ExpiredNotifiedFor, &d.Now)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // held by a debit, or no longer due
			}
			due = append(due, d)
			return err
		})
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, "", fmt.Errorf("expiries due: %w", err)
	}
	return due, next, nil
}

// SetExpiryNotified records the expiries the events of ns were sent for, one statement per
// client in one round trip. The caller holds the balance locks (ExpiriesDue).
func (s *Store) SetExpiryNotified(ctx context.Context, ns []domain.ExpiryNotified) error {
	if len(ns) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, n := range ns {
		b.Queue(`UPDATE accounts.balances
			SET expiring_notified_for = coalesce($2, expiring_notified_for),
				expired_notified_for = coalesce($3, expired_notified_for)
			WHERE client_id = $1`, n.ClientID, n.Expiring, n.Expired)
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set expiry notified: %w", err)
	}
	return nil
}
