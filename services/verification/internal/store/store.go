// Package store is the verification service's access to its Postgres schema, and holds all of
// its SQL. A Store wraps a pg.DB, so the same query serves a pool or a transaction
// (pg.Stores hands either to the domain packages, as their own ports). Every statement on a
// client's rows names the client (docs/operations.md#past-one-postgresql). Each step of a
// verification is one round trip of data-modifying CTEs: one statement for a batch of many
// clients, or one per client on a distributed database (Store.WithSpread). The settle queues what Connect must hear in that batch too; the
// other final steps insert their jobs through River in the same transaction.
package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
)

// Store runs the service's statements on a pool or inside a transaction.
type Store struct {
	db    pg.DB
	queue *jobs.Queue
	// noDrains: the settles insert no drain jobs (WithoutDrains).
	noDrains bool
	// spread: how a batch of several clients' verifications is written (WithSpread).
	spread tenancy.Spread
}

// New returns the Store over db, a pool or a transaction.
func New(db pg.DB) *Store { return &Store{db: db} }

// WithJobs returns the Store that also writes jobs (events, Connect's records) to queue.
func (st *Store) WithJobs(queue *jobs.Queue) *Store {
	c := *st
	c.queue = queue
	return &c
}

// WithSpread returns the Store that writes a batch of several clients' verifications as spread
// says (tenancy.SpreadOf the service's schema): one statement for the batch, or one per client.
func (st *Store) WithSpread(spread tenancy.Spread) *Store {
	c := *st
	c.spread = spread
	return &c
}

// WithoutDrains returns the Store whose settles still queue what Connect must hear (the relay
// queue) but insert no drain job to send it: for a process that does not reach Connect, whose
// drains no worker would ever take (River keeps a job of a queue nobody works for good). The
// rows wait for a process that does (relay.SweepJob).
func (st *Store) WithoutDrains() *Store {
	c := *st
	c.noDrains = true
	return &c
}

// enqueue inserts params in the Store's transaction, so they commit with its fact or not at
// all; outside a transaction it is refused: a job written on its own could outlive a fact that
// rolled back.
func (st *Store) enqueue(ctx context.Context, params []river.InsertManyParams) error {
	if st.queue == nil {
		return errors.New("store: jobs written without a queue")
	}
	if _, ok := st.db.(pgx.Tx); !ok {
		return fmt.Errorf("enqueue jobs: %w", pg.ErrNoTx)
	}
	return st.queue.InsertMany(ctx, st.db, params)
}

// Emit writes evs in the Store's transaction (refused outside one).
func (st *Store) Emit(ctx context.Context, evs ...events.Event) error {
	params, err := outbox.Params(evs...)
	if err != nil {
		return err
	}
	return st.enqueue(ctx, params)
}

