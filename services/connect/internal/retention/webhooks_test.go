package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/retention"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/purge"
)

// TestPurgeWebhookEvents: events accepted longer ago than their retention go with their
// deliveries and attempts, unless a delivery of theirs is still PENDING; younger ones stay.
func TestPurgeWebhookEvents(t *testing.T) {
	ctx := context.Background()
	pool := connecttest.Pool(t, 4)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	const day = 24 * time.Hour
	client, endpoint := uuid.NewString(), uuid.NewString()
	exec(`INSERT INTO connect.webhook_endpoints (id, client_id, url) VALUES ($1, $2, 'https://hooks.example.com')`, endpoint, client)
	n := 0
	event := func(age time.Duration, status string) string {
		n++
		id := fmt.Sprintf("evt_%032x", n)
		exec(`INSERT INTO connect.events (id, client_id, type, data, body, created_at, accepted_at)
			VALUES ($1, $2, 'ping', '{}', '{}', now() - make_interval(secs => $3), now() - make_interval(secs => $3))`, id, client, age.Seconds())
		d := uuid.NewString()
		exec(`INSERT INTO connect.webhook_deliveries (id, client_id, endpoint_id, event_id, status, attempts) VALUES ($1, $2, $3, $4, $5, 1)`,
			d, client, endpoint, id, status)
		exec(`INSERT INTO connect.webhook_attempts (client_id, delivery_id, attempt, duration_ms, started_at) VALUES ($1, $2, 1, 3, now())`, client, d)
		return id
	}
	gone := []string{event(31*day, "SUCCEEDED"), event(40*day, "FAILED"), event(31*day, "CANCELLED")}
	kept := []string{event(31*day, "PENDING"), event(29*day, "SUCCEEDED")}

	runner := &purge.Runner{Batch: 2, Log: zaptest.NewLogger(t), Rules: retention.Rules(store.New(pool), retention.Config{WebhookEvents: 30 * day})}
	removed, err := runner.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed["webhook events"] != int64(len(gone)) {
		t.Errorf("%d webhook events removed, want %d", removed["webhook events"], len(gone))
	}
	var left []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM connect.events`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != fmt.Sprint(kept) {
		t.Errorf("events left %v, want %v", left, kept)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM connect.webhook_deliveries) + (SELECT count(*) FROM connect.webhook_attempts)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2*len(kept) {
		t.Errorf("%d delivery and attempt rows left, want %d (those of the kept events)", rows, 2*len(kept))
	}
}
