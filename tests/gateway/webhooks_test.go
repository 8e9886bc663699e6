package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/events"
)

// TestWebhookEndpoints drives /v1/api/me/webhooks through the gateway and the real services as
// a client and as an attacker: no credential, another client's key, a MEMBER key on a write.
func TestWebhookEndpoints(t *testing.T) {
	f := startFull(t)
	// No CONNECT product: every client may have webhooks.
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	other := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	admin := meHeaders(c)
	member := map[string]string{"X-API-KEY": f.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: admin, body: `{"name":"ro","role":"MEMBER"}`})["apiKey"].(string)}
	var secrets []string

	created := f.do(t, call{method: "POST", path: "/v1/api/me/webhooks", headers: with(admin, "Idempotency-Key", "wh-1"),
		body: `{"url":"https://hooks.example.com/mnv","events":["balance.low","verification.completed"],"description":"ops"}`})
	ep := dataOf(t, created)
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	wantKeys := []string{"createdAt", "description", "disabledReason", "enabled", "events", "failingSince", "id", "previousSecretExpiresAt", "secret", "updatedAt", "url"}
	if got := slices.Sorted(maps.Keys(ep)); !slices.Equal(got, wantKeys) {
		t.Errorf("endpoint fields %v, want %v", got, wantKeys)
	}
	secret, _ := ep["secret"].(string)
	id, _ := ep["id"].(string)
	if !strings.HasPrefix(secret, "whsec_") || ep["enabled"] != true || ep["disabledReason"] != nil || ep["failingSince"] != nil ||
		ep["previousSecretExpiresAt"] != nil || ep["description"] != "ops" {
		t.Fatalf("created endpoint %v", ep)
	}
	if evs, _ := json.Marshal(ep["events"]); string(evs) != `["balance.low","verification.completed"]` {
		t.Errorf("events %s", evs)
	}
	secrets = append(secrets, secret)

	// The creation's retry replays its answer; a new key is a new endpoint.
	replay := f.do(t, call{method: "POST", path: "/v1/api/me/webhooks", headers: with(admin, "Idempotency-Key", "wh-1"),
		body: `{"url":"https://hooks.example.com/mnv","events":["balance.low","verification.completed"],"description":"ops"}`})
	if dataOf(t, replay)["id"] != id || replay.headers.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replayed creation: %d %s", replay.status, replay.body)
	}
	second := f.data(t, call{method: "POST", path: "/v1/api/me/webhooks", headers: admin, body: `{"url":"https://hooks.example.com/all"}`})
	if evs, _ := json.Marshal(second["events"]); string(evs) != `["*"]` {
		t.Errorf("default events %s", evs)
	}
	secrets = append(secrets, second["secret"].(string))

	// Reads with any key of the client; the secret is never in them.
	for _, r := range []call{
		{method: "GET", path: "/v1/api/me/webhooks", headers: member},
		{method: "GET", path: "/v1/api/me/webhooks?page=0&size=1", headers: admin},
		{method: "GET", path: "/v1/api/me/webhooks/" + id, headers: member},
	} {
		a := f.do(t, r)
		if a.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", r.method, r.path, a.status, a.body)
		}
		if strings.Contains(string(a.body), "whsec_") {
			t.Errorf("%s %s shows a secret: %s", r.method, r.path, a.body)
		}
	}
	list := f.data(t, call{method: "GET", path: "/v1/api/me/webhooks?size=1", headers: member})
	if list["totalItems"] != float64(2) || list["totalPages"] != float64(2) || len(list["items"].([]any)) != 1 {
		t.Errorf("paged list %v", list)
	}

	// Rotation answers the new secret and until when the old one signs.
	rotated := f.data(t, call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/rotate-secret", headers: admin, body: `{"overlapSeconds":600}`})
	if s, _ := rotated["secret"].(string); !strings.HasPrefix(s, "whsec_") || s == secret || rotated["previousSecretExpiresAt"] == nil {
		t.Fatalf("rotation answer %v", rotated)
	} else {
		secrets = append(secrets, s)
	}

	foreign := meHeaders(other)
	unknown := "/v1/api/me/webhooks/00000000-0000-4000-8000-000000000000"
	tests := []struct {
		name string
		c    call
		want int
	}{
		{"no credential lists", call{method: "GET", path: "/v1/api/me/webhooks"}, http.StatusUnauthorized},
		{"no credential creates", call{method: "POST", path: "/v1/api/me/webhooks", body: `{"url":"https://a.example.com/"}`}, http.StatusUnauthorized},
		{"no credential reads", call{method: "GET", path: "/v1/api/me/webhooks/" + id}, http.StatusUnauthorized},
		{"no credential rotates", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/rotate-secret", body: `{}`}, http.StatusUnauthorized},
		{"another client reads", call{method: "GET", path: "/v1/api/me/webhooks/" + id, headers: foreign}, http.StatusNotFound},
		{"another client patches", call{method: "PATCH", path: "/v1/api/me/webhooks/" + id, headers: foreign, body: `{"enabled":false}`}, http.StatusNotFound},
		{"another client deletes", call{method: "DELETE", path: "/v1/api/me/webhooks/" + id, headers: foreign}, http.StatusNotFound},
		{"another client rotates", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/rotate-secret", headers: foreign, body: `{}`}, http.StatusNotFound},
		{"another client pings", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/test", headers: foreign}, http.StatusNotFound},
		{"another client reads the log", call{method: "GET", path: "/v1/api/me/webhooks/" + id + "/deliveries", headers: foreign}, http.StatusNotFound},
		{"another client's key naming this client", call{method: "GET", path: "/v1/api/me/webhooks/" + id, headers: with(foreign, "X-CLIENT-ID", c.ID)}, http.StatusUnauthorized},
		{"an unknown id", call{method: "GET", path: unknown, headers: admin}, http.StatusNotFound},
		{"an unknown delivery", call{method: "POST", path: "/v1/api/me/webhooks/deliveries/00000000-0000-4000-8000-000000000000/redeliver", headers: admin}, http.StatusNotFound},
		{"not an id", call{method: "GET", path: "/v1/api/me/webhooks/nope", headers: admin}, http.StatusNotFound},
		{"a MEMBER creates", call{method: "POST", path: "/v1/api/me/webhooks", headers: member, body: `{"url":"https://a.example.com/"}`}, http.StatusForbidden},
		{"a MEMBER patches", call{method: "PATCH", path: "/v1/api/me/webhooks/" + id, headers: member, body: `{"enabled":false}`}, http.StatusForbidden},
		{"a MEMBER deletes", call{method: "DELETE", path: "/v1/api/me/webhooks/" + id, headers: member}, http.StatusForbidden},
		{"a MEMBER rotates", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/rotate-secret", headers: member, body: `{}`}, http.StatusForbidden},
		{"a MEMBER pings", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/test", headers: member}, http.StatusForbidden},
		{"a MEMBER redelivers", call{method: "POST", path: "/v1/api/me/webhooks/deliveries/00000000-0000-4000-8000-000000000000/redeliver", headers: member}, http.StatusForbidden},
		// apptest allows plain http to loopback receivers; never the metadata service.
		{"a link-local url", call{method: "POST", path: "/v1/api/me/webhooks", headers: admin, body: `{"url":"https://169.254.169.254/latest"}`}, http.StatusBadRequest},
		{"a private url", call{method: "PATCH", path: "/v1/api/me/webhooks/" + id, headers: admin, body: `{"url":"https://10.1.2.3/"}`}, http.StatusBadRequest},
		{"an unknown event type", call{method: "POST", path: "/v1/api/me/webhooks", headers: admin, body: `{"url":"https://a.example.com/","events":["money.printed"]}`}, http.StatusBadRequest},
		{"a long overlap", call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/rotate-secret", headers: admin, body: `{"overlapSeconds":604801}`}, http.StatusBadRequest},
		{"an unknown log status", call{method: "GET", path: "/v1/api/me/webhooks/" + id + "/deliveries?status=LOST", headers: admin}, http.StatusBadRequest},
		{"a page too large", call{method: "GET", path: "/v1/api/me/webhooks?size=101", headers: admin}, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if a := f.do(t, tc.c); a.status != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.c.method, tc.c.path, a.status, a.body, tc.want)
			}
		})
	}
	// Another client sees none of it.
	if l := f.data(t, call{method: "GET", path: "/v1/api/me/webhooks", headers: foreign}); l["totalItems"] != float64(0) {
		t.Errorf("another client lists %v", l)
	}

	// The log is empty until the engine delivers; ping needs the engine.
	if l := f.data(t, call{method: "GET", path: "/v1/api/me/webhooks/" + id + "/deliveries?status=FAILED", headers: member}); l["totalItems"] != float64(0) {
		t.Errorf("delivery log %v", l)
	}
	// A ping is an event for this endpoint alone, in its log at once (whatever its endpoint,
	// unreachable here, answers; tests/e2e delivers pings to a verifying receiver).
	ping := f.data(t, call{method: "POST", path: "/v1/api/me/webhooks/" + id + "/test", headers: admin})
	eventID, _ := ping["eventId"].(string)
	if ping["webhookId"] != id || !strings.HasPrefix(eventID, "evt_") {
		t.Errorf("ping %v", ping)
	}
	pinged := f.data(t, call{method: "GET", path: "/v1/api/me/webhooks/" + id + "/deliveries", headers: member})
	if items, _ := pinged["items"].([]any); len(items) != 1 || items[0].(map[string]any)["eventId"] != eventID || items[0].(map[string]any)["eventType"] != "ping" {
		t.Errorf("delivery log after a ping %v", pinged)
	}

	patched := f.data(t, call{method: "PATCH", path: "/v1/api/me/webhooks/" + id, headers: admin, body: `{"enabled":false,"events":["*"]}`})
	if patched["enabled"] != false || patched["disabledReason"] != "CLIENT" || patched["secret"] != nil {
		t.Errorf("patched %v", patched)
	}
	if a := f.do(t, call{method: "DELETE", path: "/v1/api/me/webhooks/" + id, headers: admin}); a.status != http.StatusOK {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if a := f.do(t, call{method: "GET", path: "/v1/api/me/webhooks/" + id, headers: admin}); a.status != http.StatusNotFound {
		t.Errorf("deleted endpoint: %d", a.status)
	}

	// No secret reached a log, the gateway's or connect's.
	for _, s := range secrets {
		for name, logs := range map[string][]string{"gateway": logLines(f.logs.All()), "connect": logLines(f.con.Logs.All())} {
			for _, l := range logs {
				if strings.Contains(l, s) || strings.Contains(l, strings.TrimPrefix(s, "whsec_")) {
					t.Errorf("the %s log holds a secret: %s", name, l)
				}
			}
		}
	}
}

// TestWebhookAdminService is the operator's side: the admin token alone, over gRPC.
func TestWebhookAdminService(t *testing.T) {
	f := start2(t)
	c := f.accounts.CreateClient(t, 10)
	id := f.data(t, call{method: "POST", path: "/v1/api/me/webhooks", headers: meHeaders(c), body: `{"url":"https://hooks.example.com/"}`})["id"].(string)
	ctx := context.Background()
	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"no credential", "", codes.Unauthenticated},
		{"a client's API key as the bearer", c.APIKey, codes.Unauthenticated},
		{"an internal caller's token", authtest.GatewayToken, codes.Unauthenticated},
		{"the operator", apptest.AdminToken, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := connectv1.NewWebhookAdminServiceClient(apptest.Dial(t, f.con.Addr, tc.token))
			l, err := admin.ListClientWebhooks(ctx, &connectv1.ListClientWebhooksRequest{ClientId: c.ID})
			if status.Code(err) != tc.want {
				t.Fatalf("list: %v, want %v", err, tc.want)
			}
			if err == nil && (len(l.GetItems()) != 1 || l.GetItems()[0].GetSecret() != "") {
				t.Fatalf("list %v", l)
			}
		})
	}
	admin := connectv1.NewWebhookAdminServiceClient(apptest.Dial(t, f.con.Addr, apptest.AdminToken))
	if _, err := admin.DisableClientWebhook(ctx, &connectv1.DisableClientWebhookRequest{ClientId: f.accounts.CreateClient(t, 1).ID, WebhookId: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("disable naming the wrong client: %v", err)
	}
	d, err := admin.DisableClientWebhook(ctx, &connectv1.DisableClientWebhookRequest{ClientId: c.ID, WebhookId: id})
	if err != nil || d.GetWebhook().GetEnabled() || d.GetWebhook().GetDisabledReason() != connectv1.WebhookDisabledReason_WEBHOOK_DISABLED_REASON_OPERATOR {
		t.Fatalf("disable: %v, %v", d, err)
	}
	// The client cannot enable what the operator disabled.
	if a := f.do(t, call{method: "PATCH", path: "/v1/api/me/webhooks/" + id, headers: meHeaders(c), body: `{"enabled":true}`}); a.status != http.StatusConflict {
		t.Errorf("client enabling an operator-disabled endpoint: %d %s", a.status, a.body)
	}
}

func start2(t *testing.T) *full { return startWith(t, apptest.Logger(t)) }

// logLines renders each entry with its fields, as a log sink would hold it.
func logLines(entries []observer.LoggedEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprint(e.Message, " ", e.ContextMap()))
	}
	return out
}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for hk, hv := range h {
		out[hk] = hv
	}
	return out
}

