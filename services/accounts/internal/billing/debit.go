package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/groupcommit"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// MaxAmount bounds any single amount, far below int64 overflow of a sum of many.
const MaxAmount = 1_000_000_000_000

// maxBatch bounds how many debits of one client share a transaction.
const maxBatch = 512

// DebitRequest asks to charge a client the price of one operation.
type DebitRequest struct {
	ClientID    string
	Kind        money.Kind
	Variant     string
	Reference   string
	Description *string
}

// DebitResult is the outcome of a debit.
type DebitResult struct {
	Entry    domain.LedgerEntry
	Charged  int64
	Replayed bool
}

// Ledger owns the money of every client.
//
// Debits are group-committed (platform/groupcommit): while a transaction is in flight on a
// shard, the debits that arrive for its clients queue up, and the next transaction takes them
// all, whatever their clients: one round trip locks the clients' balance rows (in id order) and
// reads their balances and prices, the batch is decided in order in Go, one round trip writes
// every ledger row and balance, one commit. One hot client therefore pays one lock hand-off and
// one commit per batch instead of per debit, and debits spread over many clients share commits
// too. Every debit still gets its own ledger row with its exact balance_after, and no balance
// goes below zero. The row locks, not the queues, make this correct, so several replicas are as
// safe as one. A batch whose clients the ledger saw in an earlier batch is first tried in one
// round trip against what it saw, written only if the rows still hold it (optimistic.go).
type Ledger struct {
	st     Store
	tx     Tx
	prices Prices

	batchOnce sync.Once
	batches   *groupcommit.Batcher[DebitRequest, outcome]
	batchTx   Tx // where the batches commit (WithBatchStore)
	// seen is what the batches saw of their clients, for the optimistic path (optimistic.go).
	seen seenClients

	// Metrics, when set, count debits and refunds and observe batch sizes.
	Metrics *Metrics
	// Traced makes each batch a span linked to its debits' requests; the app sets it from
	// tracing.Enabled (which would link gRPC into this package). Off, debits pay nothing for it.
	Traced bool
	// Observe, when set, is told the size of every committed batch (for tests). Shards call it
	// concurrently.
	Observe func(batchSize int)
	// LowBalance is the threshold of balance.low for the clients without one of their own
	// (MNV_LOW_BALANCE_THRESHOLD); 0 sends none. Set before the first debit.
	LowBalance int64
}

// shards is how many batches may be in flight at once in one process (a client always lands on
// the same one). One: a batch costs mostly per batch (a lock round trip, a write round trip, a
// commit), so the fewer in flight, the more each carries and the less each debit costs. With
// four, make bench's verifies ran 2.4 debits a batch; with one, 4.7, at 1.4 times the verifies
// a second (issue 15). Replicas still run their batches side by side.
const shards = 1

// BatchConns is how many connections the debit batches hold at most: one per shard
// (WithBatchStore's pool needs no more).
const BatchConns = shards

type outcome struct {
	res DebitResult
	err error
}

// NewLedger returns a Ledger over st (outside any transaction) and tx with the configured
// prices. Its fields are read at the first debit.
func NewLedger(st Store, tx Tx, prices Prices) *Ledger {
	return &Ledger{st: st, tx: tx, batchTx: tx, prices: prices}
}

// WithBatchStore makes l commit its debit batches through tx instead of NewLedger's: a pool of
// their own (pg.PoolConfig.Batches), where PostgreSQL plans their statements once and no other
// query waits for a connection ahead of a batch. Before the first debit.
func (l *Ledger) WithBatchStore(tx Tx) *Ledger {
	l.batchTx = tx
	return l
}

// ValidateReference checks an idempotency reference: 1 to 200 printable characters.
func ValidateReference(field, ref string) error {
	if ref == "" || len(ref) > 200 || !utf8.ValidString(ref) || strings.ContainsFunc(ref, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fault.Invalid(field, "must be 1 to 200 printable characters")
	}
	return nil
}

