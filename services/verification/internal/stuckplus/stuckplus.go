// Package stuckplus keeps the numbers captured by STUCK_PLUS browser flows (sealed at rest) and
// reveals them to an ADMIN key with a reason: every reveal is audited; the first reveal of a
// session is charged (and repeats too, when configured).
package stuckplus

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/charge"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// reasonRule bounds a reveal's reason (docs/api-decisions.md#stuck-plus), which is kept in the
// audit and may run over several lines.
var reasonRule = freetext.Rule{Min: 10, Max: 500, Newlines: true}

// Store is what stuck-plus needs of the service's storage.
type Store interface {
	ListStuckPlusSessions(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.StuckPlusSession], error)
	// LockStuckPlusSession reads a session and holds it until the transaction ends.
	LockStuckPlusSession(ctx context.Context, clientID, id string) (domain.StuckPlusSession, error)
	// CountReveals counts a session's reveals, refused ones aside.
	CountReveals(ctx context.Context, clientID, sessionID string) (int, error)
	// OpenReveals reads the session's reveals that are PENDING or unheard.
	OpenReveals(ctx context.Context, clientID, sessionID string) ([]domain.Reveal, error)
	// HearReveal marks a client's unheard reveal heard.
	HearReveal(ctx context.Context, clientID, id string) error
	// RecordReveal writes a reveal as its Status says: PENDING (its charge to come) or SETTLED.
	RecordReveal(ctx context.Context, r domain.Reveal) (domain.Reveal, error)
	// SettleReveal records a client's PENDING reveal's charge (and its session revealed),
	// unheard when its request is not there to hear it, and answers the reveal's status after
	// it: SETTLED, or REJECTED when it was refused before.
	SettleReveal(ctx context.Context, clientID, id string, charged int64, unheard bool) (status domain.RevealStatus, err error)
	// RejectReveal marks a client's PENDING reveal REJECTED; false when it was no longer
	// PENDING.
	RejectReveal(ctx context.Context, clientID, id string) (bool, error)
	// StaleReveals reads up to limit reveals PENDING since before, of any client, that no
	// other transaction holds, and holds them until the transaction ends.
	StaleReveals(ctx context.Context, before time.Time, limit int) ([]domain.Reveal, error)
	ListReveals(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Reveal], error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// KeepStore is what keeping a captured number needs: the browser capture's transaction.
type KeepStore interface {
	InsertStuckPlusSession(ctx context.Context, s domain.StuckPlusSession, hash []byte) error
	// Emit writes events in the transaction (refused outside one).
	Emit(ctx context.Context, evs ...events.Event) error
}

// Service keeps and reveals stuck-plus numbers.
type Service struct {
	st     Store
	tx     Tx
	vault  *phone.Vault
	ledger money.Ledger
	// chargeRepeats charges every reveal, not only a session's first.
	chargeRepeats bool
}

// New returns a Service.
func New(st Store, tx Tx, vault *phone.Vault, ledger money.Ledger, chargeRepeats bool) *Service {
	return &Service{st: st, tx: tx, vault: vault, ledger: ledger, chargeRepeats: chargeRepeats}
}

// Keep stores the number a STUCK_PLUS browser flow t captured through operatorID, sealed, as a
// new session of t's client, with its stuck_plus.captured event, through st (the capture's
// transaction), and returns its id.
func (s *Service) Keep(ctx context.Context, st KeepStore, t domain.Transaction, operatorID string, number phone.Number) (string, error) {
	sp := domain.StuckPlusSession{
		ID: uuid.NewString(), ClientID: t.ClientID, TransactionID: t.ID, MetadataID: t.MetadataID,
		OperatorID: operatorID, NumberMasked: number.Masked(),
	}
	sp.NumberSealed = s.vault.Seal(number.E164, "stuck_plus_sessions", sp.ID)
	if err := st.InsertStuckPlusSession(ctx, sp, s.vault.Hash(number.E164)); err != nil {
		return "", err
	}
	ev, err := events.New(t.ClientID, events.StuckPlusCaptured, events.StuckPlusCapturedData{
		SessionID: sp.ID, MobileNumber: sp.NumberMasked, OperatorCode: operatorID,
	}, time.Now())
	if err != nil {
		return "", err
	}
	if err := st.Emit(ctx, ev); err != nil {
		return "", err
	}
	return sp.ID, nil
}