func dataOf(t *testing.T, a answer) map[string]any {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("%d %s", a.status, a.body)
	}
	return env.Data
}

// TestPublishEventsCallers: connect's intake takes events from accounts and verification only,
// and refuses a malformed one with INVALID_ARGUMENT (which the forwarder cancels rather than
// retries).
func TestPublishEventsCallers(t *testing.T) {
	f := start2(t)
	c := f.accounts.CreateClient(t, 10)
	f.data(t, call{method: "POST", path: "/v1/api/me/webhooks", headers: meHeaders(c), body: `{"url":"https://hooks.example.com/"}`})
	ctx := context.Background()
	event := func() *connectv1.Event {
		ev, err := events.New(c.ID, events.BalanceLow, events.BalanceLowData{Balance: 1, Threshold: 2}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return &connectv1.Event{Id: ev.ID, Type: ev.Type, ClientId: ev.ClientID, CreatedAt: timestamppb.New(ev.CreatedAt), Data: ev.Data}
	}
	for _, tc := range []struct {
		name, token string
		want        codes.Code
	}{
		{"no credential", "", codes.Unauthenticated},
		{"a client's API key as the bearer", c.APIKey, codes.Unauthenticated},
		{"the gateway", authtest.GatewayToken, codes.Unauthenticated},
		{"connect itself", authtest.ConnectToken, codes.Unauthenticated},
		{"the operator", apptest.AdminToken, codes.Unauthenticated},
		{"verification", authtest.VerificationToken, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := connectv1.NewConnectInternalServiceClient(apptest.Dial(t, f.con.Addr, tc.token))
			r, err := in.PublishEvents(ctx, &connectv1.PublishEventsRequest{Events: []*connectv1.Event{event()}})
			if status.Code(err) != tc.want {
				t.Fatalf("publish: %v, want %v", err, tc.want)
			}
			if err == nil && r.GetAccepted() != 1 {
				t.Fatalf("accepted %d, want 1", r.GetAccepted())
			}
		})
	}
	in := connectv1.NewConnectInternalServiceClient(apptest.Dial(t, f.con.Addr, authtest.VerificationToken))
	bad := event()
	bad.Type = "balance.lowish"
	if _, err := in.PublishEvents(ctx, &connectv1.PublishEventsRequest{Events: []*connectv1.Event{bad}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a malformed event: %v, want InvalidArgument", err)
	}
}
