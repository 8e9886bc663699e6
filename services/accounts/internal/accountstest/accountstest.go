// Package accountstest builds the accounts domain on a fresh, migrated PostgreSQL database for
// tests: real pool, real schema, no fakes.
package accountstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Pepper and DataKeys are fixed test secrets.
const (
	Pepper   = "test-pepper-test-pepper-test-pepper-0123"
	DataKeys = "t1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

// Env is the accounts domain over a fresh database.
type Env struct {
	Pool        *pgxpool.Pool
	URL         string
	Ledger      *billing.Ledger
	Credentials *credentials.Service
	Clients     *clients.Service
	Keyring     *crypto.Keyring
	// Queue is accounts' River queue, not run: a test that wants events forwarded registers
	// the forward worker on it and runs it.
	Queue *jobs.Queue

	newLedger func() *billing.Ledger
}

// New migrates a fresh database and builds the domain with prices, writing debit batches as
// the service would on that database (tenancy.SpreadOf).
func New(t testing.TB, prices billing.Prices) *Env {
	t.Helper()
	return NewSpread(t, prices, -1)
}

// NewSpread is New with debit batches written as spread says (-1: as the service would).
func NewSpread(t testing.TB, prices billing.Prices, spread tenancy.Spread) *Env {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pg.Migrate(ctx, pool, "accounts", migrations.FS); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "accounts"); err != nil {
		t.Fatal(err)
	}
	// make test-partitioned: the tenant tables hash-partitioned by client_id, as the app does.
	if err := tenancy.PartitionFromEnv(ctx, pool, migrations.Tables); err != nil {
		t.Fatal(err)
	}
	// Events are written to the queue and stay there: no worker forwards them, so a test reads
	// them back (Events) as the transaction left them.
	queue, err := jobs.New(pool, jobs.Options{Schema: "accounts", Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	box := outbox.New(queue)
	fp, err := crypto.NewFingerprinter(Pepper)
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := crypto.ParseKeyring(DataKeys)
	if err != nil {
		t.Fatal(err)
	}
	if spread < 0 {
		if spread, err = tenancy.SpreadOf(ctx, pool, migrations.Tables); err != nil {
			t.Fatal(err)
		}
	}
	credStores := pg.NewStores(pool, func(db pg.DB) credentials.Store { return store.New(db).WithOutbox(box) })
	ledgerStores := pg.NewStores(pool, func(db pg.DB) billing.Store { return store.New(db).WithOutbox(box).WithSpread(spread) })
	clientStores := pg.NewStores(pool, func(db pg.DB) clients.Store { return store.New(db).WithOutbox(box) })
	creds := credentials.New(credStores.Pool(), credStores, fp, zaptest.NewLogger(t))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { creds.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Debit batches in piped transactions, as the service runs them (app.go), on the one pool.
	newLedger := func() *billing.Ledger {
		return billing.NewLedger(ledgerStores.Pool(), ledgerStores, prices).WithBatchStore(ledgerStores.Piped())
	}
	ledger := newLedger()
	return &Env{
		Pool: pool, URL: url, Ledger: ledger, Credentials: creds, Keyring: keyring, Queue: queue,
		Clients:   clients.New(clientStores.Pool(), clientStores, keyring, creds, ledger),
		newLedger: newLedger,
	}
}

// Replica is another Ledger over the same database, as a second replica of accounts runs one:
// its own debit batches and its own view of the clients, the same rows.
func (e *Env) Replica() *billing.Ledger { return e.newLedger() }

// Client creates an ACTIVE client with balance and features, and returns it with its
// credentials.
func (e *Env) Client(t testing.TB, balance int64, features ...string) clients.Created {
	t.Helper()
	c, err := e.Clients.Create(context.Background(), clients.CreateRequest{
		Name:           "Test client",
		Contact:        domain.Contact{Name: "Tess Ter", Email: "tess@example.com", Phone: "0011223344"},
		InitialBalance: balance,
		Features:       features,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ExpireBalance moves a client's balance expiry into the past, as time passing would.
func (e *Env) ExpireBalance(t testing.TB, clientID string) {
	t.Helper()
	_, err := e.Pool.Exec(context.Background(), `UPDATE accounts.balances SET expires_at = now() - interval '1 second' WHERE client_id = $1`, clientID)
	if err != nil {
		t.Fatal(err)
	}
}

// CheckLedger fails t unless the client's balance equals the sum of its ledger.
func (e *Env) CheckLedger(t testing.TB, clientID string) int64 {
	t.Helper()
	sum, balance, err := store.New(e.Pool).LedgerSum(context.Background(), clientID)
	if err != nil {
		t.Fatal(err)
	}
	if sum != balance {
		t.Fatalf("balance %d != ledger sum %d", balance, sum)
	}
	return balance
}

// Events reads the events written for clientID, oldest first, of the types given (all when
// none): the forward jobs in accounts' queue, as the facts' transactions committed them.
func Events(t testing.TB, db pg.DB, clientID string, types ...string) []events.Event {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT e FROM accounts.river_job j, jsonb_array_elements(j.args->'events') WITH ORDINALITY AS x(e, n)
		WHERE j.kind = $1 AND e->>'client_id' = $2 AND (coalesce(cardinality($3::text[]), 0) = 0 OR e->>'type' = ANY($3))
		ORDER BY j.id, x.n`, outbox.Kind, clientID, types)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]events.Event, 0, len(all))
	for _, b := range all {
		var a outbox.EventArgs
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Event())
	}
	return out
}

// Events reads the events written for clientID (the package's Events).
func (e *Env) Events(t testing.TB, clientID string, types ...string) []events.Event {
	t.Helper()
	return Events(t, e.Pool, clientID, types...)
}

// Deadline is a context for one test step.
func Deadline(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
