// Package groupcommit shares one unit of work (a transaction, a call) among concurrent
// requests: while a batch is in flight on a shard, the requests that arrive there queue up, and
// the next batch takes them all. Under load, N concurrent requests cost a few batches instead of
// N; alone, a request runs at once, in a batch of one, and waits for nothing.
//
// The batch's function decides what sharing means, and must keep every request's own answer:
// it gets the items in arrival order and returns one result for each.
package groupcommit

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Config shapes a Batcher; its zero value is one shard of batches of at most 512, 30 s each.
type Config struct {
	// Shards is how many batches may be in flight at once; a key always lands on the same one.
	Shards int
	// MaxBatch bounds the items of one batch.
	MaxBatch int
	// Timeout bounds each batch. A batch outlives the request that started it (the others in it
	// still wait), so it runs on its own context, not on any request's.
	Timeout time.Duration
	// Span, when set, makes each batch a span of this name: a child of the first traced request
	// in it, linked to the others, so every request's trace leads to the work done for it.
	Span string
	// Observe, when set, is told the size of every batch that succeeded. Shards call it
	// concurrently.
	Observe func(size int)
}

// Commit runs one batch and returns one result per item, in the items' order; an error fails
// every item of the batch.
type Commit[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Batcher groups the items of concurrent Do calls into batches run by its Commit.
type Batcher[T, R any] struct {
	cfg    Config
	commit Commit[T, R]
	shards []*shard[T, R]
}

type shard[T, R any] struct {
	mu      sync.Mutex
	items   []*pending[T, R]
	running bool // a drain goroutine serves the shard, busy or lingering
	wake    chan struct{}
}

type pending[T, R any] struct {
	item T
	done chan result[R]
	span trace.SpanContext // the request's span, when traced
}

type result[R any] struct {
	r   R
	err error
}

const (
	defaultMaxBatch = 512
	defaultTimeout  = 30 * time.Second
)

// New returns a Batcher that runs batches with commit.
func New[T, R any](cfg Config, commit Commit[T, R]) *Batcher[T, R] {
	cfg.Shards = max(cfg.Shards, 1)
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	b := &Batcher[T, R]{cfg: cfg, commit: commit}
	for range cfg.Shards {
		b.shards = append(b.shards, &shard[T, R]{wake: make(chan struct{}, 1)})
	}
	return b
}

// Do runs item in the next batch of key's shard and returns its result. When ctx ends first,
// Do returns ctx.Err(), but the item may still be committed: the caller must be able to tell
// (an idempotent retry, a reconciler).
func (b *Batcher[T, R]) Do(ctx context.Context, key string, item T) (R, error) {
	p := b.pending(ctx, item)
	b.enqueue(b.shards[b.shardOf(key)], p)
	return p.wait(ctx)
}

// DoMany runs items as Do runs each, queued at once in their order: items of one shard run in
// that order, in one batch when they fit. keys[i] is the key of items[i]. It returns each
// item's result and error by index; when ctx ends first, the items not answered yet have
// ctx.Err(), and may still be committed, as with Do.
func (b *Batcher[T, R]) DoMany(ctx context.Context, keys []string, items []T) ([]R, []error) {
	ps := make([]*pending[T, R], len(items))
	byShard := make([][]*pending[T, R], len(b.shards))
	for i, it := range items {
		ps[i] = b.pending(ctx, it)
		s := b.shardOf(keys[i])
		byShard[s] = append(byShard[s], ps[i])
	}
	for s, queued := range byShard {
		if len(queued) > 0 {
			b.enqueue(b.shards[s], queued...)
		}
	}
	out, errs := make([]R, len(items)), make([]error, len(items))
	for i, p := range ps {
		out[i], errs[i] = p.wait(ctx)
	}
	return out, errs
}

func (b *Batcher[T, R]) pending(ctx context.Context, item T) *pending[T, R] {
	p := &pending[T, R]{item: item, done: make(chan result[R], 1)}
	if b.cfg.Span != "" {
		p.span = trace.SpanContextFromContext(ctx)
	}
	return p
}

// enqueue queues ps on s, and starts or wakes its drain.
func (b *Batcher[T, R]) enqueue(s *shard[T, R], ps ...*pending[T, R]) {
	s.mu.Lock()
	s.items = append(s.items, ps...)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go b.drain(s)
		return
	}
	select { // a lingering drain takes them at once; a busy one will see them after its batch
	case s.wake <- struct{}{}:
	default:
	}
}

