package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Work that spans clients runs in one round trip. A sweep runs one statement per client, each
// naming its client's rows alone. A batch of concurrent requests (record, settle) is written as
// the Store's spread says (tenancy.Spread): one statement whose items carry their client, or one
// per client, both queued in one pgx.Batch (docs/operations.md#past-one-postgresql).

// rowKey names a row of a client's: its client and id.
type rowKey struct{ client, id string }

func scanRowKey(r pgx.CollectableRow) (rowKey, error) {
	var k rowKey
	return k, r.Scan(&k.client, &k.id)
}

// lockEach reads the rows of keys that sql ($1 a client, $2 an id: a SELECT … FOR UPDATE SKIP
// LOCKED of one row) still finds, in the order of keys, in one batch: the second half of a
// sweep, whose candidates were found without a lock.
func lockEach[T any](ctx context.Context, st *Store, keys []rowKey, sql string, scan func(pgx.Row) (T, error)) ([]T, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	found := make([]*T, len(keys))
	b := &pgx.Batch{}
	for i, k := range keys {
		b.Queue(sql, k.client, k.id).QueryRow(func(row pgx.Row) error {
			v, err := scan(row)
			switch {
			case errors.Is(err, fault.ErrNotFound):
				return nil // settled meanwhile, or held by another transaction
			case err != nil:
				return err
			}
			found[i] = &v
			return nil
		})
	}
	if err := st.sendBatch(ctx, b); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(keys))
	for _, v := range found {
		if v != nil {
			out = append(out, *v)
		}
	}
	return out, nil
}

// eachClient runs sql ($1 a client, $2 the ids of its rows) once per client of keys, in one
// batch, clients in order, and returns the rows the statements affected in all.
func eachClient(ctx context.Context, st *Store, keys []rowKey, sql string, args ...any) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	var n int64
	for _, g := range tenancy.GroupByClient(len(keys), func(i int) string { return keys[i].client }, true) {
		ids := make([]string, len(g.Items))
		for k, i := range g.Items {
			ids[k] = keys[i].id
		}
		b.Queue(sql, append([]any{g.Client, ids}, args...)...).Exec(func(tag pgconn.CommandTag) error {
			n += tag.RowsAffected()
			return nil
		})
	}
	if err := st.sendBatch(ctx, b); err != nil {
		return 0, err
	}
	return n, nil
}
