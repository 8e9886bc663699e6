// Package jobs is the one background-work engine of mnv: River (riverqueue/river) on the
// service's own pool, its tables in the service's own schema. Work that must follow a fact is
// inserted in the fact's transaction (Insert with the store's transaction), so there is no
// fact without its job and no job without its fact; River then works it at least once, with
// retries, backoff and jitter, and rescues what a dead process held.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// Migrate brings River's tables in schema up to date. It holds a session advisory lock of the
// schema's River tables meanwhile, so replicas starting together migrate once; schema must
// exist (the service's own migrations create it first). River's migrations cannot run in one
// transaction (one adds an enum value that the next uses), so the lock is a session's.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet()})
	if err != nil {
		return fmt.Errorf("river migrations of %s: %w", schema, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrations of %s: %w", schema, err)
	}
	defer conn.Release()
	lock := schema + ".river_migrate"
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, lock); err != nil {
		return fmt.Errorf("river migrations of %s: lock: %w", schema, err)
	}
	defer func() {
		// A failed unlock ends with the session: close it rather than return it to the pool locked.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, lock); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations of %s: %w", schema, err)
	}
	drop := "DROP INDEX IF EXISTS " + pgx.Identifier{schema, unusedIndexes[0]}.Sanitize()
	for _, name := range unusedIndexes[1:] {
		drop += ", " + pgx.Identifier{schema, name}.Sanitize()
	}
	if _, err := conn.Exec(ctx, drop); err != nil {
		return fmt.Errorf("river migrations of %s: drop unused indexes: %w", schema, err)
	}
	return nil
}

// unusedIndexes are River's GIN indexes of its jobs' args and metadata. They serve searches
// by args or metadata, which mnv never makes (River's own queries find jobs by id, state,
// queue and unique key), and they are the costliest part of every job's insert and of its
// completion, which rewrites the metadata: every key and value of the document is an index
// entry, and an event job's args hold a batch of events.
var unusedIndexes = []string{"river_job_args_index", "river_job_metadata_index"}

// reindexed are the indexes River's reindexer keeps: its default list, but for the ones
// Migrate drops.
func reindexed() []string {
	return slices.DeleteFunc(river.ReindexerIndexNamesDefault(), func(name string) bool {
		return slices.Contains(unusedIndexes, name)
	})
}

// riverLogger passes River's warnings and errors to log; its start and stop messages at info
// would repeat what the service logs itself.
func riverLogger(log *zap.Logger) *slog.Logger {
	core, err := zapcore.NewIncreaseLevelCore(log.Core(), zapcore.WarnLevel)
	if err != nil { // log is already above warnings
		core = log.Core()
	}
	return slog.New(zapslog.NewHandler(core, zapslog.WithName("river")))
}

// quiet is a logger for River's own chatter that keeps only warnings and errors.
func quiet() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}

// Options configure a Queue.
type Options struct {
	// Schema holds River's tables (the service's own schema).
	Schema string
	// Log receives River's warnings and errors.
	Log *zap.Logger
	// Registerer gets the jobs' metrics; nil registers none.
	Registerer prometheus.Registerer
	// FetchPoll is how often an idle worker looks for jobs that no notification announced
	// (scheduled retries, jobs inserted by raw SQL); 0 is 200 ms. Inserts through Insert wake
	// workers at once.
	FetchPoll time.Duration
	// JobTimeout bounds one attempt of a job whose worker does not say otherwise; 0 is a minute.
	JobTimeout time.Duration
	// CompletedRetention is how long completed jobs stay in the table; 0 is a day.
	CompletedRetention time.Duration
	// RescueAfter is how long a job may stay running before River takes it for abandoned (its
	// process died) and runs it again; 0 is DefaultRescueAfter. It must exceed the longest
	// attempt of any worker (River's own default, an hour, left a killed process's jobs
	// undelivered that long).
	RescueAfter time.Duration
}

