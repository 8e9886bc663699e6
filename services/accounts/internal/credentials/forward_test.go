package credentials_test

import (
	"context"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/outbox/outboxtest"
)

// TestForward: the forward worker on accounts' queue publishes an event written in a key's
// transaction, whole: the id, type, client, time and data it was written with.
func TestForward(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	rec := &outboxtest.Recorder{}
	outbox.Register(env.Queue.Workers(), rec)
	env.Queue.AddQueue(outbox.Queue, 2)
	ctx, cancel := context.WithCancel(accountstest.Deadline(t))
	ran := make(chan error, 1)
	go func() { ran <- env.Queue.Run(ctx, 5*time.Second) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	c := env.Client(t, 0)
	written := env.Events(t, c.Client.ID)
	if len(written) != 1 {
		t.Fatalf("written %+v", written)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(rec.Events()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := rec.Events()
	if len(got) != 1 {
		t.Fatalf("published %+v, want the one written", got)
	}
	w, g := written[0], got[0]
	if g.ID != w.ID || g.Type != events.APIKeyCreated || g.ClientID != c.Client.ID || !g.CreatedAt.Equal(w.CreatedAt) || string(g.Data) != string(w.Data) {
		t.Fatalf("published %+v, written %+v", g, w)
	}
}