// Debit charges the client the price of req.Kind/req.Variant, once per reference.
//
// When ctx ends before the batch commits, Debit returns ctx.Err() but the debit may still
// commit: the caller retries with the same reference (and gets the first result) or refunds it.
func (l *Ledger) Debit(ctx context.Context, req DebitRequest) (DebitResult, error) {
	if err := validDebit(req); err != nil {
		return DebitResult{}, err
	}
	o, err := l.batcher().Do(ctx, req.ClientID, req)
	if err != nil {
		return DebitResult{}, err
	}
	return o.res, o.err
}

// DebitMany charges each of reqs as Debit would, as if they came one after another: queued at
// once in their order, so a reference repeated is replayed at its second place and a balance
// runs out on the later debits. It returns each debit's result and error by index.
func (l *Ledger) DebitMany(ctx context.Context, reqs []DebitRequest) ([]DebitResult, []error) {
	res, errs := make([]DebitResult, len(reqs)), make([]error, len(reqs))
	valid := make([]int, 0, len(reqs))
	keys := make([]string, 0, len(reqs))
	queued := make([]DebitRequest, 0, len(reqs))
	for i, req := range reqs {
		if errs[i] = validDebit(req); errs[i] == nil {
			valid, keys, queued = append(valid, i), append(keys, req.ClientID), append(queued, req)
		}
	}
	out, failed := l.batcher().DoMany(ctx, keys, queued)
	for j, i := range valid {
		if errs[i] = failed[j]; errs[i] == nil {
			res[i], errs[i] = out[j].res, out[j].err
		}
	}
	return res, errs
}

func validDebit(req DebitRequest) error {
	if !req.Kind.Chargeable() {
		return fault.Invalid("kind", "must be VERIFICATION, CONNECT_ENRICHMENT, STUCK_PLUS_REVEAL or VERIFICATION_STEP")
	}
	if err := ValidateReference("reference", req.Reference); err != nil {
		return err
	}
	if len(req.Variant) > 64 {
		return fault.Invalid("variant", "must be at most 64 characters")
	}
	return nil
}

func (l *Ledger) batcher() *groupcommit.Batcher[DebitRequest, outcome] {
	l.batchOnce.Do(func() {
		cfg := groupcommit.Config{Shards: shards, MaxBatch: maxBatch, Observe: l.observe}
		if l.Traced {
			cfg.Span = "debit batch"
		}
		l.batches = groupcommit.New(cfg, l.commitCounted)
	})
	return l.batches
}

func (l *Ledger) observe(n int) {
	l.Metrics.batchSize(n)
	if l.Observe != nil {
		l.Observe(n)
	}
}

// commitCounted commits a batch and counts each debit's outcome, before its caller hears, so a
// metric never lags what a caller saw. A failed batch is every debit's outcome.
func (l *Ledger) commitCounted(ctx context.Context, batch []DebitRequest) ([]outcome, error) {
	out, err := l.commit(ctx, batch)
	if err != nil {
		out = make([]outcome, len(batch))
		for i := range out {
			out[i].err = err
		}
	}
	for i, req := range batch {
		l.Metrics.debit(req.Kind, out[i].res, out[i].err)
	}
	return out, nil
}

// commit decides and writes one batch in one transaction. It first tries the batch in one
// round trip against what the ledger saw of its clients (optimistic.go); when that does not
// apply or finds a client changed, the batch is decided under the balance locks, as below,
// which also refreshes what the ledger saw. A batch is first decided as if none of its
// references had been used, which is the rule; when the ledger says otherwise (a retried
// debit), it is rolled back and decided again knowing them. A retry is told either by the
// insert's conflict or, for a debit the balance now refuses (which inserts nothing), by looking
// its reference up: a charge that happened is that charge, whatever the balance, status or
// expiry are now.
func (l *Ledger) commit(ctx context.Context, batch []DebitRequest) ([]outcome, error) {
	out, path, err := l.decideSeen(ctx, batch)
	if path != PathOptimistic && err == nil {
		out, err = l.decide(ctx, batch, nil)
	}
	if errors.Is(err, domain.ErrReferenceTaken) {
		lookup := make([][2]string, 0, len(batch))
		for _, req := range batch {
			lookup = append(lookup, [2]string{req.ClientID, req.Reference})
		}
		out, err = l.decide(ctx, batch, lookup)
	}
	if err != nil {
		l.seen.forget(clientsOf(batch)...)
		return nil, fmt.Errorf("debit batch: %w", err)
	}
	l.Metrics.batchPath(path)
	return out, nil
}

