package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
)

// expiryBatch bounds the balances one transaction of the expiry job notifies; a longer list is
// taken in several.
const expiryBatch = 500

// NotifyExpiries sends balance.expiring for each balance that expires within notice and
// balance.expired for each that has expired, once per expiry: the expiry notified for is
// recorded in the transaction that writes the event, so a new expiry (a top-up that moves it)
// re-arms both. A balance first seen already expired gets balance.expired alone. It returns how
// many events it wrote.
func (l *Ledger) NotifyExpiries(ctx context.Context, notice time.Duration) (int, error) {
	total := 0
	after := ""
	for {
		n, next, err := l.notifyExpiries(ctx, notice, after)
		total += n
		if err != nil || next == "" {
			return total, err
		}
		after = next
	}
}

// notifyExpiries notifies the expiries due of up to expiryBatch clients after the client id
// after, in one transaction, and returns the client id to go on after ("" at the end): each
// run goes through the clients once, in id order, so a balance held by a debit (skipped) never
// holds the run up.
func (l *Ledger) notifyExpiries(ctx context.Context, notice time.Duration, after string) (n int, next string, err error) {
	err = l.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var due []domain.ExpiryDue
		var err error
		due, next, err = st.ExpiriesDue(ctx, notice, after, expiryBatch)
		if err != nil {
			return err
		}
		evs := make([]events.Event, 0, len(due))
		marks := make([]domain.ExpiryNotified, 0, len(due))
		for _, d := range due {
			at := d.ExpiresAt
			var (
				e   events.Event
				err error
			)
			mark := domain.ExpiryNotified{ClientID: d.ClientID}
			if domain.Expired(&at, d.Now) {
				e, err = events.New(d.ClientID, events.BalanceExpired, events.BalanceExpiredData{Balance: d.Balance, ExpiredAt: events.Time(at)}, d.Now)
				// The notice is moot once the balance expired: it is never sent late.
				mark.Expired, mark.Expiring = &at, &at
			} else {
				e, err = events.New(d.ClientID, events.BalanceExpiring, events.BalanceExpiringData{Balance: d.Balance, ExpiresAt: events.Time(at)}, d.Now)
				mark.Expiring = &at
			}
			if err != nil {
				return err
			}
			evs, marks = append(evs, e), append(marks, mark)
		}
		if len(evs) == 0 {
			return nil
		}
		if err := st.SetExpiryNotified(ctx, marks); err != nil {
			return err
		}
		n = len(evs)
		return st.Emit(ctx, evs...)
	})
	if err != nil {
		return 0, "", fmt.Errorf("notify expiries: %w", err)
	}
	return n, next, nil
}

// ExpiryArgs is the periodic job that sends the balances' expiry events.
type ExpiryArgs struct{}

// Kind names the job.
func (ExpiryArgs) Kind() string { return "balance.expiry_notice" }

// ExpiryQueue is the River queue of the expiry job.
const ExpiryQueue = "balance_expiry"

// InsertOpts: its own queue, and few attempts: the next period's run does the same work. Two
// runs at once (two replicas) are safe: each skips the balances the other locked.
func (ExpiryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: ExpiryQueue, MaxAttempts: 3}
}

// ExpiryWorker runs NotifyExpiries.
type ExpiryWorker struct {
	river.WorkerDefaults[ExpiryArgs]
	Ledger *Ledger
	Notice time.Duration
}

// Work sends the due expiry events.
func (w *ExpiryWorker) Work(ctx context.Context, _ *river.Job[ExpiryArgs]) error {
	_, err := w.Ledger.NotifyExpiries(ctx, w.Notice)
	return err
}

// ExpiryJob is the periodic job that the elected leader among the replicas inserts every
// every; a run is also made at start, so a restart does not wait a period.
func ExpiryJob(every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every), func() (river.JobArgs, *river.InsertOpts) {
		return ExpiryArgs{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}
