package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
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

// TestWorkerTellsConnect runs a relay job through River on a real database: Connect hears the
// number inserted, with its facts, once it answers (a failed call is retried, not lost).
func TestWorkerTellsConnect(t *testing.T) {
	tests := []struct {
		name string
		fail int
	}{
		{"connect answers", 0},
		{"connect fails once, the job is retried", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pool := verificationtest.Database(t, 6)
			q, err := jobs.New(pool, jobs.Options{Schema: "verification", Log: zaptest.NewLogger(t), FetchPoll: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c := &connect{fail: tt.fail, told: make(chan struct{}, 1)}
			relay.Register(q.Workers(), c)
			q.AddQueue(relay.Queue, 1)
			done := make(chan error, 1)
			go func() { done <- q.Run(ctx, time.Second) }()

			want := domain.VerifiedNumber{ClientID: uuid.NewString(), VerificationID: uuid.NewString(), NumberHash: []byte{1, 2, 3},
				VerifiedAt: time.Now().UTC().Truncate(time.Microsecond)}
			if _, err := q.Insert(ctx, pool, relay.NewArgs(want), nil); err != nil {
				t.Fatal(err)
			}
			// River's first retry comes after about a second (its backoff is attempt^4 seconds).
			select {
			case <-c.told:
			case <-time.After(20 * time.Second):
				t.Fatal("connect was not told the verified number")
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.got) != 1 || c.got[0].ClientID != want.ClientID || c.got[0].VerificationID != want.VerificationID ||
				string(c.got[0].NumberHash) != string(want.NumberHash) || !c.got[0].VerifiedAt.Equal(want.VerifiedAt) {
				t.Fatalf("connect heard %+v, want %+v", c.got, want)
			}
		})
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
