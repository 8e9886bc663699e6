// Package store is the accounts service's access to its Postgres schema, and the only place its
// SQL lives. A Store wraps a pg.DB, so the same query serves a pool or a transaction; the caller
// owns the transaction (pg.Stores hands the domain one of each).
// Every write to the ledger happens under the client's balance row lock (LockBalance).
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Store is the accounts schema behind a pool or a transaction: every query serves either, and
// the caller owns the transaction.
type Store struct {
	db     pg.DB
	outbox *outbox.Outbox
	// spread: how a batch of several clients' debits is written (WithSpread).
	spread tenancy.Spread
}

// New returns the store over db, a pool or a transaction.
func New(db pg.DB) *Store { return &Store{db: db} }

// WithOutbox returns the Store that also writes events (Emit) through box.
func (s *Store) WithOutbox(box *outbox.Outbox) *Store {
	c := *s
	c.outbox = box
	return &c
}

// WithSpread returns the Store that writes a batch of several clients' debits (LockForDebits,
// AppendLedger) as spread says (tenancy.SpreadOf the schema): one statement per step for the
// batch, or one per client.
func (s *Store) WithSpread(spread tenancy.Spread) *Store {
	c := *s
	c.spread = spread
	return &c
}

// Emit writes evs in the Store's transaction, so each commits with its fact or not at all.
// Outside a transaction it is refused: an event written on its own could outlive a fact that
// rolled back.
func (s *Store) Emit(ctx context.Context, evs ...events.Event) error {
	return s.outbox.Emit(ctx, s.db, evs...)
}

const clientColumns = `c.id::text, c.name, c.contact_sealed, c.status, c.features, c.operators, c.secret_fingerprint,
	b.balance, b.expires_at, b.low_balance_threshold, c.created_at`

func scanClient(row pgx.Row) (domain.ClientRow, error) {
	var c domain.ClientRow
	var ops map[string][]string
	err := row.Scan(&c.ID, &c.Name, &c.ContactSealed, &c.Status, &c.Features, &ops, &c.SecretFP,
		&c.Balance, &c.BalanceExpiresAt, &c.LowBalanceThreshold, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fault.ErrNotFound
	}
	c.Operators = principal.OperatorsFromMap(ops)
	return c, err
}

// operatorsValue is the clients.operators column's value of ops: SQL NULL for the default set,
// else the object of operator ids to methods.
func operatorsValue(ops principal.Operators) any {
	if ops.Default {
		return nil
	}
	return ops.Map()
}

// InsertClient creates a client with a zero balance.
func (s *Store) InsertClient(ctx context.Context, c domain.ClientRow) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO accounts.clients (id, name, contact_sealed, status, features, operators, secret_fingerprint)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.ID, c.Name, c.ContactSealed, c.Status, c.Features, operatorsValue(c.Operators), c.SecretFP)
	b.Queue(`INSERT INTO accounts.balances (client_id, balance, expires_at) VALUES ($1, 0, $2)`, c.ID, c.BalanceExpiresAt)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert client: %w", err)
	}
	return nil
}

// GetClient reads a client with its balance. lock takes the client row lock (FOR UPDATE OF c),
// which serialises credential changes of one client.
func (s *Store) GetClient(ctx context.Context, id string, lock bool) (domain.ClientRow, error) {
	q := `SELECT ` + clientColumns + ` FROM accounts.clients c JOIN accounts.balances b ON b.client_id = c.id
		WHERE c.id = $1 AND b.client_id = $1`
	if lock {
		q += ` FOR UPDATE OF c`
	}
	c, err := scanClient(s.db.QueryRow(ctx, q, id))
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return c, fmt.Errorf("get client: %w", err)
	}
	return c, err
}

// ListClients reads a page of clients, newest first, with the total, from one snapshot (pg.Page).
// The total counts the join the page reads (every client has its balance row). The operator's
// list of every client is the one read across clients' balances outside a sweep: a read
// without locks, which a database distributed by client answers from every node
// (docs/operations.md#past-one-postgresql).
func (s *Store) ListClients(ctx context.Context, limit, offset int64) ([]domain.ClientRow, int64, error) {
	q := pg.PageQuery{
		Columns: clientColumns,
		From:    `FROM accounts.clients c JOIN accounts.balances b ON b.client_id = c.id`,
		Order:   `c.created_at DESC, c.id`,
	}
	out, total, err := pg.Page(ctx, s.db, q, limit, offset, scanClient)
	if err != nil {
		return nil, 0, fmt.Errorf("list clients: %w", err)
	}
	return out, total, nil
}

// SetClientStatus changes a client's status, and tells the principal caches (ClientChanged).
func (s *Store) SetClientStatus(ctx context.Context, id string, status principal.Status) error {
	return s.updateClient(ctx, true, `UPDATE accounts.clients SET status = $2, updated_at = now() WHERE id = $1`, id, status)
}

// SetClientFeatures replaces a client's features, and tells the principal caches.
func (s *Store) SetClientFeatures(ctx context.Context, id string, features []string) error {
	return s.updateClient(ctx, true, `UPDATE accounts.clients SET features = $2, updated_at = now() WHERE id = $1`, id, features)
}