// decide runs one attempt of a batch under the balance locks of its clients; lookup names the
// references to read from the ledger. Once it commits, what it read and wrote is what the
// ledger saw of the clients (seenClients.saw).
func (l *Ledger) decide(ctx context.Context, batch []DebitRequest, lookup [][2]string) ([]outcome, error) {
	var p batchPlan
	var snap domain.DebitSnapshot
	err := l.batchTx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		snap, err = st.LockForDebits(ctx, clientsOf(batch), lookup)
		if err != nil {
			return err
		}
		p = l.plan(batch, snap)
		if lookup == nil && len(p.refused) > 0 {
			// Rare (a refusal), so it may cost a round trip; the common batch does not pay it.
			existing, err := st.LedgerByReferences(ctx, p.refused)
			if err != nil {
				return err
			}
			if len(existing) > 0 {
				return fmt.Errorf("a refused debit was charged before: %w", domain.ErrReferenceTaken)
			}
		}
		if lows := l.lowBalances(p.clients, snap, p.balance); len(lows) > 0 {
			// Only a batch that crossed a threshold pays this round trip. Before the append,
			// which may end the transaction (Store.AppendLedger).
			if err := st.Emit(ctx, lows...); err != nil {
				return err
			}
		}
		written, err := st.AppendLedger(ctx, p.entries)
		if err != nil {
			return err
		}
		p.answer(written)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.seen.saw(snap, p.balance)
	return p.out, nil
}

// batchPlan is a batch decided against a snapshot of its clients, before anything is written.
type batchPlan struct {
	out     []outcome
	entries []domain.LedgerEntry // the ledger rows to write, in the batch's order
	entryOf []int                // each debit's index into entries, or -1
	refused [][2]string          // client/reference of the debits refused
	clients []string             // the batch's clients, in the order they first come
	balance map[string]int64     // each known client's balance after the batch
}

// plan decides a batch in order against snap: the one place a debit's rules are applied,
// whether snap was read under the balance locks (decide) or is what the ledger saw of its
// clients (decideSeen). Replays come from snap.Existing; a reference repeated in the batch is
// answered like its first debit.
func (l *Ledger) plan(batch []DebitRequest, snap domain.DebitSnapshot) batchPlan {
	p := batchPlan{out: make([]outcome, len(batch)), entryOf: make([]int, len(batch)), clients: clientsOf(batch), balance: map[string]int64{}}
	for id, st := range snap.Balances {
		p.balance[id] = st.Balance
	}
	firstOf := map[string]int{} // client/reference -> index of its first debit here
	for i, req := range batch {
		p.entryOf[i] = -1
		state, ok := snap.Balances[req.ClientID]
		if !ok {
			p.out[i] = outcome{err: fmt.Errorf("client: %w", fault.ErrNotFound)}
			continue
		}
		key := domain.LedgerKey(req.ClientID, req.Reference)
		if e, ok := snap.Existing[key]; ok {
			p.out[i] = replay(e, req)
			continue
		}
		if j, ok := firstOf[key]; ok {
			p.out[i] = sameAs(p.out[j], p.entryOf[j], req, batch[j])
			p.entryOf[i] = p.entryOf[j]
			continue
		}
		firstOf[key] = i
		price := l.prices.For(req.Kind, req.Variant, snap.Overrides[req.ClientID])
		if err := chargeable(state, p.balance[req.ClientID], price); err != nil {
			p.out[i] = outcome{err: err}
			p.refused = append(p.refused, [2]string{req.ClientID, req.Reference})
			continue
		}
		p.balance[req.ClientID] -= price
		p.entryOf[i] = len(p.entries)
		p.entries = append(p.entries, domain.LedgerEntry{
			ClientID: req.ClientID, Kind: req.Kind, Amount: -price, BalanceAfter: p.balance[req.ClientID],
			Reference: req.Reference, Variant: req.Variant, Description: req.Description,
		})
	}
	return p
}

