package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/apijson"
	"github.com/mnvhq/mnv/services/platform/events"
)

func TestNew(t *testing.T) {
	now := time.Date(2026, 11, 24, 5, 6, 7, 891234567, time.FixedZone("x", 3600))
	tests := []struct {
		name, client, typ string
		data              any
		wantErr           string
	}{
		{"a known type", "c1", events.BalanceLow, events.BalanceLowData{Balance: 9, Threshold: 10}, ""},
		{"ping", "c1", events.Ping, events.PingData{EndpointID: "we_1"}, ""},
		{"unknown type", "c1", "balance.lowish", events.BalanceLowData{}, "not known"},
		{"no client", "", events.BalanceLow, events.BalanceLowData{}, "no client"},
		{"data not an object", "c1", events.BalanceLow, []int{1}, "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := events.New(tt.client, tt.typ, tt.data, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.ID, events.IDPrefix) || len(e.ID) != len(events.IDPrefix)+32 {
				t.Fatalf("id %q", e.ID)
			}
			body, err := e.Body()
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != 4 || got["id"] != e.ID || got["type"] != tt.typ || got["createdAt"] != "2026-11-24T04:06:07.891Z" {
				t.Fatalf("body %s", body)
			}
			if _, ok := got["data"].(map[string]any); !ok {
				t.Fatalf("data in %s is not an object", body)
			}
		})
	}
}

func TestIDsSortByTime(t *testing.T) {
	a, _ := events.New("c1", events.Ping, events.PingData{}, time.Now())
	time.Sleep(2 * time.Millisecond)
	b, _ := events.New("c1", events.Ping, events.PingData{}, time.Now())
	if a.ID >= b.ID {
		t.Fatalf("%s then %s: ids do not sort by creation", a.ID, b.ID)
	}
}

func TestTimeLayoutIsTheAPIs(t *testing.T) {
	if events.TimeLayout != apijson.TimeLayout {
		t.Fatalf("events write times as %q, the API as %q", events.TimeLayout, apijson.TimeLayout)
	}
}
