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
	"github.com/mnvhq/mnv/services/platform/charge"
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
	ReleaseRequestKey(ctx context.Context, clientID, id string) error
	// LockEnrichment reads a client's record and locks it until the transaction ends.
	LockEnrichment(ctx context.Context, clientID, id string) (domain.EnrichmentRecord, error)
	// FinishEnrichment moves a PENDING record to status with the amount charged; keepKey keeps
	// its request key.
	FinishEnrichment(ctx context.Context, clientID, id string, status domain.EnrichmentStatus, charged int64, keepKey bool) error
	// SetEnrichment writes a profile's enrichment.
	SetEnrichment(ctx context.Context, clientID, id string, e domain.Enrichment) (domain.Profile, error)
	// StaleEnrichments locks up to limit records PENDING since before, oldest first, skipping
	// those locked elsewhere; never across clients, each record with its own.
	StaleEnrichments(ctx context.Context, before time.Time, limit int) ([]domain.EnrichmentRecord, error)
	// Savepoint runs fn in a savepoint: when fn fails, what it wrote is undone and the
	// transaction goes on.
	Savepoint(ctx context.Context, fn func(ctx context.Context) error) error
}

// reasonRule bounds an enrichment's reason (docs/api-decisions.md#enrichment). The reason is
// neither stored nor shown, and has never been held to more than its length.
var reasonRule = freetext.Rule{Min: 3, Max: 500, Controls: true}

// chargeTimeout bounds a debit or refund of an enrichment.
const chargeTimeout = 10 * time.Second

// Enrich fills a profile's enrichment from the phone-number library and the client's
// verifications, and charges CONNECT_ENRICHMENT for it through the charge saga, the way a
// verification is charged: the enrichment is recorded (PENDING) and committed first, then
// debited under the record's own reference outside any transaction, and written with the record
// SETTLED in a short transaction that locks the record and the profile. Nothing is kept charged
// unless the enrichment is written: a refused debit marks the record REJECTED; a profile erased
// before the enrichment is written gets its charge refunded and the record CANCELLED. When the
// debit's outcome is unknown (accounts away) the record stays PENDING: a retry of the request
// (same Idempotency-Key) resumes it, and otherwise the reconciler settles it; accounts charges
// the reference once.
func (s *Service) Enrich(ctx context.Context, p principal.Principal, id, reason string) (domain.Profile, error) {
	if err := reasonRule.Check("reason", reason); err != nil {
		return domain.Profile{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Profile{}, fault.ErrNotFound
	}
	rec, err := s.recordEnrichment(ctx, p, id)
	if err != nil {
		return domain.Profile{}, err
	}
	// The charge completes even if the caller goes away: the record exists already.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), chargeTimeout+5*time.Second)
	defer cancel()
	if rec.Status == domain.EnrichmentPending {
		b := &books{s: s, in: s.lockedRecord}
		out, _, err := charge.Saga[domain.EnrichmentRecord]{Ledger: s.ledger, DebitTimeout: chargeTimeout}.Complete(ctx, b, intent(rec))
		switch {
		case out == charge.Settled && b.wrote != nil:
			return *b.wrote, nil
		case out != charge.Settled:
			return domain.Profile{}, err
		}
		// Settled by the reconciler meanwhile: answered below, as a retry is.
	}
	var res settled
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		cur, err := st.LockEnrichment(ctx, rec.ClientID, rec.ID)
		if err != nil {
			return err
		}
		res, err = s.answer(ctx, st, cur)
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
	for _, part := range []string{p.KeyID, p.SDKTokenID, key, profileID, p.SessionID} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// recordEnrichment is an enrichment's first transaction: the profile must be the client's and
// its number must open (a number that does not must not cost an enrichment), and the enrichment
// is recorded PENDING (CANCELLED when an erasure came first); unless the request is a retry whose record is still PENDING, or was
// settled by the reconciler while the request was away (within the idempotency window), which
// it returns.
func (s *Service) recordEnrichment(ctx context.Context, p principal.Principal, id string) (rec domain.EnrichmentRecord, err error) {
	key := s.requestKey(ctx, p, id)
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		prof, err := st.GetProfile(ctx, p.ClientID, id)
		if err != nil {
			return err
		}
		if _, err := OpenNumber(s.vault, prof); err != nil {
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
				rec = prev
				return nil
			default:
				// The key's earlier request is long answered: this one is new.
				if err := st.ReleaseRequestKey(ctx, prev.ClientID, prev.ID); err != nil {
					return err
				}
			}
		}
		if rec, err = st.InsertEnrichment(ctx, domain.EnrichmentRecord{ID: uuid.NewString(), ClientID: p.ClientID, ProfileID: id}, key); err != nil {
			return err
		}
		// An erasure already in flight goes first: this waits for it behind the profile's row
		// before anything is charged (instead of a charge and its refund), and the record says
		// the enrichment lost. The lock ends with this transaction, before the debit.
		switch _, err := st.LockProfile(ctx, p.ClientID, id); {
		case errors.Is(err, fault.ErrNotFound):
			rec.Status = domain.EnrichmentCancelled
			return st.FinishEnrichment(ctx, rec.ClientID, rec.ID, domain.EnrichmentCancelled, 0, false)
		case err != nil:
			return err
		}
		return nil
	})
	return rec, err
}