// answer gives each charged debit of p its entry as written (with its id and time).
func (p *batchPlan) answer(written []domain.LedgerEntry) {
	for i := range p.out {
		if j := p.entryOf[i]; j >= 0 {
			replayed := p.out[i].res.Replayed
			p.out[i] = outcome{res: DebitResult{Entry: written[j], Charged: -written[j].Amount, Replayed: replayed}}
		}
	}
}

// clientsOf lists the clients of batch, each once, in the order they first come.
func clientsOf(batch []DebitRequest) []string {
	clients := make([]string, 0, len(batch))
	seen := map[string]bool{}
	for _, req := range batch {
		if !seen[req.ClientID] {
			seen[req.ClientID] = true
			clients = append(clients, req.ClientID)
		}
	}
	return clients
}

// lowBalances are the balance.low events of a batch: one for each client whose balance the
// batch took from at or above its threshold to below it. Decided in Go from the balances the
// batch locked and the ones it wrote, so a batch without a crossing builds nothing and costs no
// query. A debit only lowers a balance, so a balance crosses at most once per batch; the next
// batch starts below the threshold and stays silent until a credit lifts it back (a top-up or
// refund), which re-arms the alert without any state of its own.
func (l *Ledger) lowBalances(clients []string, snap domain.DebitSnapshot, after map[string]int64) []events.Event {
	var out []events.Event
	for _, id := range clients {
		st, ok := snap.Balances[id]
		if !ok {
			continue
		}
		threshold := l.LowBalance
		if st.LowThreshold != nil {
			threshold = *st.LowThreshold
		}
		if threshold <= 0 || st.Balance < threshold || after[id] >= threshold {
			continue
		}
		e, err := events.New(id, events.BalanceLow, events.BalanceLowData{Balance: after[id], Threshold: threshold}, st.Now)
		if err != nil {
			// Only a bug gets here (the type is known, the data an object): never let it
			// refuse a client's debits.
			continue
		}
		out = append(out, e)
	}
	return out
}

// chargeable decides whether a price can be taken from balance.
func chargeable(s domain.BalanceState, balance, price int64) error {
	switch {
	case s.Status != principal.StatusActive:
		return fault.ErrSuspended
	case price == 0:
		// A free operation needs no balance, valid or not.
		return nil
	case domain.Expired(s.ExpiresAt, s.Now):
		return money.ErrBalanceExpired
	case balance < price:
		return money.ErrInsufficientBalance
	}
	return nil
}

// replay answers a debit whose reference is already in the ledger.
func replay(e domain.LedgerEntry, req DebitRequest) outcome {
	if e.Kind != req.Kind || e.Variant != req.Variant || e.Amount > 0 {
		return outcome{err: domain.ErrReferenceConflict}
	}
	return outcome{res: DebitResult{Entry: e, Charged: -e.Amount, Replayed: true}}
}

// sameAs answers the second debit of a reference within one batch like the first.
func sameAs(first outcome, firstEntry int, req, firstReq DebitRequest) outcome {
	if req.Kind != firstReq.Kind || req.Variant != firstReq.Variant {
		return outcome{err: domain.ErrReferenceConflict}
	}
	if firstEntry < 0 {
		return first
	}
	return outcome{res: DebitResult{Replayed: true}}
}