// InsertSession stores a capture session. One waiting for its operator's authorization
// (NETWORK_API) maps its state to its client too, in the same transaction: the operator's
// redirect brings the state alone.
func (st *Store) InsertSession(ctx context.Context, s domain.Session) error {
	method := s.Method
	if method == "" {
		method = "HEADER_ENRICHMENT"
	}
	b := &pgx.Batch{}
	if s.StateHash != nil {
		queueLookup(b, lookupState, s.StateHash, s.ClientID, &s.ExpiresAt)
	}
	b.Queue(`INSERT INTO verification.sessions
		(id, client_id, source, operator_id, status, platform, device_id, app_version, created_at, expires_at,
		 method, state_hash, oauth_sealed)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		s.ID, s.ClientID, s.Source, s.OperatorID, s.Status, s.Platform, s.DeviceID, s.AppVersion, s.CreatedAt, s.ExpiresAt,
		method, s.StateHash, s.OAuthSealed)
	if err := st.sendBatch(ctx, b); err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// RecordVerifications consumes the client's unused session of each verification and records
// it, listing the PENDING ones as unsettled, in one round trip and one transaction: one
// statement for the batch, or one per client (Store.WithSpread). recorded[i] is false when
// vs[i]'s session is missing, of another client, or used. Two of vs must not name one session
// (the unique index would fail them all): the caller keeps one.
//
// With limit.Max above 0, a verification with counted[i] set whose client has limit.Max of its
// number since limit.Since, counting the earlier ones of vs, is neither recorded nor consumes its
// session: recorded[i].Limited, with the oldest counted. The count is NumberAttempts', taken in
// the same statement, so a verify pays no round trip of its own for it. counted may be nil
// (none).
func (st *Store) RecordVerifications(ctx context.Context, vs []domain.Verification, limit domain.NumberLimit, counted []bool) (recorded []domain.Recorded, err error) {
	recorded = make([]domain.Recorded, len(vs))
	b := &pgx.Batch{}
	// Sessions in the order of their client and id: two batches lock the sessions they share in
	// one order.
	for _, g := range st.spread.Groups(len(vs), func(i int) string { return vs[i].ClientID }, true) {
		slices.SortFunc(g.Items, func(a, b int) int {
			return cmp.Or(strings.Compare(vs[a].ClientID, vs[b].ClientID), strings.Compare(vs[a].SessionID, vs[b].SessionID))
		})
		cols := struct {
			client, id, session, status, outcome, reason, operator, service, product []string
			sealed, hash                                                             [][]byte
			counted                                                                  []bool
			n                                                                        []int32
		}{}
		for _, i := range g.Items {
			v := vs[i]
			cols.client, cols.id, cols.session = append(cols.client, v.ClientID), append(cols.id, v.ID), append(cols.session, v.SessionID)
			cols.status, cols.outcome, cols.reason = append(cols.status, string(v.Status)), append(cols.outcome, string(v.Outcome)), append(cols.reason, v.Reason)
			cols.operator, cols.service, cols.product = append(cols.operator, v.OperatorID), append(cols.service, v.ServiceType), append(cols.product, productOf(v))
			cols.sealed, cols.hash = append(cols.sealed, v.NumberSealed), append(cols.hash, v.NumberHash)
			cols.counted, cols.n = append(cols.counted, i < len(counted) && counted[i]), append(cols.n, int32(i+1))
		}
		args := []any{cols.client, cols.id, cols.session, cols.status, cols.outcome, cols.reason, cols.operator, cols.service,
			cols.sealed, cols.hash, cols.product, limit.Max, limit.Since, cols.counted, cols.n}
		b.Queue(recordSQL.For(st.spread), g.Args(args)...).Query(func(rows pgx.Rows) error {
			var (
				n       int
				created *time.Time
				limited bool
				oldest  time.Time
			)
			_, err := pgx.ForEachRow(rows, []any{&n, &created, &limited, &oldest}, func() error {
				r := &recorded[n-1]
				if r.OK = created != nil; r.OK {
					r.CreatedAt = *created
				}
				if r.Limited = limited; limited {
					r.Oldest = oldest
				}
				return nil
			})
			return err
		})
	}
	if err := st.sendBatch(ctx, b); err != nil {
		return nil, fmt.Errorf("record verifications: %w", err)
	}
	return recorded, nil
}

// recordSQL is RecordVerifications' statement (tenancy.NewStatement): $1 to $11 the
// verifications' columns (each item's client first), $12 and $13 the number limit, $14 which
// items it counts, $15 their places in the batch (n); per client, $16 the statement's client.
// Every item answers one row, by its place: when it was recorded, or NULL, and whether the
// limit held it back, with the oldest attempt counted. The unsettled queue (coordinator-local)
// is written from what the statement recorded.
var recordSQL = tenancy.NewStatement(`WITH i AS (
		SELECT * FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::text[]::uuid[], $4::text[], $5::text[], $6::text[],
			$7::text[], $8::text[], $9::bytea[], $10::bytea[], $11::text[], $14::bool[], $15::int[])
			AS i(client_id, id, session_id, status, outcome, reason, operator_id, service_type, number_sealed, number_hash, product, counted, n)),
	c AS (
		-- The attempts before each counted item: the client's verifications of the number since
		-- $13, and the counted items ahead of it here. No count at all without a limit.
		SELECT i.n, i.counted AND $12::int > 0 AND a.attempts + count(*) OVER w - 1 >= $12::int AS limited,
			coalesce(a.oldest, now()) AS oldest
		FROM i CROSS JOIN LATERAL (
			SELECT count(*) AS attempts, min(past.created_at) AS oldest FROM verification.verifications past
			WHERE i.counted AND $12::int > 0 AND past.client_id = {client i} AND past.number_hash = i.number_hash
				AND past.created_at >= $13) a
		WINDOW w AS (PARTITION BY i.client_id, i.number_hash, i.counted ORDER BY i.n)),
	ok AS (
		SELECT i.* FROM i JOIN c USING (n) WHERE NOT c.limited),
	s AS (
		UPDATE verification.sessions s SET used_at = now() FROM ok
		WHERE s.client_id = {client ok} AND s.id = ok.session_id AND s.used_at IS NULL
		RETURNING s.client_id, s.id),
	v AS (
		INSERT INTO verification.verifications
			(id, client_id, session_id, status, outcome, reason, operator_id, service_type, number_sealed, number_hash, settled_at, product)
		SELECT ok.id, ok.client_id, s.id, ok.status, ok.outcome, ok.reason, ok.operator_id, ok.service_type, ok.number_sealed, ok.number_hash,
			CASE WHEN ok.status = 'PENDING' THEN NULL ELSE now() END, ok.product
		FROM ok JOIN s ON s.client_id = ok.client_id AND s.id = ok.session_id
		RETURNING client_id, id, created_at, status),
	u AS (
		INSERT INTO verification.unsettled (client_id, id, recorded_at) SELECT client_id, id, created_at FROM v WHERE status = 'PENDING')
	SELECT i.n, v.created_at, c.limited, c.oldest FROM i JOIN c USING (n) LEFT JOIN v ON v.client_id = i.client_id AND v.id = i.id`, 16)

// SessionVerification reads the verification that used a client's session: ErrNotFound when
// the session does not exist for this client, a nil verification when it exists unused.
func (st *Store) SessionVerification(ctx context.Context, clientID, sessionID string) (*domain.Verification, error) {
	var exists bool
	if err := st.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM verification.sessions WHERE id = $1 AND client_id = $2)`,
		sessionID, clientID).Scan(&exists); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if !exists {
		return nil, fault.ErrNotFound
	}
	v, err := scanVerification(st.db.QueryRow(ctx, `SELECT `+verificationColumns+` FROM verification.verifications
		WHERE client_id = $1 AND session_id = $2 AND released_at IS NULL`, clientID, sessionID))
	if errors.Is(err, fault.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session verification: %w", err)
	}
	return &v, nil
}

