package principals_test

import (
	"context"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/principals"
)

// TestWaitListening: a stream opened before the LISTEN is up waits for it and then subscribes;
// one opened while it stays down is refused after the wait, as before.
func TestWaitListening(t *testing.T) {
	tests := []struct {
		name   string
		events func(h *principals.Hub) // what happens before and during the wait
		want   bool
	}{
		{"listening already", func(h *principals.Hub) { h.Up() }, true},
		{"up during the wait", func(h *principals.Hub) { time.AfterFunc(50*time.Millisecond, h.Up) }, true},
		{"never up", func(*principals.Hub) {}, false},
		{"up, then lost", func(h *principals.Hub) { h.Up(); h.Down() }, false},
		{"lost, then up again", func(h *principals.Hub) { h.Up(); h.Down(); time.AfterFunc(50*time.Millisecond, h.Up) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := principals.NewHub(nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.events(h)
			if got := h.WaitListening(context.Background(), time.Second); got != tt.want {
				t.Fatalf("WaitListening = %v, want %v", got, tt.want)
			}
			sub, err := h.Subscribe()
			if (err == nil) != tt.want {
				t.Fatalf("Subscribe after the wait: %v", err)
			}
			if sub != nil {
				h.Unsubscribe(sub)
			}
		})
	}
}

// TestNotices: the payloads the store sends reach a stream as the changes they name.
func TestNotices(t *testing.T) {
	h, err := principals.NewHub(nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Up()
	sub, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Unsubscribe(sub)
	const client, cred = "00000000-0000-4000-8000-000000000001", "10000000-0000-4000-8000-000000000001"
	for _, want := range []principals.Change{
		{Kind: principals.ClientChanged, ClientID: client},
		{Kind: principals.APIKeyChanged, ClientID: client, CredentialID: cred},
		{Kind: principals.SDKTokenChanged, ClientID: client, CredentialID: cred},
	} {
		switch want.Kind {
		case principals.ClientChanged:
			h.Notify(principals.ClientNotice(client))
		case principals.APIKeyChanged:
			h.Notify(principals.APIKeyNotice(client, cred))
		case principals.SDKTokenChanged:
			h.Notify(principals.SDKTokenNotice(client, cred))
		}
		for got := range sub.C {
			if got.Kind == principals.Started || got.Kind == principals.Heartbeat {
				continue
			}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
			break
		}
	}
}