// DefaultRescueAfter is Options.RescueAfter's default: longer than any attempt of ours (the
// longest is an integration delivery, MNV_WEBHOOK_TIMEOUT + 30 s).
const DefaultRescueAfter = 2 * time.Minute

// Config is the jobs' configuration every service reads the same way.
type Config struct {
	// RescueAfter (MNV_JOBS_RESCUE_AFTER) is Options.RescueAfter.
	RescueAfter time.Duration
}

// LoadConfig reads the jobs' configuration from env.
func LoadConfig(env *config.Env) Config {
	return Config{RescueAfter: env.Duration("MNV_JOBS_RESCUE_AFTER", DefaultRescueAfter)}
}

// Validate checks c against the longest attempt a service's workers make.
func (c Config) Validate(longestAttempt time.Duration) error {
	if c.RescueAfter <= longestAttempt {
		return fmt.Errorf("MNV_JOBS_RESCUE_AFTER: %v must exceed the longest job attempt, %v", c.RescueAfter, longestAttempt)
	}
	return nil
}

// Queue is a service's River: it inserts from the start (stores are built with it), and works
// the queues that the service's packages added before Run. Two River clients make that order
// possible: the packages that work jobs are built from stores that insert them.
type Queue struct {
	inserter *river.Client[pgx.Tx]
	pool     *pgxpool.Pool
	opts     Options
	workers  *river.Workers
	queues   map[string]river.QueueConfig
	periodic []*river.PeriodicJob
	metrics  *Metrics
	log      *zap.Logger

	notifyMu sync.Mutex
	notified map[string]time.Time // queue → last Notify that said yes
}

// New builds the Queue; it inserts at once, and works what was added by Run.
func New(pool *pgxpool.Pool, o Options) (*Queue, error) {
	if o.Schema == "" {
		return nil, errors.New("jobs: no schema")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("jobs: register metrics: %w", err)
	}
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: o.Schema, Logger: riverLogger(o.Log)})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return &Queue{
		inserter: inserter, pool: pool, opts: o, workers: river.NewWorkers(),
		queues: map[string]river.QueueConfig{}, metrics: m, log: o.Log,
	}, nil
}

// Workers is where a package registers the job kinds it works (river.AddWorker), before Run.
func (q *Queue) Workers() *river.Workers { return q.workers }

// AddQueue makes this process work queue name with n workers at once; before Run.
func (q *Queue) AddQueue(name string, n int) {
	q.queues[name] = river.QueueConfig{MaxWorkers: max(n, 1)}
}

// AddPeriodic schedules a job that the elected leader among the replicas inserts on its
// schedule; before Run.
func (q *Queue) AddPeriodic(j *river.PeriodicJob) { q.periodic = append(q.periodic, j) }

