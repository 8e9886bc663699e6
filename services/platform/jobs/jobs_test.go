package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// migrated is a fresh database with River's tables in schema svc.
func migrated(ctx context.Context, t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 8, ApplicationName: "jobs-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA svc`); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "svc"); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestMigrateDropsUnusedIndexes: after Migrate (twice, as replicas starting together would),
// River's job table keeps the indexes River's queries use and has no GIN index of args or
// metadata, whose upkeep every job insert and completion would pay.
func TestMigrateDropsUnusedIndexes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := migrated(ctx, t)
	if err := jobs.Migrate(ctx, pool, "svc"); err != nil { // again, as a second replica would
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = 'svc' AND tablename = 'river_job'`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"river_job_pkey", "river_job_prioritized_fetching_index", "river_job_kind", "river_job_unique_idx", "river_job_state_and_finalized_at_index"} {
		if !slices.Contains(got, want) {
			t.Errorf("index %s missing; river_job has %v", want, got)
		}
	}
	for _, gone := range []string{"river_job_args_index", "river_job_metadata_index"} {
		if slices.Contains(got, gone) {
			t.Errorf("index %s still there; river_job has %v", gone, got)
		}
	}
}

// sqlArgs is the job TestSQLInsertedJobIsWorked inserts by SQL.
type sqlArgs struct {
	N int `json:"n"`
}

func (sqlArgs) Kind() string { return "sql.inserted" }

type sqlWorker struct {
	river.WorkerDefaults[sqlArgs]
	got chan int
}

func (w *sqlWorker) Work(_ context.Context, job *river.Job[sqlArgs]) error {
	w.got <- job.Args.N
	return nil
}

// TestSQLInsertedJobIsWorked: a job a store inserts in a statement of its own, with only what
// Table's comment names and the notification on InsertTopic, is worked at once, well before
// the workers' next poll (a minute here). It holds River's job table and insert notification
// to what stores write.
func TestSQLInsertedJobIsWorked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := migrated(ctx, t)
	q, err := jobs.New(pool, jobs.Options{Schema: "svc", FetchPoll: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w := &sqlWorker{got: make(chan int, 4)}
	river.AddWorker(q.Workers(), w)
	q.AddQueue("sqlq", 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx, time.Second) }()
	t.Cleanup(func() { stop(); <-done })

	// Through River first: its workers are listening once it is worked.
	if _, err := q.Insert(ctx, pool, sqlArgs{N: 1}, &river.InsertOpts{Queue: "sqlq"}); err != nil {
		t.Fatal(err)
	}
	wait := func(want int, within time.Duration) {
		t.Helper()
		select {
		case n := <-w.got:
			if n != want {
				t.Fatalf("worked job %d, want %d", n, want)
			}
		case <-time.After(within):
			t.Fatalf("job %d not worked within %v", want, within)
		}
	}
	wait(1, 30*time.Second)
	time.Sleep(time.Second) // past any fetch that follows the first job

	start := time.Now()
	if _, err := pool.Exec(ctx, `WITH j AS (
			INSERT INTO `+jobs.Table("svc")+` (args, kind, queue, max_attempts) VALUES ($1, $2, $3, 25) RETURNING queue)
		SELECT pg_notify($4, `+jobs.InsertPayloadSQL("j.queue")+`) FROM j`,
		`{"n": 2}`, sqlArgs{}.Kind(), "sqlq", jobs.InsertTopic("svc")); err != nil {
		t.Fatal(err)
	}
	wait(2, 10*time.Second)
	t.Logf("worked %v after the insert", time.Since(start))
}

// TestNotify: a queue is told to notify at most once per 100 ms, each queue on its own.
func TestNotify(t *testing.T) {
	q, err := jobs.New(nil, jobs.Options{Schema: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if !q.Notify("a") || !q.Notify("b") {
		t.Fatal("a queue's first insert not notified")
	}
	if q.Notify("a") && time.Since(first) < 100*time.Millisecond {
		t.Fatal("notified twice within 100 ms")
	}
	time.Sleep(110 * time.Millisecond)
	if !q.Notify("a") {
		t.Fatal("not notified after the cooldown")
	}
}
