package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/groupcommit"
)

// gate is a Commit that records its batches and holds each one until released.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	release chan struct{}
	err     error
	short   bool // answer one result too few
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

func (g *gate) commit(ctx context.Context, items []int) ([]string, error) {
	g.mu.Lock()
	g.batches = append(g.batches, slices.Clone(items))
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	if g.err != nil {
		return nil, g.err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, fmt.Sprint("r", it))
	}
	if g.short {
		out = out[1:]
	}
	return out, nil
}

func (g *gate) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n []int
	for _, b := range g.batches {
		n = append(n, len(b))
	}
	return n
}

// TestQueuedItemsShareTheNextBatch holds a first batch in flight, queues more items behind it,
// and checks that they run together, each with its own result, within MaxBatch.
func TestQueuedItemsShareTheNextBatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		queued   int
		maxBatch int
		want     []int
	}{
		{"alone", 0, 0, []int{1}},
		{"queued behind one", 5, 0, []int{1, 5}},
		{"split at MaxBatch", 7, 3, []int{1, 3, 3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			var observed []int
			var mu sync.Mutex
			b := groupcommit.New(groupcommit.Config{MaxBatch: tc.maxBatch, Observe: func(n int) { mu.Lock(); observed = append(observed, n); mu.Unlock() }}, g.commit)
			ctx := context.Background()
			var wg sync.WaitGroup
			results := make([]string, tc.queued+1)
			errs := make([]error, tc.queued+1)
			wg.Go(func() { results[0], errs[0] = b.Do(ctx, "k", 0) })
			<-g.started // the first batch is in flight
			for i := 1; i <= tc.queued; i++ {
				wg.Go(func() { results[i], errs[i] = b.Do(ctx, "k", i) })
			}
			waitQueued(t, b, tc.queued)
			for range len(tc.want) {
				g.release <- struct{}{}
			}
			wg.Wait()
			for i := range results {
				if errs[i] != nil || results[i] != fmt.Sprint("r", i) {
					t.Errorf("item %d: got %q, %v; want r%d", i, results[i], errs[i], i)
				}
			}
			if got := g.sizes(); !slices.Equal(got, tc.want) {
				t.Errorf("batch sizes %v, want %v", got, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(observed, tc.want) {
				t.Errorf("observed sizes %v, want %v", observed, tc.want)
			}
		})
	}
}

// waitQueued gives the n queued Do calls time to reach the shard's queue: the batch after the
// one in flight must take them all.
func waitQueued(t *testing.T, b *groupcommit.Batcher[int, string], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for groupcommit.Queued(b) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d items queued, want %d", groupcommit.Queued(b), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDoManyKeepsItsOrder holds a batch in flight and queues items with DoMany: they run in
// their order, in the next batches within MaxBatch, each answered at its index; a DoMany whose
// context ends before its batch answers gets the context's error for each item.
func TestDoManyKeepsItsOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
		want     [][]int
	}{
		{"one batch", 0, [][]int{{0}, {3, 1, 2}}},
		{"split at MaxBatch", 2, [][]int{{0}, {3, 1}, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			b := groupcommit.New(groupcommit.Config{MaxBatch: tc.maxBatch}, g.commit)
			ctx := context.Background()
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = b.Do(ctx, "k", 0) })
			<-g.started
			items := []int{3, 1, 2}
			var out []string
			var errs []error
			wg.Go(func() { out, errs = b.DoMany(ctx, []string{"k", "k", "k"}, items) })
			waitQueued(t, b, len(items))
			for range tc.want {
				g.release <- struct{}{}
			}
			wg.Wait()
			for i, it := range items {
				if errs[i] != nil || out[i] != fmt.Sprint("r", it) {
					t.Errorf("item %d: got %q, %v; want r%d", i, out[i], errs[i], it)
				}
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if !slices.EqualFunc(g.batches, tc.want, slices.Equal) {
				t.Errorf("batches %v, want %v", g.batches, tc.want)
			}
		})
	}
	t.Run("context ended", func(t *testing.T) {
		g := newGate()
		b := groupcommit.New(groupcommit.Config{}, g.commit)
		ctx, cancel := context.WithCancel(context.Background())
		var errs []error
		done := make(chan struct{})
		go func() { _, errs = b.DoMany(ctx, []string{"a", "b"}, []int{1, 2}); close(done) }()
		<-g.started
		cancel()
		<-done
		g.release <- struct{}{}
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("item %d: err %v, want context.Canceled", i, err)
			}
		}
	})
}

func TestFailedBatchFailsEveryItem(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		err   error
		short bool
	}{
		{"commit error", boom, false},
		{"a result missing", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			g.err, g.short = tc.err, tc.short
			var observed int
			b := groupcommit.New(groupcommit.Config{Observe: func(int) { observed++ }}, g.commit)
			for range 3 { // no batch is held: grouping is not what this test is about
				g.release <- struct{}{}
			}
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() { _, errs[i] = b.Do(context.Background(), "k", i) })
			}
			wg.Wait()
			for i, err := range errs {
				if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
					t.Errorf("item %d: err %v, want the batch's failure", i, err)
				}
			}
			if observed != 0 {
				t.Errorf("Observe told of %d failed batches", observed)
			}
		})
	}
}