// SettleVerifications records the charge of each PENDING verification of ss and, for Connect,
// its verification.completed event and, for a VERIFIED one, the record of the number, in one
// batch: a statement that updates the verifications in place (migration 008) and queues them
// in the relay queue (one for the batch, or one per client: Store.WithSpread); then one that takes them off the unsettled queue and, at most
// once per notification period of the process (jobs.Queue.Notify), inserts a drain job
// (relay.Drain) with the notification that wakes its workers (none WithoutDrains); a settle
// without one is drained by the next, or by relay.SweepJob. One round trip, atomic without a
// transaction of its own (a batch is one); inside one (the reconciler's) it is that
// transaction's. Connect hears them in the order of the batch (per client: the clients in the
// order they first come). settled[i] is false, and nothing written for it, when ss[i] was settled
// already (by a retry of the request, the reconciler, or an earlier item of ss naming the same
// verification).
func (st *Store) SettleVerifications(ctx context.Context, ss []domain.Settlement) (settled []bool, err error) {
	if st.queue == nil {
		return nil, errors.New("settle verifications: jobs written without a queue")
	}
	settled = make([]bool, len(ss))
	// The first item of a verification settles it; a second has nothing to settle.
	first := make([]int, 0, len(ss))
	seen := make(map[string]bool, len(ss))
	for i, s := range ss {
		if !seen[s.ID] {
			seen[s.ID] = true
			first = append(first, i)
		}
	}
	b := &pgx.Batch{}
	var clients, ids []string
	for _, g := range st.spread.Groups(len(first), func(j int) string { return ss[first[j]].ClientID }, false) {
		n := make([]int32, len(g.Items))
		gclients := make([]string, len(g.Items))
		gids := make([]string, len(g.Items))
		charged := make([]int64, len(g.Items))
		after := make([]int64, len(g.Items))
		evs := make([]string, len(g.Items))
		for k, j := range g.Items {
			i := first[j]
			s := ss[i]
			ev, err := outbox.EventJSON(s.Completed)
			if err != nil {
				return nil, fmt.Errorf("settle verifications: %w", err)
			}
			n[k], gclients[k], gids[k], charged[k], after[k], evs[k] = int32(i+1), s.ClientID, s.ID, s.Charged, s.BalanceAfter, string(ev)
			clients, ids = append(clients, s.ClientID), append(ids, s.ID)
		}
		b.Queue(settleSQL.For(st.spread), g.Args([]any{gclients, gids, charged, after, evs, n})...).Query(func(rows pgx.Rows) error {
			var i int
			_, err := pgx.ForEachRow(rows, []any{&i}, func() error {
				settled[i-1] = true
				return nil
			})
			return err
		})
	}
	opts := relay.Drain{}.InsertOpts()
	drain := !st.noDrains && st.queue.Notify(opts.Queue)
	b.Queue(settledSQL, clients, ids, drain, relay.DrainKind, opts.Queue, opts.MaxAttempts, jobs.InsertTopic(Schema))
	if err := st.sendBatch(ctx, b); err != nil {
		return nil, fmt.Errorf("settle verifications: %w", err)
	}
	return settled, nil
}