// worker builds the client that works the added queues.
func (q *Queue) worker() (*river.Client[pgx.Tx], error) {
	o := q.opts
	rescue := cmpOr(o.RescueAfter, DefaultRescueAfter)
	return river.NewClient(riverpgxv5.New(q.pool), &river.Config{
		Schema:                      o.Schema,
		Logger:                      riverLogger(o.Log),
		FetchPollInterval:           cmpOr(o.FetchPoll, 200*time.Millisecond),
		FetchCooldown:               fetchCooldown,
		JobTimeout:                  cmpOr(o.JobTimeout, min(time.Minute, rescue/2)),
		RescueStuckJobsAfter:        rescue,
		CompletedJobRetentionPeriod: cmpOr(o.CompletedRetention, 24*time.Hour),
		ReindexerIndexNames:         reindexed(),
		PeriodicJobs:                q.periodic,
		Middleware:                  []rivertype.Middleware{q.metrics},
		Workers:                     q.workers,
		Queues:                      q.queues,
	})
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Insert enqueues args. Given a transaction (a store inside pg.Stores.InTx), the job commits
// or rolls back with it; given the pool, it commits alone.
func (q *Queue) Insert(ctx context.Context, db pg.DB, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	var (
		res *rivertype.JobInsertResult
		err error
	)
	if tx, ok := db.(pgx.Tx); ok {
		res, err = q.inserter.InsertTx(ctx, tx, args, opts)
	} else {
		res, err = q.inserter.Insert(ctx, args, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", args.Kind(), err)
	}
	return res, nil
}

// A store may insert a job inside a statement of its own, as a data-modifying CTE beside the
// fact the job comes with: one round trip and no transaction, where Insert needs a transaction
// and a statement of River's. River keeps its job table as the interface its clients in other
// languages insert through; such a row needs args, kind, queue and max_attempts (the rest has
// defaults: available now, priority 1), and a notification on InsertTopic with the payload
// InsertPayloadSQL builds wakes the workers of its queue at once instead of at their next poll.
// TestSQLInsertedJobIsWorked holds this to the River in go.mod.

// fetchCooldown is the least time between two fetches of a queue's workers.
const fetchCooldown = 20 * time.Millisecond

// notifyEvery is the least time between two insert notifications of a queue from one process:
// River's inserter limits its own to its fetch cooldown, River's default of 100 ms (the inserter
// is built without one of ours). Every 20 ms (the workers' cooldown) doubled the fetches of a
// verify load and halved the jobs each carried to connect, whose CPU per verify rose by half.
const notifyEvery = 100 * time.Millisecond

// Notify tells a store that inserted a job of queue by SQL whether to send the notification:
// at most once per notifyEvery per queue, as River limits its own inserts', since one fetch
// takes every job inserted before it. A job it tells not to is taken by the fetch of an earlier
// notification or by the next poll.
func (q *Queue) Notify(queue string) bool {
	now := time.Now()
	q.notifyMu.Lock()
	defer q.notifyMu.Unlock()
	if now.Sub(q.notified[queue]) < notifyEvery {
		return false
	}
	if q.notified == nil {
		q.notified = map[string]time.Time{}
	}
	q.notified[queue] = now
	return true
}

// Table is the job table of schema, quoted for SQL.
func Table(schema string) string { return pgx.Identifier{schema, "river_job"}.Sanitize() }

// InsertTopic is the channel River's workers of schema listen on for inserted jobs.
func InsertTopic(schema string) string { return schema + ".river_insert" }

// InsertPayloadSQL is the SQL of the notification's payload for the queue named by the SQL
// expression queue.
func InsertPayloadSQL(queue string) string { return "json_build_object('queue', " + queue + ")::text" }

// InsertMany enqueues several jobs in one statement, in db's transaction when it is one. It is
// River's multi-row INSERT, not its COPY (InsertManyFast): the jobs of a request or a batch are
// a few rows, for which COPY's extra round trips cost more than the rows they save.
func (q *Queue) InsertMany(ctx context.Context, db pg.DB, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	var err error
	if tx, ok := db.(pgx.Tx); ok {
		_, err = q.inserter.InsertManyTx(ctx, tx, params)
	} else {
		_, err = q.inserter.InsertMany(ctx, params)
	}
	if err != nil {
		return fmt.Errorf("enqueue %d jobs: %w", len(params), err)
	}
	return nil
}

// Run works the added queues until ctx ends, samples the backlog for the metrics, then stops:
// jobs in progress get stopTimeout to finish before they are cancelled (River retries a
// cancelled attempt, and rescues the jobs of a process that died without stopping).
func (q *Queue) Run(ctx context.Context, stopTimeout time.Duration) error {
	var worker *river.Client[pgx.Tx]
	if len(q.queues) > 0 {
		var err error
		if worker, err = q.worker(); err != nil {
			return fmt.Errorf("jobs: %w", err)
		}
		if err := worker.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("jobs: start: %w", err)
		}
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	q.sample(ctx)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			q.sample(ctx)
		}
	}
	if worker == nil {
		return nil
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmpOr(stopTimeout, 10*time.Second))
	defer cancel()
	if err := worker.Stop(stopCtx); err != nil {
		hard, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelHard()
		if err := worker.StopAndCancel(hard); err != nil {
			return fmt.Errorf("jobs: stop: %w", err)
		}
	}
	return nil
}