// TestCallerGoneBatchStillRuns: a caller that stops waiting gets its context's error, and its
// item is still committed (the Commit must tell a retry).
func TestCallerGoneBatchStillRuns(t *testing.T) {
	g := newGate()
	b := groupcommit.New(groupcommit.Config{}, g.commit)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := b.Do(ctx, "k", 7); done <- err }()
	<-g.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	g.release <- struct{}{}
	if got := g.sizes(); !slices.Equal(got, []int{1}) {
		t.Fatalf("batches %v, want the item committed once", got)
	}
}

// TestShardsRunInParallel: with two shards, keys on different shards do not wait for each
// other's batch.
func TestShardsRunInParallel(t *testing.T) {
	g := newGate()
	b := groupcommit.New(groupcommit.Config{Shards: 2}, g.commit)
	// Two keys that land on different shards.
	a, c := "", ""
	for i := 0; c == ""; i++ {
		k := fmt.Sprint("key", i)
		switch {
		case a == "":
			a = k
		case groupcommit.ShardOf(b, k) != groupcommit.ShardOf(b, a):
			c = k
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.Do(context.Background(), a, 1) })
	<-g.started
	wg.Go(func() { _, _ = b.Do(context.Background(), c, 2) })
	select {
	case <-g.started: // the second shard's batch started while the first is held
	case <-time.After(5 * time.Second):
		t.Fatal("a batch on another shard waited for the first")
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	wg.Wait()
}

// TestMergeSharesOneCall: calls made while one is in flight are merged into the next; a
// rejection blamed on an item is retried caller by caller, so only its caller hears of it.
func TestMergeSharesOneCall(t *testing.T) {
	bad := errors.New("item 13 is malformed")
	for _, tc := range []struct {
		name      string
		isolate   func(error) bool
		wantCalls int // after the first, held call
		wantErrs  map[int]bool
	}{
		{"merged", nil, 1, map[int]bool{}},
		{"rejection isolated", func(err error) bool { return errors.Is(err, bad) }, 1 + 3, map[int]bool{13: true}},
		{"rejection shared", nil, 1, map[int]bool{11: true, 12: true, 13: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls [][]int
			hold := make(chan struct{})
			held := make(chan struct{})
			fn := func(ctx context.Context, items []int) error {
				mu.Lock()
				calls = append(calls, slices.Clone(items))
				first := len(calls) == 1
				mu.Unlock()
				if first {
					close(held)
					<-hold
				}
				if len(tc.wantErrs) > 0 && slices.Contains(items, 13) {
					return bad
				}
				return nil
			}
			call := groupcommit.Merge(groupcommit.Config{}, fn, tc.isolate)
			var wg sync.WaitGroup
			wg.Go(func() { _ = call.Do(context.Background(), []int{1}) })
			<-held
			errs := map[int]error{}
			var emu sync.Mutex
			for _, it := range []int{11, 12, 13} {
				wg.Go(func() {
					err := call.Do(context.Background(), []int{it})
					emu.Lock()
					errs[it] = err
					emu.Unlock()
				})
			}
			// The three queue behind the held call before it is released.
			deadline := time.Now().Add(5 * time.Second)
			for groupcommit.CallsQueued(call) < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d calls queued, want 3", groupcommit.CallsQueued(call))
				}
				time.Sleep(time.Millisecond)
			}
			close(hold)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if got := len(calls) - 1; got != tc.wantCalls {
				t.Errorf("%d calls after the first (%v), want %d", got, calls, tc.wantCalls)
			}
			if merged := calls[1]; len(merged) != 3 {
				t.Errorf("the second call took %v, want the three queued items", merged)
			}
			for it, err := range errs {
				if (err != nil) != tc.wantErrs[it] {
					t.Errorf("item %d: err %v, want failed=%v", it, err, tc.wantErrs[it])
				}
			}
		})
	}
}

// TestLingeringDrainMissesNothing: items that arrive one at a time, with pauses shorter than
// the drain's linger and around the moment it finds the queue empty, each run at once, in a
// batch of one; none waits for another, nor for the linger to end (half of it is the limit).
func TestLingeringDrainMissesNothing(t *testing.T) {
	b := groupcommit.New(groupcommit.Config{}, func(_ context.Context, items []int) ([]int, error) {
		return items, nil
	})
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), groupcommit.Linger/2)
		got, err := b.Do(ctx, "k", i)
		cancel()
		if err != nil || got != i {
			t.Fatalf("item %d: got %d, %v", i, got, err)
		}
		time.Sleep(time.Duration(i%4) * 100 * time.Microsecond)
	}
}
