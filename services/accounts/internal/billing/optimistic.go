package billing

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
)

// The optimistic path of a debit batch: one round trip instead of two.
//
// The locked path (Ledger.decide) spends a round trip locking and reading the batch's clients
// before it can decide, then one writing. But a client's rows rarely change between two of its
// batches except by the batches themselves, and the ledger wrote those: it knows the balance
// each left. So the ledger keeps what it saw of each client when its last batch committed
// (seenClients: balance, status, expiry, own balance.low threshold, price overrides), decides
// the next batch against that with the same rules (Ledger.plan), and sends the writes with the
// condition that the rows still hold it (Store.AppendLedgerIfUnchanged: under the lock its
// check takes, in the same round trip as the append and the commit). When a row does not,
// nothing is written and the batch takes the locked path, which refreshes what was seen.
//
// Why this answers exactly as the locked path would: a batch's decisions are a function of the
// batch, the configuration and, per client, the balance, status, expiry (against the
// database's clock), own threshold and price overrides. The check compares each of the latter
// with what the batch was decided against, under the row lock, as the locked path reads them
// (the balance locked, the rest as of the statement), and judges the expiry by the database's
// clock in the same transaction. Equal inputs, equal decisions, and the rows hold the same
// balance_after chain. What moved them since does not matter, only what they hold: a top-up
// and a debit by another replica that cancel out leave the batch's decisions right.
//
// What keeps money exact across replicas: another replica's batch holds the rows it writes
// until it commits; the check's FOR UPDATE waits for it and then sees the balance it left, so
// a batch decided against the older balance is refused, never written over it (no lost
// debit); each reference stays unique per client (no double debit, a retry replays as on the
// locked path). The check locks in client id order, as LockForDebits does, so batches of both
// paths on any replicas never deadlock.
//
// Only the batches whose every decision the check can vouch for go this way: every debit
// charged (a refusal asks whether its reference was charged before, which the locked path
// does), every client seen before and no balance.low crossing (rare, and its event is written
// in the batch's transaction by the locked path, so once per crossing holds as before). A
// reference already in the ledger fails the insert as on the locked path, and the batch is
// decided again knowing it.

// Debit batch paths, the values of the path label.
const (
	// PathOptimistic: one round trip, decided against what the ledger saw.
	PathOptimistic = "optimistic"
	// PathFallback: an optimistic attempt that wrote nothing (a client's rows had changed, or
	// a reference was retried), then the locked path: one round trip lost.
	PathFallback = "fallback"
	// PathLocked: the locked path alone (a client not seen yet, a refusal or a balance.low
	// crossing in the batch, or backing off after misses).
	PathLocked = "locked"
)

// maxSeen bounds how many clients the ledger remembers (a few hundred bytes each); past it, one
// is forgotten for each new one, and its next batch takes the locked path.
const maxSeen = 1 << 16

// maxBackoff bounds how many batches of a client take the locked path after its optimistic
// attempts missed in a row: 2^misses - 1, at most this.
const maxBackoff = 63

// seen is what the ledger saw of one client when its last batch committed.
type seen struct {
	state     domain.BalanceState // Balance as the batch left it; Now the database's clock then
	at        time.Time           // when, on this process's monotonic clock
	overrides []domain.Price
	// misses counts the optimistic attempts in a row that met changed rows; wait is how many
	// of the client's batches go on taking the locked path first. A client whose rows another
	// replica keeps changing (one hot client debited everywhere) would otherwise lose a round
	// trip in most of its batches.
	misses, wait int
}

// seenClients is what the ledger saw of its clients, shared by its batches. Nothing correct
// depends on it: a wrong entry costs an optimistic attempt that writes nothing.
type seenClients struct {
	mu sync.Mutex
	m  map[string]*seen
}

// saw records what a committed batch of the locked path read under the locks (snap) and left
// (after, each client's balance).
func (s *seenClients) saw(snap domain.DebitSnapshot, after map[string]int64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range snap.Balances {
		st.Balance = after[id]
		c := s.entry(id)
		c.state, c.at, c.overrides = st, now, snap.Overrides[id]
	}
}

// entry is the client's entry, made (and room made for it) when missing. s.mu is held.
func (s *seenClients) entry(id string) *seen {
	if c, ok := s.m[id]; ok {
		return c
	}
	if s.m == nil {
		s.m = map[string]*seen{}
	}
	if len(s.m) >= maxSeen {
		for old := range s.m { // any one
			delete(s.m, old)
			break
		}
	}
	c := &seen{}
	s.m[id] = c
	return c
}

