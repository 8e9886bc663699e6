// Package store is the accounts service's access to its Postgres schema. Every function takes a
// pg.DB, so the same query serves a pool or a transaction; the caller owns the transaction.
// Every write to the ledger happens under the client's balance row lock (LockBalance).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// ClientRow is a client as stored, contact still sealed.
type ClientRow struct {
	ID               string
	Name             string
	ContactSealed    []byte
	Status           identity.Status
	Features         []string
	SecretFP         []byte
	Balance          int64
	BalanceExpiresAt *time.Time
	CreatedAt        time.Time
}

const clientColumns = `c.id::text, c.name, c.contact_sealed, c.status, c.features, c.secret_fingerprint,
	b.balance, b.expires_at, c.created_at`

func scanClient(row pgx.Row) (ClientRow, error) {
	var c ClientRow
	err := row.Scan(&c.ID, &c.Name, &c.ContactSealed, &c.Status, &c.Features, &c.SecretFP,
		&c.Balance, &c.BalanceExpiresAt, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fault.ErrNotFound
	}
	return c, err
}

// InsertClient creates a client with a zero balance.
func InsertClient(ctx context.Context, db pg.DB, c ClientRow) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO accounts.clients (id, name, contact_sealed, status, features, secret_fingerprint)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.ID, c.Name, c.ContactSealed, c.Status, c.Features, c.SecretFP)
	b.Queue(`INSERT INTO accounts.balances (client_id, balance, expires_at) VALUES ($1, 0, $2)`, c.ID, c.BalanceExpiresAt)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert client: %w", err)
	}
	return nil
}

// GetClient reads a client with its balance. lock takes the client row lock (FOR UPDATE OF c),
// which serialises credential changes of one client.
func GetClient(ctx context.Context, db pg.DB, id string, lock bool) (ClientRow, error) {
	q := `SELECT ` + clientColumns + ` FROM accounts.clients c JOIN accounts.balances b ON b.client_id = c.id
		WHERE c.id = $1`
	if lock {
		q += ` FOR UPDATE OF c`
	}
	c, err := scanClient(db.QueryRow(ctx, q, id))
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return c, fmt.Errorf("get client: %w", err)
	}
	return c, err
}

// ListClients reads a page of clients, newest first, with the total count.
func ListClients(ctx context.Context, db pg.DB, limit, offset int64) ([]ClientRow, int64, error) {
	var total int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM accounts.clients`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count clients: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT `+clientColumns+` FROM accounts.clients c
		JOIN accounts.balances b ON b.client_id = c.id ORDER BY c.created_at DESC, c.id LIMIT $1 OFFSET $2`, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list clients: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClientRow, error) { return scanClient(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list clients: %w", err)
	}
	return out, total, nil
}

// SetClientStatus changes a client's status.
func SetClientStatus(ctx context.Context, db pg.DB, id string, s identity.Status) error {
	return updateClient(ctx, db, `UPDATE accounts.clients SET status = $2, updated_at = now() WHERE id = $1`, id, s)
}

// SetClientFeatures replaces a client's features.
func SetClientFeatures(ctx context.Context, db pg.DB, id string, features []string) error {
	return updateClient(ctx, db, `UPDATE accounts.clients SET features = $2, updated_at = now() WHERE id = $1`, id, features)
}

func updateClient(ctx context.Context, db pg.DB, sql string, args ...any) error {
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("update client: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return nil
}

// WebOrigins reads a client's allowed page origins, in order.
func WebOrigins(ctx context.Context, db pg.DB, clientID string) ([]domain.WebOrigin, error) {
	rows, err := db.Query(ctx, `SELECT origin, created_at FROM accounts.web_origins WHERE client_id = $1 ORDER BY origin`, clientID)
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
func SetWebOrigins(ctx context.Context, db pg.DB, clientID string, origins []string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM accounts.web_origins WHERE client_id = $1 AND NOT (origin = ANY($2::text[]))`, clientID, origins)
	b.Queue(`INSERT INTO accounts.web_origins (client_id, origin) SELECT $1, o FROM unnest($2::text[]) AS o
		ON CONFLICT DO NOTHING`, clientID, origins)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("set web origins: %w", err)
	}
	return nil
}

// HasWebOrigin reports whether origin (canonical) is one of the client's.
func HasWebOrigin(ctx context.Context, db pg.DB, clientID, origin string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts.web_origins WHERE client_id = $1 AND origin = $2)`,
		clientID, origin).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("web origin: %w", err)
	}
	return ok, nil
}