// TakeRelay takes up to limit rows of the relay queue, oldest first, that no other transaction
// holds, and deletes them: in the Store's transaction, so that they stay queued when it rolls
// back.
func (st *Store) TakeRelay(ctx context.Context, limit int) ([]relay.Item, error) {
	if _, ok := st.db.(pgx.Tx); !ok {
		return nil, fmt.Errorf("take the relay queue: %w", pg.ErrNoTx)
	}
	rows, err := st.db.Query(ctx, `WITH taken AS (
			DELETE FROM verification.relay_queue WHERE seq IN (
				SELECT seq FROM verification.relay_queue ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING seq, event, client_id, verification_id, number_hash, verified_at)
		SELECT event, client_id::text, verification_id::text, number_hash, verified_at FROM taken ORDER BY seq`, limit)
	if err != nil {
		return nil, fmt.Errorf("take the relay queue: %w", err)
	}
	var (
		items      []relay.Item
		event      string
		client, id string
		hash       []byte
		at         *time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&event, &client, &id, &hash, &at}, func() error {
		it := relay.Item{Event: json.RawMessage(event)}
		if at != nil {
			it.Number = &domain.VerifiedNumber{ClientID: client, VerificationID: id, NumberHash: hash, VerifiedAt: *at}
		}
		items = append(items, it)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("take the relay queue: %w", err)
	}
	return items, nil
}

