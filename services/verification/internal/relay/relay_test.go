package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/outbox/outboxtest"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// connect records what it is told, refusing the first calls while fail > 0.
type connect struct {
	mu   sync.Mutex
	fail int
	got  []domain.VerifiedNumber
	told chan struct{}
}

func (c *connect) RecordVerifiedNumbers(_ context.Context, numbers []domain.VerifiedNumber) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("connect is away")
	}
	c.got = append(c.got, numbers...)
	c.told <- struct{}{}
	return nil
}

// TestWorkerTellsConnect runs a job of each kind through River on a real database: Connect
// hears the number inserted, with its facts, once it answers (a failed call is retried, not
// lost), and a settle batch's job also forwards its events.
func TestWorkerTellsConnect(t *testing.T) {
	want := domain.VerifiedNumber{ClientID: uuid.NewString(), VerificationID: uuid.NewString(), NumberHash: []byte{1, 2, 3},
		VerifiedAt: time.Now().UTC().Truncate(time.Microsecond)}
	ev, err := events.New(want.ClientID, events.VerificationCompleted, events.VerificationCompletedData{VerificationID: want.VerificationID, Status: "VERIFIED"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := outbox.EventJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	settled := relay.Settled{Events: []json.RawMessage{raw}, Numbers: relay.NewArgs(want).Numbers}
	tests := []struct {
		name       string
		job        river.JobArgs
		fail       int
		wantEvents []string
	}{
		{"numbers: connect answers", relay.NewArgs(want), 0, nil},
		{"numbers: connect fails once, the job is retried", relay.NewArgs(want), 1, nil},
		{"settled: connect answers", settled, 0, []string{ev.ID}},
		{"settled: connect fails once, the job is retried", settled, 1, []string{ev.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c, p := &connect{fail: tt.fail, told: make(chan struct{}, 1)}, &outboxtest.Recorder{}
			pool, q, stop := runRelay(t, c, func(ctx context.Context, raw []json.RawMessage) error { return outbox.ForwardJSON(ctx, p, raw) })

			if _, err := q.Insert(ctx, pool, tt.job, nil); err != nil {
				t.Fatal(err)
			}
			// River's first retry comes after about a second (its backoff is attempt^4 seconds).
			select {
			case <-c.told:
			case <-time.After(20 * time.Second):
				t.Fatal("connect was not told the verified number")
			}
			waitFor(t, func() bool {
				var state string
				err := pool.QueryRow(ctx, `SELECT state FROM verification.river_job WHERE kind = $1`, tt.job.Kind()).Scan(&state)
				return err == nil && state == "completed"
			})
			stop()
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.got) != 1 || c.got[0].ClientID != want.ClientID || c.got[0].VerificationID != want.VerificationID ||
				string(c.got[0].NumberHash) != string(want.NumberHash) || !c.got[0].VerifiedAt.Equal(want.VerifiedAt) {
				t.Fatalf("connect heard %+v, want %+v", c.got, want)
			}
			var got []string
			for _, e := range p.Events() {
				if e.ClientID != ev.ClientID || string(e.Data) != string(ev.Data) {
					t.Errorf("event published %+v, want %+v", e, ev)
				}
				got = append(got, e.ID)
			}
			if !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events published %v, want %v", got, tt.wantEvents)
			}
		})
	}
}