// List reads a page of the client's stuck-plus sessions (numbers masked).
func (s *Service) List(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.StuckPlusSession], error) {
	return s.st.ListStuckPlusSessions(ctx, clientID, limit, offset)
}

// Revealed is a reveal's answer.
type Revealed struct {
	Reveal       domain.Reveal
	MobileNumber string
}

// Reveal decrypts a session's number for the ADMIN key of p, charging per configuration and
// writing the audit row. Reveals of one session are serialised by its row lock while they are
// recorded, so exactly one is the first, and every reveal's debit reference is fixed by the
// reveals recorded before it: the session's own for the first, the session's and their count
// for a repeat.
//
// A charged reveal goes through the charge saga: recorded PENDING under its reference (the lock
// released with that commit), debited, then SETTLED, or REJECTED when refused (no audit, no
// number). When accounts' answer is lost the reveal stays PENDING: a retry by the same key
// resumes it under the same reference, and accounts answers the charge it made; the
// reconciler finishes one nobody retried, unheard, and the same key's next reveal of the
// session is answered with it. Each audited reveal is charged once.
func (s *Service) Reveal(ctx context.Context, p principal.Principal, sessionID, reason string) (Revealed, error) {
	if p.Role != principal.RoleAdmin {
		return Revealed{}, domain.ErrNotAdmin
	}
	if err := reasonRule.Check("reason", reason); err != nil {
		return Revealed{}, err
	}
	if _, err := uuid.Parse(sessionID); err != nil {
		return Revealed{}, fault.ErrNotFound
	}
	var (
		r      domain.Reveal
		number string
	)
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		sess, err := st.LockStuckPlusSession(ctx, p.ClientID, sessionID)
		if err != nil {
			return err
		}
		// Open before charging: a number that does not open must not cost a reveal.
		if number, err = s.vault.Open(sess.NumberSealed, "stuck_plus_sessions", sess.ID); err != nil {
			return err
		}
		open, err := st.OpenReveals(ctx, p.ClientID, sess.ID)
		if err != nil {
			return err
		}
		for _, prev := range open {
			switch {
			case sameRevealer(prev, p) && prev.Status == domain.RevealPending:
				r = prev // a retry of a reveal whose charge did not settle: resume it
				return nil
			case sameRevealer(prev, p):
				// Settled by the reconciler while its request was away: this retry hears it,
				// charged once.
				r, r.Unheard = prev, false
				return st.HearReveal(ctx, prev.ClientID, prev.ID)
			case prev.Status == domain.RevealPending:
				// Its reference is the one this reveal would take; the audit names who revealed.
				return errRevealInFlight
			}
		}
		r = domain.Reveal{ID: uuid.NewString(), ClientID: p.ClientID, SessionID: sess.ID, KeyID: p.KeyID, PersonID: p.UserID, Reason: reason,
			Status: domain.RevealSettled}
		if first := sess.RevealedAt == nil; first || s.chargeRepeats {
			r.Status, r.Reference = domain.RevealPending, "stuck-plus-reveal:"+sess.ID
			if !first {
				n, err := st.CountReveals(ctx, p.ClientID, sess.ID)
				if err != nil {
					return err
				}
				r.Reference += ":" + strconv.Itoa(n)
			}
		}
		r, err = st.RecordReveal(ctx, r)
		return err
	})
	if err != nil {
		return Revealed{}, err
	}
	if r.Status == domain.RevealPending {
		// The charge completes even if the caller goes away: the reveal is recorded already.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), chargeTimeout)
		defer cancel()
		out, c, err := charge.Saga[domain.Reveal]{Ledger: s.ledger}.Complete(cctx, books{inTx: s.tx.InTx}, intent(r))
		if out != charge.Settled {
			return Revealed{}, err
		}
		r.Status, r.Charged = domain.RevealSettled, c.Amount
	}
	return Revealed{Reveal: r, MobileNumber: number}, nil
}