// answer reads how a record whose lock st's transaction holds was settled.
func (s *Service) answer(ctx context.Context, st Store, rec domain.EnrichmentRecord) (settled, error) {
	switch rec.Status {
	case domain.EnrichmentSettled:
		// Settled by the reconciler while its request was away: this retry hears it, charged once.
		if err := st.ReleaseRequestKey(ctx, rec.ClientID, rec.ID); err != nil {
			return settled{}, err
		}
		prof, err := st.GetProfile(ctx, rec.ClientID, rec.ProfileID)
		if errors.Is(err, fault.ErrNotFound) {
			return settled{outcome: err}, nil // erased since
		}
		return settled{profile: prof}, err
	case domain.EnrichmentCancelled:
		return settled{outcome: fault.ErrNotFound}, nil
	case domain.EnrichmentPending:
		return settled{}, fmt.Errorf("%w: the enrichment's charge is not settled yet, try again", fault.ErrUnavailable)
	}
	// REJECTED by the reconciler between this retry's two transactions: nothing was charged, and
	// the retry's retry records a new attempt.
	return settled{}, fmt.Errorf("%w: the enrichment was refused meanwhile, try again", fault.ErrUnavailable)
}

// intent is a PENDING record's charge.
func intent(rec domain.EnrichmentRecord) charge.Intent[domain.EnrichmentRecord] {
	return charge.Intent[domain.EnrichmentRecord]{Record: rec, Charge: money.Charge{
		ClientID: rec.ClientID, Kind: money.KindConnectEnrichment, Reference: rec.Reference()}}
}

// lockedRecord runs fn in a transaction of its own with rec's record locked, as it is now.
func (s *Service) lockedRecord(ctx context.Context, rec domain.EnrichmentRecord, fn func(ctx context.Context, st Store, cur domain.EnrichmentRecord) error) error {
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		cur, err := st.LockEnrichment(ctx, rec.ClientID, rec.ID)
		if err != nil {
			return err
		}
		return fn(ctx, st, cur)
	})
}

// books writes an enrichment charge's outcome (charge.Books, charge.Voider), each step with
// its record locked: in a short transaction of its own (the request), or in a savepoint of the
// reconciler's transaction, which holds the record already.
type books struct {
	s  *Service
	in func(ctx context.Context, rec domain.EnrichmentRecord, fn func(ctx context.Context, st Store, cur domain.EnrichmentRecord) error) error
	// byReconciler keeps a settled record's request key: its request was not there to hear
	// the answer, and a retry of it is answered with this one instead of charged again.
	byReconciler bool
	// wrote is the profile Settle wrote the enrichment onto.
	wrote *domain.Profile
}

