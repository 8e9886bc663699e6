package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// Every statement on a client's rows names the client (docs/operations.md#past-one-postgresql).
// A capability that reaches the service alone (a browser's transaction id, the OAuth state of an
// operator's redirect, a CAMARA request id or access token) is mapped to its client in
// client_lookups (migration 012): written in the transaction that writes its row, read in a
// statement of its own before the one on the row, never joined to it.

// The kinds of client_lookups.
const (
	lookupTransaction   = "transaction"
	lookupState         = "state"
	lookupCamaraRequest = "camara_request"
	lookupCamaraToken   = "camara_token"
)

// insertLookupSQL maps a capability ($1 kind, $2 key) to its client ($3) until $4 (NULL: until
// its row's purge deletes it).
const insertLookupSQL = `INSERT INTO verification.client_lookups (kind, key, client_id, expires_at) VALUES ($1, $2, $3, $4)`

// queueLookup queues the lookup of a capability in b, in front of the statement that writes its
// row: the batch is one transaction (an implicit one outside the Store's), so both commit or
// neither does.
func queueLookup(b *pgx.Batch, kind string, key []byte, clientID string, expires *time.Time) {
	b.Queue(insertLookupSQL, kind, key, clientID, expires)
}

// uuidKey is the key of a capability that is a uuid: its 16 bytes. A malformed id is no
// capability: fault.ErrNotFound.
func uuidKey(id string) ([]byte, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, fault.ErrNotFound
	}
	return u[:], nil
}

// clientOf returns the client of a capability of kind: fault.ErrNotFound when none is known.
func (st *Store) clientOf(ctx context.Context, kind string, key []byte) (string, error) {
	var clientID string
	err := st.db.QueryRow(ctx, `SELECT client_id::text FROM verification.client_lookups WHERE kind = $1 AND key = $2`,
		kind, key).Scan(&clientID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("the client of a %s: %w", kind, err)
	}
	return clientID, nil
}

// clientOfID is clientOf for a capability that is a uuid.
func (st *Store) clientOfID(ctx context.Context, kind, id string) (string, error) {
	key, err := uuidKey(id)
	if err != nil {
		return "", err
	}
	return st.clientOf(ctx, kind, key)
}

// sendBatch sends b and closes its results, which runs the callbacks of its queries in order.
func (st *Store) sendBatch(ctx context.Context, b *pgx.Batch) error {
	return st.db.SendBatch(ctx, b).Close()
}