// snapshot is the batch's snapshot as seen, with the database's clock estimated from when it
// was seen; ok is false when a client was not seen or is backing off (whose wait it counts
// down).
func (s *seenClients) snapshot(clients []string) (snap domain.DebitSnapshot, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap = domain.DebitSnapshot{Balances: make(map[string]domain.BalanceState, len(clients)), Overrides: make(map[string][]domain.Price, len(clients))}
	ok = true
	for _, id := range clients {
		c, found := s.m[id]
		switch {
		case !found:
			ok = false
		case c.wait > 0:
			c.wait--
			ok = false
		default:
			st := c.state
			st.Now = st.Now.Add(time.Since(c.at))
			snap.Balances[id], snap.Overrides[id] = st, c.overrides
		}
	}
	return snap, ok
}

// wrote records the balances an optimistic batch left (after) at the database's time now.
func (s *seenClients) wrote(clients []string, after map[string]int64, now time.Time) {
	at := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range clients {
		if c, ok := s.m[id]; ok {
			c.state.Balance, c.state.Now, c.at, c.misses = after[id], now, at, 0
		}
	}
}

// missed backs the clients of a batch whose optimistic attempt met changed rows off (the check
// does not say whose rows changed).
func (s *seenClients) missed(clients []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range clients {
		if c, ok := s.m[id]; ok {
			c.misses++
			c.wait = min(1<<min(c.misses, 6)-1, maxBackoff)
		}
	}
}

// forget drops what was seen of clients: their rows changed here (a top-up, refund, price) or a
// batch of theirs failed, which would only make their next optimistic attempt miss.
func (s *seenClients) forget(clients ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range clients {
		delete(s.m, id)
	}
}

// optimisticStore is the Store that can write a batch decided against what the ledger saw
// (store.Store); a Store without it debits on the locked path alone.
type optimisticStore interface {
	// AppendLedgerIfUnchanged is AppendLedger behind a check that each client still holds
	// what seen says, in the same round trip; when one does not, it writes nothing and
	// returns domain.ErrBalanceChanged (roll back).
	AppendLedgerIfUnchanged(ctx context.Context, seen []domain.SeenBalance, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error)
}

// errNotOptimistic: the batch store cannot write optimistically.
var errNotOptimistic = errors.New("the store has no optimistic append")

// decideSeen tries a batch in one round trip against what the ledger saw of its clients. path
// says how it went: PathOptimistic, committed, with each debit's outcome; PathFallback, tried
// and nothing written (err is domain.ErrReferenceTaken when a reference was retried, nil when
// rows had changed); PathLocked, not tried. Any other error is the batch's.
func (l *Ledger) decideSeen(ctx context.Context, batch []DebitRequest) ([]outcome, string, error) {
	if _, ok := l.st.(optimisticStore); !ok {
		return nil, PathLocked, nil
	}
	snap, ok := l.seen.snapshot(clientsOf(batch))
	if !ok {
		return nil, PathLocked, nil
	}
	p := l.plan(batch, snap)
	if len(p.refused) > 0 || len(l.lowBalances(p.clients, snap, p.balance)) > 0 {
		return nil, PathLocked, nil
	}
	unexpired := map[string]bool{}
	for _, e := range p.entries {
		if e.Amount < 0 {
			unexpired[e.ClientID] = true
		}
	}
	holds := make([]domain.SeenBalance, 0, len(p.clients))
	for _, id := range p.clients {
		st := snap.Balances[id]
		holds = append(holds, domain.SeenBalance{
			ClientID: id, Balance: st.Balance, Status: st.Status, LowThreshold: st.LowThreshold,
			Overrides: snap.Overrides[id], Unexpired: unexpired[id],
		})
	}
	var now time.Time // the database's, when the batch was written
	err := l.batchTx.InTx(ctx, func(ctx context.Context, st Store) error {
		o, ok := st.(optimisticStore)
		if !ok {
			return errNotOptimistic
		}
		written, err := o.AppendLedgerIfUnchanged(ctx, holds, p.entries)
		if err != nil {
			return err
		}
		p.answer(written)
		if len(written) > 0 {
			now = written[0].CreatedAt
		}
		return nil
	})
	switch {
	case err == nil:
		l.seen.wrote(p.clients, p.balance, now)
		return p.out, PathOptimistic, nil
	case errors.Is(err, errNotOptimistic):
		return nil, PathLocked, nil
	case errors.Is(err, domain.ErrBalanceChanged):
		l.seen.missed(p.clients)
		return nil, PathFallback, nil
	}
	return nil, PathFallback, err
}
