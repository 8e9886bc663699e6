// Package stuckplus keeps the numbers captured by STUCK_PLUS browser flows (sealed at rest) and
// reveals them to an ADMIN key with a reason: every reveal is audited; the first reveal of a
// session is charged (and repeats too, when configured).
package stuckplus

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// reasonRule bounds a reveal's reason (interface spec 4.11), which is kept in the audit and may
// run over several lines.
var reasonRule = freetext.Rule{Min: 10, Max: 500, Newlines: true}

// Store is what stuck-plus needs of the service's storage.
type Store interface {
	ListStuckPlusSessions(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.StuckPlusSession], error)
	// LockStuckPlusSession reads a session and holds it until the transaction ends.
	LockStuckPlusSession(ctx context.Context, clientID, id string) (domain.StuckPlusSession, error)
	CountReveals(ctx context.Context, clientID, sessionID string) (int, error)
	RecordReveal(ctx context.Context, r domain.Reveal) (domain.Reveal, error)
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
// writing the audit row. Reveals of one session are serialised by its row lock, so exactly one
// is the first, and every reveal's debit reference is fixed by the reveals recorded before it:
// the session's own for the first, the session's and their count for a repeat. A reveal whose
// debit committed but whose transaction did not (its caller gave up, a crash) is retried under
// the same reference, and accounts answers the charge it made: each audited reveal is charged
// once, whatever the balance is by then.
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
	var out Revealed
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		sess, err := st.LockStuckPlusSession(ctx, p.ClientID, sessionID)
		if err != nil {
			return err
		}
		// Open before charging: a number that does not open must not cost a reveal.
		number, err := s.vault.Open(sess.NumberSealed, "stuck_plus_sessions", sess.ID)
		if err != nil {
			return err
		}
		r := domain.Reveal{ID: uuid.NewString(), ClientID: p.ClientID, SessionID: sess.ID, KeyID: p.KeyID, Reason: reason}
		if first := sess.RevealedAt == nil; first || s.chargeRepeats {
			ref := "stuck-plus-reveal:" + sess.ID
			if !first {
				n, err := st.CountReveals(ctx, p.ClientID, sess.ID)
				if err != nil {
					return err
				}
				ref += ":" + strconv.Itoa(n)
			}
			charge, err := s.ledger.Debit(ctx, money.Charge{ClientID: p.ClientID, Kind: money.KindStuckPlusReveal, Reference: ref})
			if err != nil {
				return err
			}
			r.Charged = charge.Amount
		}
		if r, err = st.RecordReveal(ctx, r); err != nil {
			return err
		}
		out = Revealed{Reveal: r, MobileNumber: number}
		return nil
	})
	return out, err
}

// ListReveals reads a page of the client's reveal audit.
func (s *Service) ListReveals(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Reveal], error) {
	return s.st.ListReveals(ctx, clientID, limit, offset)
}
