// Package stuckplus keeps the numbers captured by STUCK_PLUS browser flows and reveals them to
// an ADMIN key with a reason: every reveal is audited; the first reveal of a session is
// charged (and repeats too, when configured).
package stuckplus

import (
	"context"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// reasonRule bounds a reveal's reason (interface spec 4.11), which is kept in the audit and may
// run over several lines.
var reasonRule = freetext.Rule{Min: 10, Max: 500, Newlines: true}

// Service keeps and reveals stuck-plus numbers.
type Service struct {
	pool   *pgxpool.Pool
	vault  *phone.Vault
	ledger money.Ledger
	// chargeRepeats charges every reveal, not only a session's first.
	chargeRepeats bool
}

// New returns a Service.
func New(pool *pgxpool.Pool, vault *phone.Vault, ledger money.Ledger, chargeRepeats bool) *Service {
	return &Service{pool: pool, vault: vault, ledger: ledger, chargeRepeats: chargeRepeats}
}

// List reads a page of the client's stuck-plus sessions (numbers masked).
func (s *Service) List(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.StuckPlusSession], error) {
	return store.ListStuckPlusSessions(ctx, s.pool, clientID, limit, offset)
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
func (s *Service) Reveal(ctx context.Context, p identity.Principal, sessionID, reason string) (Revealed, error) {
	if err := reasonRule.Check("reason", reason); err != nil {
		return Revealed{}, err
	}
	if _, err := uuid.Parse(sessionID); err != nil {
		return Revealed{}, fault.ErrNotFound
	}
	var out Revealed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sess, err := store.LockStuckPlusSession(ctx, tx, p.ClientID, sessionID)
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
				n, err := store.CountReveals(ctx, tx, p.ClientID, sess.ID)
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
		if r, err = store.RecordReveal(ctx, tx, r); err != nil {
			return err
		}
		out = Revealed{Reveal: r, MobileNumber: number}
		return nil
	})
	return out, err
}

// ListReveals reads a page of the client's reveal audit.
func (s *Service) ListReveals(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Reveal], error) {
	return store.ListReveals(ctx, s.pool, clientID, limit, offset)
}
