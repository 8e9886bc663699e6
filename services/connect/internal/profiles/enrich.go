package profiles

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// EnrichmentStore is what enrichments need of the service's storage, besides the profiles.
// Every method but EnrichmentByRequestKey and ReleaseRequestKey runs in a transaction.
type EnrichmentStore interface {
	// LockProfile reads a client's profile and locks it until the transaction ends.
	LockProfile(ctx context.Context, clientID, id string) (domain.Profile, error)
	// InsertEnrichment records a PENDING enrichment under requestKey (nil: none); a key held
	// by another record is domain.ErrEnrichmentInFlight.
	InsertEnrichment(ctx context.Context, r domain.EnrichmentRecord, requestKey []byte) (domain.EnrichmentRecord, error)
	// EnrichmentByRequestKey reads the record a request key is held by (fault.ErrNotFound:
	// none), without locking it.
	EnrichmentByRequestKey(ctx context.Context, clientID string, requestKey []byte) (domain.EnrichmentRecord, error)
	// ReleaseRequestKey forgets a record's request key.
	ReleaseRequestKey(ctx context.Context, id string) error
	// LockEnrichment reads a record and locks it until the transaction ends.
	LockEnrichment(ctx context.Context, id string) (domain.EnrichmentRecord, error)
	// FinishEnrichment moves a PENDING record to status with the amount charged; keepKey keeps
	// its request key.
	FinishEnrichment(ctx context.Context, id, status string, charged int64, keepKey bool) error
	// SetEnrichment writes a profile's enrichment.
	SetEnrichment(ctx context.Context, clientID, id string, e domain.Enrichment) (domain.Profile, error)
	// StaleEnrichments locks up to limit records PENDING since before, oldest first, skipping
	// those locked elsewhere.
	StaleEnrichments(ctx context.Context, before time.Time, limit int) ([]domain.EnrichmentRecord, error)
	// Savepoint runs fn in a savepoint: when fn fails, what it wrote is undone and the
	// transaction goes on.
	Savepoint(ctx context.Context, fn func(ctx context.Context) error) error
}

// reasonRule bounds an enrichment's reason (contract 8). The reason is neither stored nor
// shown, and has never been held to more than its length.
var reasonRule = freetext.Rule{Min: 3, Max: 500, Controls: true}

// chargeTimeout bounds a debit or refund of an enrichment, during which its transaction holds
// the record and the profile.
const chargeTimeout = 10 * time.Second

// settler is who settles a record, which decides what an erased profile and a settled record
// mean.
type settler int

const (
	// byNewRequest: the request that recorded it, before any debit of it was asked for.
	byNewRequest settler = iota
	// byRetry: a retry of that request (the same credential, Idempotency-Key and profile); an
	// earlier attempt may have charged it.
	byRetry
	// byReconciler: nobody waits for the answer; an earlier attempt may have charged it.
	byReconciler
)

// Enrich fills a profile's enrichment from the phone-number library and the client's
// verifications, and charges CONNECT_ENRICHMENT for it, the way a verification is charged: the
// enrichment is recorded (PENDING) first, then debited under the record's own reference while
// the record and the profile are locked (an erasure waits), and written with the record SETTLED
// in the same transaction. Nothing is charged unless the enrichment is written: a refused debit
// marks the record REJECTED, an erased profile CANCELLED. When the debit's outcome is unknown
// (accounts away) the record stays PENDING: a retry of the request (same Idempotency-Key)
// resumes it, and otherwise the reconciler settles it; accounts charges the reference once.
func (s *Service) Enrich(ctx context.Context, p principal.Principal, id, reason string) (domain.Profile, error) {
	if err := reasonRule.Check("reason", reason); err != nil {
		return domain.Profile{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Profile{}, fault.ErrNotFound
	}
	rec, resumed, err := s.recordEnrichment(ctx, p, id)
	if err != nil {
		return domain.Profile{}, err
	}
	// The charge completes even if the caller goes away: the record exists already.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), chargeTimeout+5*time.Second)
	defer cancel()
	by := byNewRequest
	if resumed {
		by = byRetry
	}
	var res settled
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		cur, err := st.LockEnrichment(ctx, rec.ID)
		if err != nil {
			return err
		}
		res, err = s.answer(ctx, st, cur, by)
		return err
	})
	if err != nil {
		return domain.Profile{}, err
	}
	return res.profile, res.outcome
}

