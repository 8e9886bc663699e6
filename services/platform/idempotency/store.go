package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/pg"
)

// keys holds the SQL of one schema's idempotency_keys table, so the interceptor holds none. A
// key's row is addressed by the client, the credential and the key.
type keys struct {
	pool  *pgxpool.Pool
	table string
}

// row is a key's row as the interceptor reads it.
type row struct {
	state       string
	response    []byte
	requestHash []byte
	method      string
	created     time.Time
	updated     time.Time
}

// claim inserts the key as RUNNING; false when it exists already.
func (k keys) claim(ctx context.Context, client, credential, key, method string, hash []byte) (bool, error) {
	tag, err := k.pool.Exec(ctx, `INSERT INTO `+k.table+` (client_id, credential, key, method, request_hash, state)
		VALUES ($1, $2, $3, $4, $5, 'RUNNING') ON CONFLICT DO NOTHING`, client, credential, key, method, hash)
	if err != nil {
		return false, fmt.Errorf("idempotency: claim key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// read reads a key's row; false when there is none.
func (k keys) read(ctx context.Context, client, credential, key string) (row, bool, error) {
	var r row
	err := k.pool.QueryRow(ctx, `SELECT state, response, request_hash, method, created_at, updated_at FROM `+k.table+`
		WHERE client_id = $1 AND credential = $2 AND key = $3`, client, credential, key).
		Scan(&r.state, &r.response, &r.requestHash, &r.method, &r.created, &r.updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("idempotency: read key: %w", err)
	}
	return r, true, nil
}

// expire deletes a key's row if it was last updated at updated: a concurrent taker-over that
// changed it meanwhile keeps it.
func (k keys) expire(ctx context.Context, client, credential, key string, updated time.Time) error {
	if _, err := k.pool.Exec(ctx, `DELETE FROM `+k.table+` WHERE client_id = $1 AND credential = $2 AND key = $3 AND updated_at = $4`,
		client, credential, key, updated); err != nil {
		return fmt.Errorf("idempotency: expire key: %w", err)
	}
	return nil
}

// done stores a key's sealed answer and its subject (nil: none).
func (k keys) done(ctx context.Context, client, credential, key string, sealed []byte, subject *string) error {
	_, err := k.pool.Exec(ctx, `UPDATE `+k.table+` SET state = 'DONE', response = $4, subject = $5, updated_at = now()
		WHERE client_id = $1 AND credential = $2 AND key = $3`, client, credential, key, sealed, subject)
	return err
}

// release deletes a key's row, so that a retry runs again.
func (k keys) release(ctx context.Context, client, credential, key string) error {
	_, err := k.pool.Exec(ctx, `DELETE FROM `+k.table+` WHERE client_id = $1 AND credential = $2 AND key = $3`, client, credential, key)
	return err
}

// purge deletes the keys older than retention.
func (k keys) purge(ctx context.Context, retention time.Duration) error {
	_, err := k.pool.Exec(ctx, `DELETE FROM `+k.table+` WHERE created_at < now() - $1::interval`, retention.String())
	return err
}

// forget deletes the client's answers tagged with subject, through db (the caller's
// transaction).
func (k keys) forget(ctx context.Context, db pg.DB, clientID, subject string) error {
	_, err := db.Exec(ctx, `DELETE FROM `+k.table+` WHERE client_id = $1 AND subject = $2`, clientID, subject)
	return err
}