// SetClientOperators replaces the operators a client may use (the default set: NULL), and
// tells the principal caches.
func (s *Store) SetClientOperators(ctx context.Context, id string, ops principal.Operators) error {
	return s.updateClient(ctx, true, `UPDATE accounts.clients SET operators = $2, updated_at = now() WHERE id = $1`, id, operatorsValue(ops))
}

// SetLowBalanceThreshold sets a client's own low-balance threshold; nil takes the service's
// default again. No principal carries it: no notice.
func (s *Store) SetLowBalanceThreshold(ctx context.Context, id string, threshold *int64) error {
	return s.updateClient(ctx, false, `UPDATE accounts.balances SET low_balance_threshold = $2 WHERE client_id = $1`, id, threshold)
}

// updateClient runs sql, an update of client id ($1) to value ($2), with the notice that its
// principals are stale (ClientChanged) in the same transaction when notice is set. No row is
// fault.ErrNotFound.
func (s *Store) updateClient(ctx context.Context, notice bool, sql, id string, value any) error {
	b := &pgx.Batch{}
	var n int64
	b.Queue(sql, id, value).Exec(func(tag pgconn.CommandTag) error {
		n = tag.RowsAffected()
		return nil
	})
	if notice {
		queueNotice(b, principals.ClientNotice(id))
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update client: %w", err)
	}
	if n == 0 {
		return fault.ErrNotFound
	}
	return nil
}

// WebOrigins reads a client's allowed page origins, in order.
func (s *Store) WebOrigins(ctx context.Context, clientID string) ([]domain.WebOrigin, error) {
	rows, err := s.db.Query(ctx, `SELECT origin, created_at FROM accounts.web_origins WHERE client_id = $1 ORDER BY origin`, clientID)
	if err != nil {
		return nil, fmt.Errorf("web origins: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[domain.WebOrigin])
	if err != nil {
		return nil, fmt.Errorf("web origins: %w", err)
	}
	return out, nil
}

// SetWebOrigins replaces a client's origins with origins (canonical, distinct), keeping the
// creation time of those it already had. db must be a transaction holding the client row lock.
func (s *Store) SetWebOrigins(ctx context.Context, clientID string, origins []string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM accounts.web_origins WHERE client_id = $1 AND NOT (origin = ANY($2::text[]))`, clientID, origins)
	b.Queue(`INSERT INTO accounts.web_origins (client_id, origin) SELECT $1, o FROM unnest($2::text[]) AS o
		ON CONFLICT DO NOTHING`, clientID, origins)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set web origins: %w", err)
	}
	return nil
}

// HasWebOrigin reports whether origin (canonical) is one of the client's.
func (s *Store) HasWebOrigin(ctx context.Context, clientID, origin string) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts.web_origins WHERE client_id = $1 AND origin = $2)`,
		clientID, origin).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("web origin: %w", err)
	}
	return ok, nil
}

// RedirectURIs reads a client's registered redirect URIs, in order.
func (s *Store) RedirectURIs(ctx context.Context, clientID string) ([]domain.RedirectURI, error) {
	rows, err := s.db.Query(ctx, `SELECT uri, created_at FROM accounts.redirect_uris WHERE client_id = $1 ORDER BY uri`, clientID)
	if err != nil {
		return nil, fmt.Errorf("redirect uris: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[domain.RedirectURI])
	if err != nil {
		return nil, fmt.Errorf("redirect uris: %w", err)
	}
	return out, nil
}

// SetRedirectURIs replaces a client's redirect URIs with uris (valid, distinct), keeping the
// registration time of those it already had.
func (s *Store) SetRedirectURIs(ctx context.Context, clientID string, uris []string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM accounts.redirect_uris WHERE client_id = $1 AND NOT (uri = ANY($2::text[]))`, clientID, uris)
	b.Queue(`INSERT INTO accounts.redirect_uris (client_id, uri) SELECT $1, u FROM unnest($2::text[]) AS u
		ON CONFLICT DO NOTHING`, clientID, uris)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set redirect uris: %w", err)
	}
	return nil
}

// ClientChanged tells every replica's WatchPrincipals streams, when the store's transaction
// commits, that the client's principals are stale. The store's changes of the clients row send
// it themselves; a change of client configuration kept elsewhere that goes into the principal
// must call it in its own transaction.
func (s *Store) ClientChanged(ctx context.Context, clientID string) error {
	if _, err := s.db.Exec(ctx, noticeSQL, principals.Channel, principals.ClientNotice(clientID)); err != nil {
		return fmt.Errorf("client changed: %w", err)
	}
	return nil
}

// noticeSQL sends a notice of a principal change on principals.Channel. A statement of its own,
// on no table: a database distributed by client runs it on the coordinator, where the replicas
// listen, which a trigger on a distributed table would not (docs/operations.md#past-one-postgresql).
const noticeSQL = `SELECT pg_notify($1, $2)`

// queueNotice queues the notice of a principal change behind the statements of the change in b.
// It is sent in the change's transaction (a batch sent outside one is a transaction of its
// own), so PostgreSQL delivers it when, and only if, the change commits: a revoked key is never
// left cached as valid for want of its notice, nor dropped for a change rolled back. Every store
// method that changes what a principal is made of (a key's or token's revocation or expiry, the
// client's status, features or operators) queues it; inserts need none, nothing being cached
// for them yet.
func queueNotice(b *pgx.Batch, payload string) {
	b.Queue(noticeSQL, principals.Channel, payload)
}