// wait is p's result, or ctx.Err() when ctx ends first.
func (p *pending[T, R]) wait(ctx context.Context) (R, error) {
	select { // an answer already there is the answer, ended ctx or not
	case r := <-p.done:
		return r.r, r.err
	default:
	}
	select {
	case r := <-p.done:
		return r.r, r.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// shardOf is the index of key's shard.
func (b *Batcher[T, R]) shardOf(key string) int {
	if len(b.shards) == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(b.shards)))
}

// linger is how long a shard's drain goroutine waits for more items once none are left,
// before it ends. A new goroutine per burst would start on a small stack and grow it, copying
// it, down the batch's database calls: ~2% of verification's CPU on a verify (bench -pprof).
const linger = time.Second

// drain runs a shard's queued items, batch after batch, until none have come for linger.
func (b *Batcher[T, R]) drain(s *shard[T, R]) {
	idle := time.NewTimer(linger)
	defer idle.Stop()
	for {
		s.mu.Lock()
		n := min(len(s.items), b.cfg.MaxBatch)
		if n == 0 {
			s.mu.Unlock()
			idle.Reset(linger)
			select {
			case <-s.wake:
				continue
			case <-idle.C:
			}
			s.mu.Lock()
			if len(s.items) == 0 {
				s.running = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			continue
		}
		batch := s.items[:n:n]
		s.items = s.items[n:]
		s.mu.Unlock()

		items := make([]T, n)
		for i, p := range batch {
			items[i] = p.item
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
		ctx, span := b.batchSpan(ctx, batch)
		out, err := b.commit(ctx, items)
		if err == nil && len(out) != n {
			err = fmt.Errorf("groupcommit: %d results for a batch of %d", len(out), n)
		}
		if err != nil {
			span.SetStatus(otelcodes.Error, "batch failed")
		}
		span.End()
		cancel()
		if err == nil && b.cfg.Observe != nil {
			b.cfg.Observe(n)
		}
		for i, p := range batch {
			r := result[R]{err: err}
			if err == nil {
				r.r = out[i]
			}
			p.done <- r
		}
	}
}

// batchSpan starts the span of a batch when Config.Span is set.
func (b *Batcher[T, R]) batchSpan(ctx context.Context, batch []*pending[T, R]) (context.Context, trace.Span) {
	if b.cfg.Span == "" {
		return ctx, trace.SpanFromContext(ctx)
	}
	var parent trace.SpanContext
	var links []trace.Link
	for _, p := range batch {
		switch {
		case !p.span.IsValid():
		case !parent.IsValid():
			parent = p.span
		default:
			links = append(links, trace.Link{SpanContext: p.span})
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	return otel.Tracer("github.com/mnvhq/mnv/services/platform/groupcommit").Start(ctx, b.cfg.Span,
		trace.WithLinks(links...), trace.WithAttributes(attribute.Int("mnv.batch_size", len(batch))))
}

// Calls merges concurrent calls of one function (see Merge).
type Calls[T any] struct {
	b *Batcher[[]T, error]
}

// Merge returns fn with the calls made at the same time merged into one: their items are
// concatenated, in arrival order, and every caller gets the merged call's error. fn must
// accept any items together (an idempotent receiver, a batch API). When isolate reports an
// error as the fault of some item (a receiver refusing one malformed item), each caller's
// items are sent again on their own, so that only the callers at fault hear of it.
func Merge[T any](cfg Config, fn func(ctx context.Context, items []T) error, isolate func(error) bool) *Calls[T] {
	return &Calls[T]{b: New(cfg, func(ctx context.Context, calls [][]T) ([]error, error) {
		out := make([]error, len(calls))
		if len(calls) == 1 {
			out[0] = fn(ctx, calls[0])
			return out, nil
		}
		var all []T
		for _, c := range calls {
			all = append(all, c...)
		}
		err := fn(ctx, all)
		if err != nil && isolate != nil && isolate(err) {
			for i, c := range calls {
				out[i] = fn(ctx, c)
			}
			return out, nil
		}
		for i := range out {
			out[i] = err
		}
		return out, nil
	})}
}

// Do calls the function with items, merged with the calls made at the same time.
func (c *Calls[T]) Do(ctx context.Context, items []T) error {
	callErr, err := c.b.Do(ctx, "", items)
	if err != nil {
		return err
	}
	return callErr
}