// settled is what became of a record: its enrichment written onto profile, or outcome, the
// answer of a record settled otherwise (a refusal: REJECTED; fault.ErrNotFound: CANCELLED, or
// the profile erased).
type settled struct {
	profile domain.Profile
	outcome error
}

// requestKey names a request across its retries: the credential that sent it, its
// Idempotency-Key and the profile. nil when the request has no key.
func (s *Service) requestKey(ctx context.Context, p principal.Principal, profileID string) []byte {
	key, ok := s.requests.Key(ctx)
	if !ok {
		return nil
	}
	h := sha256.New()
	for _, part := range []string{p.KeyID, p.SDKTokenID, key, profileID} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// recordEnrichment is an enrichment's first transaction: the profile must be the client's, and
// the enrichment is recorded PENDING; unless the request is a retry whose record is still
// PENDING, or was settled by the reconciler while the request was away (within the
// idempotency window), which it returns with resumed set.
func (s *Service) recordEnrichment(ctx context.Context, p principal.Principal, id string) (rec domain.EnrichmentRecord, resumed bool, err error) {
	key := s.requestKey(ctx, p, id)
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if _, err := st.GetProfile(ctx, p.ClientID, id); err != nil {
			return err
		}
		if key != nil {
			prev, err := st.EnrichmentByRequestKey(ctx, p.ClientID, key)
			switch {
			case errors.Is(err, fault.ErrNotFound):
			case err != nil:
				return err
			case prev.Status == domain.EnrichmentPending ||
				prev.Status == domain.EnrichmentSettled && s.now().Sub(prev.CreatedAt) < s.requests.Retention():
				rec, resumed = prev, true
				return nil
			default:
				// The key's earlier request is long answered: this one is new.
				if err := st.ReleaseRequestKey(ctx, prev.ID); err != nil {
					return err
				}
			}
		}
		var err error
		rec, err = st.InsertEnrichment(ctx, domain.EnrichmentRecord{ID: uuid.NewString(), ClientID: p.ClientID, ProfileID: id}, key)
		return err
	})
	return rec, resumed, err
}

// answer settles a record whose lock st's transaction holds, or reads how it was settled. An
// error means nothing may be committed: the record stays PENDING.
func (s *Service) answer(ctx context.Context, st Store, rec domain.EnrichmentRecord, by settler) (settled, error) {
	switch rec.Status {
	case domain.EnrichmentPending:
		return s.settle(ctx, st, rec, by)
	case domain.EnrichmentSettled:
		// Settled by the reconciler while its request was away: this retry hears it, charged once.
		if err := st.ReleaseRequestKey(ctx, rec.ID); err != nil {
			return settled{}, err
		}
		prof, err := st.GetProfile(ctx, rec.ClientID, rec.ProfileID)
		if errors.Is(err, fault.ErrNotFound) {
			return settled{outcome: err}, nil // erased since
		}
		return settled{profile: prof}, err
	case domain.EnrichmentCancelled:
		return settled{outcome: fault.ErrNotFound}, nil
	}
	// REJECTED by the reconciler between this retry's two transactions: nothing was charged, and
	// the retry's retry records a new attempt.
	return settled{}, fmt.Errorf("%w: the enrichment was refused meanwhile, try again", fault.ErrUnavailable)
}