// TestDrainTellsConnect queues settled verifications as a settle does and runs drain jobs
// through River on a real database: Connect hears every number and event in the queue's order,
// in calls of at most a batch; a drain that fails leaves the queue as it was for the next one;
// an event Connect refuses for good is dropped alone.
func TestDrainTellsConnect(t *testing.T) {
	tests := []struct {
		name     string
		queued   int // every third one NOT_VERIFIED, the rest VERIFIED
		fail     int // calls to Connect refused before it answers
		refuse   int // the queued event the forwarder refuses for good, 1-based (0: none)
		wantRuns int // drains until the queue is empty
	}{
		{"connect answers", 3, 0, 0, 1},
		{"more than a batch", 501, 0, 0, 1},
		{"connect fails once: the next drain delivers", 3, 1, 0, 2},
		{"an event refused for good is dropped alone", 3, 0, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c, p := &connect{fail: tt.fail, told: make(chan struct{}, 1000)}, &outboxtest.Recorder{}
			var refused string // the id of the event the forwarder refuses for good
			pool, q, stop := runRelay(t, c, func(ctx context.Context, raw []json.RawMessage) error {
				if refused != "" && slices.ContainsFunc(raw, func(r json.RawMessage) bool { return strings.Contains(string(r), refused) }) {
					return river.JobCancel(errors.New("connect refuses the event"))
				}
				return outbox.ForwardJSON(ctx, p, raw)
			})
			var (
				wantNumbers []domain.VerifiedNumber
				wantEvents  []string
			)
			client := uuid.NewString()
			for i := 1; i <= tt.queued; i++ {
				id, outcome := uuid.NewString(), "VERIFIED"
				if i%3 == 0 {
					outcome = "NOT_VERIFIED"
				}
				ev, err := events.New(client, events.VerificationCompleted, events.VerificationCompletedData{VerificationID: id, Status: outcome}, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				raw, err := outbox.EventJSON(ev)
				if err != nil {
					t.Fatal(err)
				}
				var hash []byte
				var at *time.Time
				if outcome == "VERIFIED" {
					n := domain.VerifiedNumber{ClientID: client, VerificationID: id, NumberHash: []byte{byte(i), 7}, VerifiedAt: time.Now().UTC().Truncate(time.Microsecond)}
					wantNumbers, hash, at = append(wantNumbers, n), n.NumberHash, &n.VerifiedAt
				}
				if i == tt.refuse {
					refused = ev.ID
				} else {
					wantEvents = append(wantEvents, ev.ID)
				}
				if _, err := pool.Exec(ctx, `INSERT INTO verification.relay_queue (event, client_id, verification_id, number_hash, verified_at)
					VALUES ($1, $2, $3, $4, $5)`, string(raw), client, id, hash, at); err != nil {
					t.Fatal(err)
				}
			}
			queued := func() (n int) {
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM verification.relay_queue`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for run := 1; run <= tt.wantRuns; run++ {
				if _, err := q.Insert(ctx, pool, relay.Drain{}, nil); err != nil {
					t.Fatal(err)
				}
				want := "completed"
				if run < tt.wantRuns {
					want = "discarded"
				}
				waitFor(t, func() bool {
					var n int
					err := pool.QueryRow(ctx, `SELECT count(*) FROM verification.river_job WHERE kind = $1 AND state = $2`, relay.DrainKind, want).Scan(&n)
					return err == nil && n == 1
				})
				if run < tt.wantRuns && queued() != tt.queued {
					t.Fatalf("after a failed drain %d of %d stay queued", queued(), tt.queued)
				}
			}
			if n := queued(); n != 0 {
				t.Fatalf("%d left in the queue", n)
			}
			stop()
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.got) != len(wantNumbers) {
				t.Fatalf("connect heard %d numbers, want %d", len(c.got), len(wantNumbers))
			}
			for i, w := range wantNumbers {
				if g := c.got[i]; g.ClientID != w.ClientID || g.VerificationID != w.VerificationID || string(g.NumberHash) != string(w.NumberHash) || !g.VerifiedAt.Equal(w.VerifiedAt) {
					t.Errorf("number %d: connect heard %+v, want %+v", i, g, w)
				}
			}
			var got []string
			for _, e := range p.Events() {
				got = append(got, e.ID)
			}
			if !slices.Equal(got, wantEvents) {
				t.Errorf("events published %v, want %v", got, wantEvents)
			}
		})
	}
}

// runRelay works the relay's jobs through River on a fresh database, with c and forward in
// Connect's place, until stop, which fails the test when River did not end cleanly.
func runRelay(t *testing.T, c relay.Connect, forward relay.Forwarder) (pool *pgxpool.Pool, q *jobs.Queue, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool = verificationtest.Database(t, 6)
	q, err := jobs.New(pool, jobs.Options{Schema: "verification", Log: zaptest.NewLogger(t), FetchPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stores := pg.NewStores(pool, func(db pg.DB) *store.Store { return store.New(db).WithJobs(q) })
	relay.Register(q.Workers(), store.RelayQueue{Stores: stores}, c, forward, zaptest.NewLogger(t))
	q.AddQueue(relay.Queue, 1)
	q.AddQueue(outbox.Queue, 1)
	done := make(chan error, 1)
	run := q.Run // not q itself: the return below assigns the named result the goroutine would read
	go func() { done <- run(ctx, time.Second) }()
	return pool, q, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestArgsReadBothShapes: a job of this version carries its numbers as a list; a job of one
// number that an earlier version wrote (its fields at the top level) still reads as that number.
func TestArgsReadBothShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want []string // verification ids
	}{
		{"list", `{"numbers":[{"client_id":"c","verification_id":"v1","number_hash":"AQI=","verified_at":"2026-11-24T08:00:00Z"},` +
			`{"client_id":"c","verification_id":"v2","number_hash":"AQI=","verified_at":"2026-11-24T08:00:00Z"}]}`, []string{"v1", "v2"}},
		{"one number, earlier shape", `{"client_id":"c","verification_id":"v1","number_hash":"AQI=","verified_at":"2026-11-24T08:00:00Z"}`, []string{"v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a relay.Args
			if err := json.Unmarshal([]byte(tc.json), &a); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range a.Numbers {
				if n.ClientID != "c" || string(n.NumberHash) != "\x01\x02" || n.VerifiedAt.IsZero() {
					t.Errorf("number %+v", n)
				}
				got = append(got, n.VerificationID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("numbers %v, want %v", got, tc.want)
			}
		})
	}
}
