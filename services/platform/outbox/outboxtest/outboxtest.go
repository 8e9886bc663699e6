// Package outboxtest is an outbox.Publisher in connect's place, for the tests of the workers
// that forward events.
package outboxtest

import (
	"context"
	"sync"

	"github.com/mnvhq/mnv/services/platform/events"
)

// Recorder records the events published to it, in order.
type Recorder struct {
	mu  sync.Mutex
	got []events.Event
}

// Publish records evs.
func (r *Recorder) Publish(_ context.Context, evs []events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, evs...)
	return nil
}

// Events is what was published so far.
func (r *Recorder) Events() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.got...)
}