// settle charges a PENDING record whose lock st's transaction holds and writes its
// enrichment, while the profile is locked too: an erasure waits until the enrichment is
// written or given up.
func (s *Service) settle(ctx context.Context, st Store, rec domain.EnrichmentRecord, by settler) (settled, error) {
	prof, err := st.LockProfile(ctx, rec.ClientID, rec.ProfileID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		return settled{outcome: fault.ErrNotFound}, s.cancel(ctx, st, rec, by)
	case err != nil:
		return settled{}, err
	}
	// Worked out before charging: a number that does not open must not cost an enrichment.
	number, err := OpenNumber(s.vault, prof)
	if err != nil {
		return settled{}, err
	}
	e, err := s.enrichment(ctx, st, prof, number)
	if err != nil {
		return settled{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
	charge, err := s.ledger.Debit(cctx, money.Charge{ClientID: rec.ClientID, Kind: money.KindConnectEnrichment, Reference: rec.Reference()})
	cancel()
	switch {
	case errors.Is(err, fault.ErrUnavailable):
		return settled{}, err
	case err != nil: // refused: nothing was charged
		return settled{outcome: err}, st.FinishEnrichment(ctx, rec.ID, domain.EnrichmentRejected, 0, false)
	}
	out, err := st.SetEnrichment(ctx, rec.ClientID, rec.ProfileID, e)
	if err != nil {
		return settled{}, err
	}
	if _, err := st.EnqueueForTrigger(ctx, rec.ClientID, domain.TriggerProfileEnriched, []string{rec.ProfileID}); err != nil {
		return settled{}, err
	}
	return settled{profile: out}, st.FinishEnrichment(ctx, rec.ID, domain.EnrichmentSettled, charge.Amount, by == byReconciler)
}

// cancel settles a record whose profile was erased before it was written.
func (s *Service) cancel(ctx context.Context, st Store, rec domain.EnrichmentRecord, by settler) error {
	switch by {
	case byRetry:
		// An earlier attempt's debit may still be on its way to accounts, so a refund now could
		// find nothing and miss it: the reconciler, later, refunds and cancels.
		return nil
	case byReconciler:
		cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
		desc := "enrichment of an erased profile"
		_, err := s.ledger.Refund(cctx, money.Refund{ClientID: rec.ClientID, Reference: rec.Reference(), Description: &desc})
		cancel()
		if err != nil && !errors.Is(err, money.ErrNothingToRefund) {
			return fmt.Errorf("refund %s: %w", rec.Reference(), err) // wraps fault.ErrUnavailable
		}
	}
	return st.FinishEnrichment(ctx, rec.ID, domain.EnrichmentCancelled, 0, false)
}

// reconcileBatch bounds how many records one transaction of the reconciler settles.
const reconcileBatch = 100

// ReconcileEnrichments settles enrichments left PENDING for longer than after (accounts was
// away, a process died between debit and commit) every every, until ctx ends. Replicas share
// the work (SKIP LOCKED).
func (s *Service) ReconcileEnrichments(ctx context.Context, every, after time.Duration, log *zap.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.ReconcileEnrichmentsOnce(ctx, after, log); err != nil && ctx.Err() == nil {
				log.Warn("reconcile pending enrichments", zap.Error(err))
			} else if n > 0 {
				log.Info("settled pending enrichments", zap.Int("count", n))
			}
		}
	}
}

// ReconcileEnrichmentsOnce settles one batch of enrichments PENDING for longer than after:
// the same reference is debited again (accounts answers a charge it made with that charge) and
// the enrichment written; one whose profile was erased is refunded and CANCELLED. It returns
// how many records it settled.
func (s *Service) ReconcileEnrichmentsOnce(ctx context.Context, after time.Duration, log *zap.Logger) (int, error) {
	n := 0
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		pending, err := st.StaleEnrichments(ctx, s.now().Add(-after), reconcileBatch)
		if err != nil {
			return err
		}
		for _, rec := range pending {
			// A savepoint per record: one that cannot settle (its number does not open, accounts
			// refuses its refund) stays PENDING without holding up the others.
			err := st.Savepoint(ctx, func(ctx context.Context) error {
				_, err := s.settle(ctx, st, rec, byReconciler)
				return err
			})
			switch {
			case err == nil:
				n++
			case money.Away(err):
				return nil // accounts is away: keep what is settled, try the rest next round
			default:
				log.Warn("enrichment not settled", zap.String("enrichment", rec.ID), zap.Error(err))
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("reconcile enrichments: %w", err)
	}
	return n, nil
}
