package jobs

import (
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// KeyLimit bounds the jobs of one key (an endpoint, an integration) working at once in this
// process. A job over the limit is snoozed, not blocked: its worker goes on to other keys'
// jobs, so one slow endpoint holds at most Max workers and another client's events do not
// queue behind it. River does not count a snooze as an attempt.
type KeyLimit struct {
	// Max jobs of one key at once; Snooze is how long an over-limit job waits.
	Max    int
	Snooze time.Duration

	mu   sync.Mutex
	busy map[string]int
}

// Acquire takes a slot of key. When ok, call release once the job is done; otherwise return
// the error (a river.JobSnooze) from the worker.
func (l *KeyLimit) Acquire(key string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy == nil {
		l.busy = map[string]int{}
	}
	if l.busy[key] >= max(l.Max, 1) {
		return nil, river.JobSnooze(max(l.Snooze, 10*time.Millisecond))
	}
	l.busy[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.busy[key]--; l.busy[key] <= 0 {
				delete(l.busy, key)
			}
		})
	}, nil
}
