package billing

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// Debit and refund outcomes, the values of the outcome label.
const (
	OutcomeCharged             = "charged"
	OutcomeReplayed            = "replayed"
	OutcomeInsufficientBalance = "insufficient_balance"
	OutcomeBalanceExpired      = "balance_expired"
	OutcomeSuspended           = "suspended"
	OutcomeConflict            = "conflict"
	OutcomeRefunded            = "refunded"
	OutcomeNothingToRefund     = "nothing_to_refund"
	OutcomeError               = "error"
)

var (
	debitOutcomes  = []string{OutcomeCharged, OutcomeReplayed, OutcomeInsufficientBalance, OutcomeBalanceExpired, OutcomeSuspended, OutcomeConflict, OutcomeError}
	refundOutcomes = []string{OutcomeRefunded, OutcomeReplayed, OutcomeNothingToRefund, OutcomeError}
	batchPaths     = []string{PathOptimistic, PathFallback, PathLocked}
	chargedKinds   = []money.Kind{money.KindVerification, money.KindConnectEnrichment, money.KindStuckPlusReveal, money.KindVerificationStep}
)

// Metrics count what the ledger does with money. A nil *Metrics counts nothing.
//
// The counters are resolved once, here: a debit pays an array index and an atomic add, not a
// label lookup, and every series exists from the start (rate() and alerts see zeros, not
// gaps).
type Metrics struct {
	debits   map[money.Kind]map[string]prometheus.Counter
	debited  map[money.Kind]prometheus.Counter
	refunds  map[string]prometheus.Counter
	refunded prometheus.Counter
	batch    prometheus.Histogram
	paths    map[string]prometheus.Counter
}

// NewMetrics creates the ledger's metrics and registers them on reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	debits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "accounts", Name: "debits_total",
		Help: "Debits by ledger kind and outcome: charged, replayed (a repeated reference), insufficient_balance, balance_expired, suspended, conflict, error.",
	}, []string{"kind", "outcome"})
	debited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "accounts", Name: "debited_credits_total",
		Help: "Credits taken from balances by new debits, by ledger kind.",
	}, []string{"kind"})
	refunds := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "accounts", Name: "refunds_total",
		Help: "Refunds by outcome: refunded, replayed, nothing_to_refund, error.",
	}, []string{"outcome"})
	paths := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "accounts", Name: "debit_batches_total",
		Help: "Debit batches by how they were decided: optimistic (one round trip, against what the ledger saw of its clients), fallback (an optimistic attempt that wrote nothing, then locked), locked (locked, read and written: two round trips).",
	}, []string{"path"})
	m := &Metrics{
		debits: map[money.Kind]map[string]prometheus.Counter{}, debited: map[money.Kind]prometheus.Counter{},
		refunds: map[string]prometheus.Counter{}, paths: map[string]prometheus.Counter{},
		refunded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "accounts", Name: "refunded_credits_total",
			Help: "Credits given back to balances by refunds.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "mnv", Subsystem: "accounts", Name: "debit_batch_size",
			Help:    "Debits committed together in one transaction (group commit per client).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
	}
	for _, k := range chargedKinds {
		m.debits[k] = map[string]prometheus.Counter{}
		for _, o := range debitOutcomes {
			m.debits[k][o] = debits.WithLabelValues(string(k), o)
		}
		m.debited[k] = debited.WithLabelValues(string(k))
	}
	for _, o := range refundOutcomes {
		m.refunds[o] = refunds.WithLabelValues(o)
	}
	for _, p := range batchPaths {
		m.paths[p] = paths.WithLabelValues(p)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{debits, debited, refunds, m.refunded, m.batch, paths} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// debitOutcome names the outcome of a debit.
func debitOutcome(res DebitResult, err error) string {
	switch {
	case err == nil && res.Replayed:
		return OutcomeReplayed
	case err == nil:
		return OutcomeCharged
	case errors.Is(err, money.ErrInsufficientBalance):
		return OutcomeInsufficientBalance
	case errors.Is(err, money.ErrBalanceExpired):
		return OutcomeBalanceExpired
	case errors.Is(err, fault.ErrSuspended):
		return OutcomeSuspended
	case errors.Is(err, domain.ErrReferenceConflict):
		return OutcomeConflict
	}
	return OutcomeError
}

// debit counts one decided debit of kind.
func (m *Metrics) debit(kind money.Kind, res DebitResult, err error) {
	if m == nil {
		return
	}
	byOutcome, ok := m.debits[kind]
	if !ok {
		return
	}
	o := debitOutcome(res, err)
	byOutcome[o].Inc()
	if o == OutcomeCharged {
		m.debited[kind].Add(float64(res.Charged))
	}
}

// batchSize observes the size of a committed batch.
func (m *Metrics) batchSize(n int) {
	if m != nil {
		m.batch.Observe(float64(n))
	}
}

// batchPath counts a decided batch by its path.
func (m *Metrics) batchPath(path string) {
	if m != nil {
		m.paths[path].Inc()
	}
}

// refund counts one refund.
func (m *Metrics) refund(res RefundResult, err error) {
	if m == nil {
		return
	}
	switch {
	case err == nil && res.Replayed:
		m.refunds[OutcomeReplayed].Inc()
	case err == nil:
		m.refunds[OutcomeRefunded].Inc()
		m.refunded.Add(float64(res.Refunded))
	case errors.Is(err, money.ErrNothingToRefund):
		m.refunds[OutcomeNothingToRefund].Inc()
	default:
		m.refunds[OutcomeError].Inc()
	}
}