// Settle writes the enrichment onto the profile, locked (an erasure waits until it is written),
// with the record SETTLED. A record settled meanwhile is left as it is; one refused meanwhile
// (by the reconciler, before a top-up), a profile erased or a number that no longer opens cannot
// take the charge: Void, and the saga refunds it.
func (b *books) Settle(ctx context.Context, rec domain.EnrichmentRecord, c money.Charged) error {
	return b.in(ctx, rec, func(ctx context.Context, st Store, cur domain.EnrichmentRecord) error {
		switch cur.Status {
		case domain.EnrichmentPending:
		case domain.EnrichmentSettled:
			return nil
		default:
			return charge.Void(fmt.Errorf("%w: the enrichment was refused meanwhile, try again", fault.ErrUnavailable), "enrichment refused meanwhile")
		}
		prof, err := st.LockProfile(ctx, rec.ClientID, rec.ProfileID)
		switch {
		case errors.Is(err, fault.ErrNotFound):
			return charge.Void(fault.ErrNotFound, "enrichment of an erased profile")
		case err != nil:
			return err
		}
		number, err := OpenNumber(b.s.vault, prof)
		if err != nil {
			return charge.Void(err, "enrichment of a number that does not open")
		}
		e, err := b.s.enrichment(ctx, st, prof, number)
		if err != nil {
			return err
		}
		out, err := st.SetEnrichment(ctx, rec.ClientID, rec.ProfileID, e)
		if err != nil {
			return err
		}
		if _, err := st.EnqueueForTrigger(ctx, rec.ClientID, domain.TriggerProfileEnriched, []string{rec.ProfileID}); err != nil {
			return err
		}
		if err := st.FinishEnrichment(ctx, rec.ClientID, rec.ID, domain.EnrichmentSettled, c.Amount, b.byReconciler); err != nil {
			return err
		}
		b.wrote = &out
		return nil
	})
}

// Reject marks a PENDING record REJECTED: nothing was charged or written.
func (b *books) Reject(ctx context.Context, rec domain.EnrichmentRecord, _ error) error {
	return b.finish(ctx, rec, domain.EnrichmentRejected)
}

// Void marks a PENDING record CANCELLED once its charge is refunded.
func (b *books) Void(ctx context.Context, rec domain.EnrichmentRecord) error {
	return b.finish(ctx, rec, domain.EnrichmentCancelled)
}

func (b *books) finish(ctx context.Context, rec domain.EnrichmentRecord, status domain.EnrichmentStatus) error {
	return b.in(ctx, rec, func(ctx context.Context, st Store, cur domain.EnrichmentRecord) error {
		if cur.Status != domain.EnrichmentPending {
			return nil
		}
		return st.FinishEnrichment(ctx, rec.ClientID, rec.ID, status, 0, false)
	})
}

// claims is the reconciler's port (charge.Claims): records PENDING for long, locked SKIP
// LOCKED in one transaction (each by its client: the candidates are read across clients
// without a lock), each settled in a savepoint of it, so one that cannot settle stays PENDING
// without holding up the others.
type claims struct{ s *Service }

func (c claims) Claim(ctx context.Context, before time.Time, limit int,
	fn func(ctx context.Context, stale []charge.Intent[domain.EnrichmentRecord], b charge.Books[domain.EnrichmentRecord]) error) error {
	return c.s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		recs, err := st.StaleEnrichments(ctx, before, limit)
		if err != nil {
			return err
		}
		in := make([]charge.Intent[domain.EnrichmentRecord], len(recs))
		for i, rec := range recs {
			in[i] = intent(rec)
		}
		return fn(ctx, in, &books{s: c.s, byReconciler: true,
			in: func(ctx context.Context, rec domain.EnrichmentRecord, fn func(ctx context.Context, st Store, cur domain.EnrichmentRecord) error) error {
				return st.Savepoint(ctx, func(ctx context.Context) error { return fn(ctx, st, rec) })
			}})
	})
}

// reconciler settles enrichments left PENDING for longer than after.
func (s *Service) reconciler(after time.Duration, log *zap.Logger) *charge.Reconciler[domain.EnrichmentRecord] {
	return &charge.Reconciler[domain.EnrichmentRecord]{What: "enrichments", Ledger: s.ledger, Claims: claims{s}, After: after, Log: log, Now: s.now}
}

// ReconcileEnrichments settles enrichments left PENDING for longer than after (accounts was
// away, a process died between record and settle) every every, until ctx ends. Replicas share
// the work (SKIP LOCKED).
func (s *Service) ReconcileEnrichments(ctx context.Context, every, after time.Duration, log *zap.Logger) {
	s.reconciler(after, log).Run(ctx, every)
}

// ReconcileEnrichmentsOnce settles one batch of enrichments PENDING for longer than after:
// the same reference is debited again (accounts answers a charge it made with that charge) and
// the enrichment written; one whose profile was erased is refunded and CANCELLED. It returns
// how many records it settled.
func (s *Service) ReconcileEnrichmentsOnce(ctx context.Context, after time.Duration, log *zap.Logger) (int, error) {
	return s.reconciler(after, log).Once(ctx)
}
