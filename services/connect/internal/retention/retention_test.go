package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/retention"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/purge"
)

// TestPurge: finished deliveries, sync events and finished import jobs past their retention
// go, with uploads left UPLOADING for over an hour; younger rows, pending deliveries, running
// jobs, profiles and erasure records stay.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	pool := connecttest.Pool(t, 4)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const day = 24 * time.Hour
	client, integration := uuid.NewString(), uuid.NewString()
	exec(`INSERT INTO connect.integrations (id, client_id, display_name, integration_type, endpoint_url, http_method,
		signing_secret_sealed, trigger_event, field_mappings, batch_size, matched_only, status)
		VALUES ($1, $2, 'CRM', 'WEBHOOK', 'https://crm.example.com', 'POST', '\x00', 'MANUAL', '{}', 10, false, 'ACTIVE')`, integration, client)
	delivery := func(status string, age time.Duration) string {
		id := uuid.NewString()
		exec(`INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status, created_at)
			VALUES ($1, $2, $3, 'MANUAL', '{}', $4, now() - make_interval(secs => $5))`, id, integration, client, status, age.Seconds())
		exec(`INSERT INTO connect.sync_events (id, integration_id, client_id, delivery_id, trigger, status, record_count, attempt,
			duration_ms, started_at, finished_at) VALUES (gen_random_uuid(), $1, $2, $3, 'MANUAL', 'RETRYING', 1, 1, 5,
			now() - make_interval(secs => $4), now() - make_interval(secs => $4))`, integration, client, id, age.Seconds())
		return id
	}
	job := func(status string, age time.Duration) string {
		id := uuid.NewString()
		exec(`INSERT INTO connect.import_jobs (id, client_id, file_name, size_bytes, status, created_at, finished_at)
			VALUES ($1, $2, 'f.csv', 1, $3, now() - make_interval(secs => $4),
				CASE WHEN $3 IN ('COMPLETED', 'FAILED') THEN now() - make_interval(secs => $4) END)`, id, client, status, age.Seconds())
		exec(`INSERT INTO connect.import_chunks (client_id, job_id, seq, data) VALUES ($1, $2, 0, '\x00')`, client, id)
		return id
	}

	gone := []string{delivery("SUCCEEDED", 10*day), delivery("FAILED", 100*day)}
	kept := []string{delivery("PENDING", 10*day), delivery("SUCCEEDED", time.Hour)}
	goneJobs := []string{job("COMPLETED", 100*day), job("FAILED", 91*day), job("UPLOADING", 2*time.Hour)}
	keptJobs := []string{job("FAILED", time.Hour), job("RUNNING", 100*day), job("QUEUED", 100*day), job("UPLOADING", 5*time.Minute)}
	exec(`INSERT INTO connect.profiles (id, client_id, number_sealed, number_hash, number_masked, country_code, source, import_job_id, created_at)
		VALUES (gen_random_uuid(), $1, '\x01', '\x02', '+97150*****67', 'AE', 'IMPORT', $2, now() - interval '100 days')`, client, goneJobs[0])
	exec(`INSERT INTO connect.erasures (profile_id, client_id, erased_at) VALUES (gen_random_uuid(), $1, now() - interval '400 days')`, client)

	rules := retention.Rules(store.New(pool), retention.Config{Deliveries: 7 * day, SyncEvents: 90 * day, ImportJobs: 90 * day})
	runner := &purge.Runner{Batch: 2, Log: zaptest.NewLogger(t), Rules: rules}
	removed, err := runner.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]int64{"finished deliveries": 2, "sync events": 1, "finished import jobs": 2, "abandoned uploads": 1} {
		if removed[rule] != want {
			t.Errorf("%s: %d removed, want %d", rule, removed[rule], want)
		}
	}
	if n := count(`SELECT count(*) FROM connect.deliveries WHERE id = ANY($1::text[]::uuid[])`, gone); n != 0 {
		t.Errorf("%d finished deliveries past retention kept", n)
	}
	if n := count(`SELECT count(*) FROM connect.deliveries WHERE id = ANY($1::text[]::uuid[])`, kept); n != 2 {
		t.Errorf("%d of the pending and the young delivery kept, want 2", n)
	}
	if n := count(`SELECT count(*) FROM connect.sync_events`); n != 3 {
		t.Errorf("%d sync events, want the 3 younger than 90 days", n)
	}
	if n := count(`SELECT count(*) FROM connect.import_jobs WHERE id = ANY($1::text[]::uuid[])`, goneJobs); n != 0 {
		t.Errorf("%d old finished or abandoned jobs kept", n)
	}
	if n := count(`SELECT count(*) FROM connect.import_jobs WHERE id = ANY($1::text[]::uuid[])`, keptJobs); n != 4 {
		t.Errorf("%d of the 4 young, running, queued or uploading jobs kept", n)
	}
	if n := count(`SELECT count(*) FROM connect.import_chunks WHERE job_id = ANY($1::text[]::uuid[])`, goneJobs); n != 0 {
		t.Errorf("%d chunks of purged jobs left", n)
	}
	if n := count(`SELECT (SELECT count(*) FROM connect.profiles) + (SELECT count(*) FROM connect.erasures)`); n != 2 {
		t.Errorf("profiles and erasure records: %d rows, want both kept", n)
	}
}