// RelayBacklog is how many rows the relay queue holds and how long the oldest has waited
// (relay.Backlog).
func (st *Store) RelayBacklog(ctx context.Context) (n int64, oldest time.Duration, err error) {
	var secs float64
	if err := st.db.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(queued_at))::float8, 0)
		FROM verification.relay_queue`).Scan(&n, &secs); err != nil {
		return 0, 0, fmt.Errorf("relay backlog: %w", err)
	}
	return n, time.Duration(max(secs, 0) * float64(time.Second)), nil
}

// RelayQueue is relay's Taker: each Take is a transaction of stores.
type RelayQueue struct{ Stores pg.Stores[*Store] }

// Take implements relay.Taker.
func (q RelayQueue) Take(ctx context.Context, limit int, deliver func(ctx context.Context, items []relay.Item) error) (taken int, err error) {
	err = q.Stores.InTx(ctx, func(ctx context.Context, st *Store) error {
		items, err := st.TakeRelay(ctx, limit)
		if err != nil || len(items) == 0 {
			return err
		}
		taken = len(items)
		return deliver(ctx, items)
	})
	if err != nil {
		return 0, err
	}
	return taken, nil
}

// Schema is the Postgres schema the service owns, River's tables included.
const Schema = "verification"

// settleSQL settles PENDING verifications ($1 their clients, $2 their ids, $3 and $4 their
// charge and balance after, $5 their events, $6 their places in the batch; per client, $7 the
// statement's client, tenancy.NewStatement), then queues for Connect (relay.Item) what it settled, in the
// order of the batch: its event (outbox.EventJSON) and, when VERIFIED, its number's hash and
// settled time. It answers the place of each verification it settled.
var settleSQL = tenancy.NewStatement(`WITH i AS (
		SELECT * FROM unnest($1::text[]::uuid[], $2::text[]::uuid[], $3::bigint[], $4::bigint[], $5::text[], $6::int[])
			AS i(client_id, id, charged, balance_after, event, n)),
	s AS (
		UPDATE verification.verifications v
		SET status = v.outcome, charged = i.charged, balance_after = i.balance_after, settled_at = now()
		FROM i WHERE v.client_id = {client i} AND v.id = i.id AND v.status = 'PENDING'
		RETURNING v.client_id, v.id, v.number_hash, v.settled_at, v.outcome, i.event, i.n),
	q AS (
		INSERT INTO verification.relay_queue (event, client_id, verification_id, number_hash, verified_at)
		SELECT s.event, s.client_id, s.id, CASE WHEN s.outcome = 'VERIFIED' THEN s.number_hash END,
			CASE WHEN s.outcome = 'VERIFIED' THEN s.settled_at END
		FROM s ORDER BY s.n)
	SELECT n FROM s`, 7)

// settledSQL ends a settle's batch, on the coordinator's own tables: it takes the settled
// verifications ($1 their clients, $2 their ids) off the unsettled queue, which lists exactly
// the PENDING ones (a record writes a PENDING verification and its row in one statement, a
// settle or a rejection changes one and removes the other in one transaction), and when $3 says
// so inserts a drain job (relay.Drain: $4 kind, $5 queue, $6 attempts) with the notification on
// $7 that wakes its workers, if it took any.
var settledSQL = `WITH u AS (
		DELETE FROM verification.unsettled
		WHERE (client_id, id) IN (SELECT * FROM unnest($1::text[]::uuid[], $2::text[]::uuid[]))
		RETURNING id),
	job AS (
		INSERT INTO ` + jobs.Table(Schema) + ` (args, kind, queue, max_attempts)
		SELECT '{}', $4, $5, $6 FROM u WHERE $3 HAVING count(*) > 0
		RETURNING queue)
	SELECT count(pg_notify($7, ` + jobs.InsertPayloadSQL("q") + `)) FROM job AS j(q)`

// RejectVerification marks a client's PENDING verification whose charge was refused, no longer
// unsettled, and releases its session (released_at, and the session's used_at), so the blob
// can be verified again once the balance allows: a statement on the client's rows, then the
// unsettled queue's, in one batch. rejected is false when it was no longer PENDING.
func (st *Store) RejectVerification(ctx context.Context, clientID, id string) (rejected bool, err error) {
	b := &pgx.Batch{}
	b.Queue(`WITH v AS (
			UPDATE verification.verifications SET status = 'REJECTED', settled_at = now(), released_at = now()
			WHERE client_id = $1 AND id = $2 AND status = 'PENDING'
			RETURNING session_id)
		UPDATE verification.sessions SET used_at = NULL WHERE client_id = $1 AND id IN (SELECT session_id FROM v)`,
		clientID, id).Exec(func(tag pgconn.CommandTag) error {
		rejected = tag.RowsAffected() == 1
		return nil
	})
	b.Queue(`DELETE FROM verification.unsettled WHERE client_id = $1 AND id = $2`, clientID, id)
	if err := st.sendBatch(ctx, b); err != nil {
		return false, fmt.Errorf("reject verification: %w", err)
	}
	return rejected, nil
}

const verificationColumns = `id::text, client_id::text, session_id::text, status, outcome, reason, operator_id,
	service_type, number_sealed, number_hash, charged, balance_after, created_at, product`

// productOf is v's product, VERIFY when unset.
func productOf(v domain.Verification) string {
	if v.Product == "" {
		return domain.ProductVerify
	}
	return v.Product
}

func scanVerification(row pgx.Row) (domain.Verification, error) {
	var v domain.Verification
	err := row.Scan(&v.ID, &v.ClientID, &v.SessionID, &v.Status, &v.Outcome, &v.Reason, &v.OperatorID,
		&v.ServiceType, &v.NumberSealed, &v.NumberHash, &v.Charged, &v.BalanceAfter, &v.CreatedAt, &v.Product)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fault.ErrNotFound
	}
	return v, err
}

// settledStatuses are the verifications a client sees: PENDING ones appear once settled,
// REJECTED ones were answered 402 and are not verifications.
const settledStatuses = `status IN ('VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED', 'EXPIRED')`

// GetVerification reads a settled verification of a client.
func (st *Store) GetVerification(ctx context.Context, clientID, id string) (domain.Verification, error) {
	v, err := scanVerification(st.db.QueryRow(ctx, `SELECT `+verificationColumns+` FROM verification.verifications
		WHERE id = $1 AND client_id = $2 AND `+settledStatuses, id, clientID))
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return v, fmt.Errorf("get verification: %w", err)
	}
	return v, err
}

// ListVerifications reads a page of a client's settled verifications, newest first, with its
// total, from one snapshot (pg.Page).
//
// The filters (status, reason, operator, method) are checked on the rows verifications_client
// (client_id, created_at DESC, id) reads, with no index of their own: each index is one more
// entry on every verify's insert, the hot path, and one on status would end the
// settle's heap-only update (migration 008). The list is a person's or a report's read of their
// own history, and a page of a common value is found within the newest rows; the total, like
// the status filter's before, reads the client's rows of the range.
func (st *Store) ListVerifications(ctx context.Context, clientID string, f domain.VerificationFilter, limit, offset int64) (domain.Page[domain.Verification], error) {
	var p domain.Page[domain.Verification]
	var err error
	p.Items, p.Total, err = pg.Page(ctx, st.db, pg.PageQuery{
		Columns: verificationColumns,
		From: `FROM verification.verifications WHERE client_id = $1 AND ` + settledStatuses + `
			AND ($2::text IS NULL OR status = $2) AND ($3::timestamptz IS NULL OR created_at >= $3)
			AND ($4::timestamptz IS NULL OR created_at < $4) AND ($5::text IS NULL OR reason = $5)
			AND ($6::text IS NULL OR operator_id = $6) AND ($7::text IS NULL OR service_type = $7)`,
		Order: "created_at DESC, verifications.id",
		Args:  []any{clientID, f.Status, f.From, f.To, f.Reason, f.OperatorID, f.Method},
	}, limit, offset, scanVerification)
	if err != nil {
		return p, fmt.Errorf("list verifications: %w", err)
	}
	return p, nil
}

// NumberAttempts counts a client's verifications of a number since a time, and returns the
// oldest of them.
func (st *Store) NumberAttempts(ctx context.Context, clientID string, hash []byte, since time.Time) (n int, oldest *time.Time, err error) {
	err = st.db.QueryRow(ctx, `SELECT count(*), min(created_at) FROM verification.verifications
		WHERE number_hash = $1 AND created_at >= $2 AND client_id = $3`, hash, since, clientID).Scan(&n, &oldest)
	if err != nil {
		return 0, nil, fmt.Errorf("number attempts: %w", err)
	}
	return n, oldest, nil
}

// StalePending reads PENDING verifications older than before, found in the unsettled queue,
// skipping those another replica is settling. Inside a transaction, it locks them until it
// ends. The queue names their clients, and each is taken by its client and id: a lock is never
// asked across clients (docs/operations.md#past-one-postgresql).
func (st *Store) StalePending(ctx context.Context, before time.Time, limit int) ([]domain.Verification, error) {
	// Oldest first along unsettled_recorded, stopping at limit: a long backlog (accounts away
	// for an hour) costs each pass limit rows, not the backlog.
	rows, err := st.db.Query(ctx, `SELECT client_id::text, id::text FROM verification.unsettled
		WHERE recorded_at < $1 ORDER BY recorded_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("stale pending: %w", err)
	}
	keys, err := pgx.CollectRows(rows, scanRowKey)
	if err != nil {
		return nil, fmt.Errorf("stale pending: %w", err)
	}
	out, err := lockEach(ctx, st, keys, `SELECT `+verificationColumns+` FROM verification.verifications
		WHERE client_id = $1 AND id = $2 AND status = 'PENDING' FOR UPDATE SKIP LOCKED`, scanVerification)
	if err != nil {
		return nil, fmt.Errorf("stale pending: %w", err)
	}
	return out, nil
}
