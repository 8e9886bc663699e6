package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestRetention runs the binaries with retentions of a second: a stuck-plus session's number is
// dropped (its session and audit stay; a reveal is 404 and charges nothing), and connect's sync
// history and finished deliveries go.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	s, err := harness.Start(ctx, harness.Options{Env: []string{
		"MNV_PURGE_EVERY=200ms", "MNV_RETENTION_STUCK_PLUS_NUMBERS=1s", "MNV_RETENTION_SYNC_EVENTS=1s", "MNV_RETENTION_DELIVERIES=1s",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(ctx, 20, "--features", "STUCK_PLUS,SANDBOX,CONNECT")
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	waitFor := func(t *testing.T, what, sql string, args ...any) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var done bool
			if err := db.QueryRow(ctx, sql, args...).Scan(&done); err != nil {
				t.Fatal(err)
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not purged", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("stuck-plus number", func(t *testing.T) {
		var tr transaction
		callSuite(t, s, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"STUCK_PLUS","metadataId":"lead-retention"}`).decode(t, &tr)
		allowShopOn(t, s, c)
		capture := headers{sandboxHeader: nextNumber(), "Origin": shopOrigin}
		if r := callSuite(t, s, "POST", "/v1/api/web/transactions/"+tr.TransactionID+"/capture", capture, ""); r.status != http.StatusOK {
			t.Fatalf("capture: %d %s", r.status, r.raw)
		}
		var resolved transaction
		callSuite(t, s, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "").decode(t, &resolved)
		if resolved.StuckPlusSessionID == nil {
			t.Fatalf("resolved %+v", resolved)
		}
		id := *resolved.StuckPlusSessionID
		waitFor(t, "the stuck-plus number", `SELECT number_sealed IS NULL FROM verification.stuck_plus_sessions WHERE id = $1`, id)

		r := callSuite(t, s, "POST", "/v1/api/me/stuck-plus/sessions/"+id+"/reveal", meOf(c), `{"reason":"customer called back"}`)
		if r.status != http.StatusNotFound || r.code() != "NOT_FOUND" || !strings.Contains(r.env.Messages[0].Message, "no longer kept") {
			t.Fatalf("reveal past retention: %d %s", r.status, r.raw)
		}
		var list struct {
			Items []struct {
				ID                 string `json:"id"`
				MobileNumberMasked string `json:"mobileNumberMasked"`
			} `json:"items"`
		}
		callSuite(t, s, "GET", "/v1/api/me/stuck-plus/sessions", meOf(c), "").decode(t, &list)
		if len(list.Items) != 1 || list.Items[0].ID != id || !strings.Contains(list.Items[0].MobileNumberMasked, "*") {
			t.Fatalf("the session is no longer listed: %+v", list.Items)
		}
		if b := balanceOf(t, s, c); b != 20 {
			t.Fatalf("balance %d after a refused reveal, want 20", b)
		}
	})

	t.Run("sync history and deliveries", func(t *testing.T) {
		rc := &receiver{deliveries: map[string][]map[string]any{}}
		srv := httptest.NewServer(rc)
		defer srv.Close()
		callSuite(t, s, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+nextNumber()+`","externalId":"r-1"}`)
		var it struct {
			ID string `json:"id"`
		}
		callSuite(t, s, "POST", "/v1/api/me/connect/integrations", meOf(c), `{"displayName":"CRM","integrationType":"WEBHOOK",`+
			`"endpointUrl":"`+srv.URL+`/hook","httpMethod":"POST","triggerEvent":"MANUAL","fieldMappings":{"externalId":"id"}}`).decode(t, &it)
		callSuite(t, s, "POST", "/v1/api/me/connect/integrations/"+it.ID+"/sync", meOf(c), "")
		deadline := time.Now().Add(15 * time.Second)
		for rc.records() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("nothing delivered")
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitFor(t, "the sync history and the delivery", `SELECT NOT EXISTS (SELECT 1 FROM connect.sync_events WHERE integration_id = $1)
			AND NOT EXISTS (SELECT 1 FROM connect.deliveries WHERE integration_id = $1)`, it.ID)
		var history struct {
			TotalItems int `json:"totalItems"`
		}
		callSuite(t, s, "GET", "/v1/api/me/connect/integrations/"+it.ID+"/sync-history", meOf(c), "").decode(t, &history)
		if history.TotalItems != 0 {
			t.Fatalf("%d sync events past retention", history.TotalItems)
		}
	})
}