// errRevealInFlight: another key's reveal of the session is being charged.
var errRevealInFlight = fmt.Errorf("%w: another reveal of this session is being charged, try again shortly", fault.ErrUnavailable)

// chargeTimeout bounds a reveal's debit and settle.
const chargeTimeout = 15 * time.Second

// intent is a PENDING reveal's charge.
func intent(r domain.Reveal) charge.Intent[domain.Reveal] {
	return charge.Intent[domain.Reveal]{Record: r, Charge: money.Charge{ClientID: r.ClientID, Kind: money.KindStuckPlusReveal, Reference: r.Reference}}
}

// books writes a reveal charge's outcome (charge.Books): each in a short transaction of its
// own, or in the reconciler's.
type books struct {
	inTx func(ctx context.Context, fn func(ctx context.Context, st Store) error) error
	// unheard: the reconciler's; the reveal's request is not there to hear it.
	unheard bool
}

// Settle records the charge on the reveal. One refused meanwhile (the reconciler's debit, before
// a top-up) cannot take it: Void, and the saga refunds it.
func (b books) Settle(ctx context.Context, r domain.Reveal, c money.Charged) error {
	return b.inTx(ctx, func(ctx context.Context, st Store) error {
		status, err := st.SettleReveal(ctx, r.ClientID, r.ID, c.Amount, b.unheard)
		if err == nil && status != domain.RevealSettled {
			return charge.Void(fmt.Errorf("%w: the reveal was refused meanwhile, try again", fault.ErrUnavailable), "reveal refused meanwhile")
		}
		return err
	})
}

// Reject marks the reveal REJECTED: it is no reveal, and out of the audit.
func (b books) Reject(ctx context.Context, r domain.Reveal, _ error) error {
	return b.inTx(ctx, func(ctx context.Context, st Store) error {
		_, err := st.RejectReveal(ctx, r.ClientID, r.ID)
		return err
	})
}

// Void leaves a refunded reveal REJECTED.
func (b books) Void(ctx context.Context, r domain.Reveal) error { return b.Reject(ctx, r, nil) }

// claims is the reconciler's port (charge.Claims).
type claims struct{ tx Tx }

func (c claims) Claim(ctx context.Context, before time.Time, limit int,
	fn func(ctx context.Context, stale []charge.Intent[domain.Reveal], b charge.Books[domain.Reveal]) error) error {
	return c.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		rs, err := st.StaleReveals(ctx, before, limit)
		if err != nil {
			return err
		}
		in := make([]charge.Intent[domain.Reveal], len(rs))
		for i, r := range rs {
			in[i] = intent(r)
		}
		return fn(ctx, in, books{unheard: true, inTx: func(ctx context.Context, fn func(ctx context.Context, st Store) error) error { return fn(ctx, st) }})
	})
}

// Reconciler finishes reveals left PENDING for longer than after (accounts away, a process
// died between record and settle) under the same reference. Replicas share the work (SKIP LOCKED).
func (s *Service) Reconciler(after time.Duration, log *zap.Logger) *charge.Reconciler[domain.Reveal] {
	return &charge.Reconciler[domain.Reveal]{What: "reveals", Ledger: s.ledger, Claims: claims{s.tx}, After: after, Log: log}
}

// ListReveals reads a page of the client's reveal audit.
func (s *Service) ListReveals(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Reveal], error) {
	return s.st.ListReveals(ctx, clientID, limit, offset)
}

// sameRevealer reports whether reveal r was made by the caller p: the same API key, or the same
// person (whichever session they use now).
func sameRevealer(r domain.Reveal, p principal.Principal) bool {
	if p.Kind() == principal.Session {
		return r.PersonID != "" && r.PersonID == p.UserID
	}
	return r.KeyID != "" && r.KeyID == p.KeyID
}
