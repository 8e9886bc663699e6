package stuckplus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// fakeStore keeps stuck-plus sessions and reveals; InTx drops what a failed callback wrote, as
// a rolled-back transaction does.
type fakeStore struct {
	sessions  map[string]*domain.StuckPlusSession
	reveals   []domain.Reveal
	failWrite error // RecordReveal's answer, once
	events    []events.Event
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error {
	n := len(f.reveals)
	err := fn(ctx, f)
	if err != nil {
		f.reveals = f.reveals[:n]
	}
	return err
}

func (f *fakeStore) ListStuckPlusSessions(context.Context, string, int64, int64) (domain.Page[domain.StuckPlusSession], error) {
	return domain.Page[domain.StuckPlusSession]{}, nil
}

func (f *fakeStore) LockStuckPlusSession(_ context.Context, clientID, id string) (domain.StuckPlusSession, error) {
	s, ok := f.sessions[id]
	if !ok || s.ClientID != clientID {
		return domain.StuckPlusSession{}, fault.ErrNotFound
	}
	if s.NumberSealed == nil {
		return *s, domain.ErrNumberNotKept
	}
	return *s, nil
}

func (f *fakeStore) CountReveals(_ context.Context, clientID, sessionID string) (int, error) {
	n := 0
	for _, r := range f.reveals {
		if r.ClientID == clientID && r.SessionID == sessionID && r.Status != domain.RevealRejected {
			n++
		}
	}
	return n, nil
}

func (f *fakeStore) RecordReveal(_ context.Context, r domain.Reveal) (domain.Reveal, error) {
	r.CreatedAt = time.Now()
	f.reveals = append(f.reveals, r)
	if s := f.sessions[r.SessionID]; s.RevealedAt == nil && r.Status == domain.RevealSettled {
		s.RevealedAt = &r.CreatedAt
	}
	return r, nil
}

func (f *fakeStore) OpenReveals(_ context.Context, clientID, sessionID string) ([]domain.Reveal, error) {
	var out []domain.Reveal
	for _, r := range f.reveals {
		if r.ClientID == clientID && r.SessionID == sessionID && (r.Status == domain.RevealPending || r.Unheard) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeStore) HearReveal(_ context.Context, clientID, id string) error {
	for i, r := range f.reveals {
		if r.ClientID == clientID && r.ID == id {
			f.reveals[i].Unheard = false
		}
	}
	return nil
}

// SettleReveal is the write that fails once with failWrite (the settle's transaction does not
// commit).
func (f *fakeStore) SettleReveal(_ context.Context, clientID, id string, charged int64, unheard bool) (domain.RevealStatus, error) {
	if err := f.failWrite; err != nil {
		f.failWrite = nil
		return "", err
	}
	for i, r := range f.reveals {
		if r.ClientID != clientID || r.ID != id {
			continue
		}
		if r.Status == domain.RevealPending {
			f.reveals[i].Status, f.reveals[i].Charged, f.reveals[i].Unheard = domain.RevealSettled, charged, unheard
			if s := f.sessions[r.SessionID]; s.RevealedAt == nil {
				s.RevealedAt = &r.CreatedAt
			}
		}
		return f.reveals[i].Status, nil
	}
	return "", fault.ErrNotFound
}

func (f *fakeStore) RejectReveal(_ context.Context, clientID, id string) (bool, error) {
	for i, r := range f.reveals {
		if r.ClientID == clientID && r.ID == id && r.Status == domain.RevealPending {
			f.reveals[i].Status = domain.RevealRejected
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeStore) StaleReveals(context.Context, time.Time, int) ([]domain.Reveal, error) {
	return nil, errors.New("not used")
}

func (f *fakeStore) ListReveals(context.Context, string, int64, int64) (domain.Page[domain.Reveal], error) {
	return domain.Page[domain.Reveal]{}, nil
}

// fakeLedger charges 7 once per reference (a repeat is that charge), or refuses with err.
type fakeLedger struct {
	err  error
	refs []string
	paid map[string]bool
}

func (l *fakeLedger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.refs = append(l.refs, c.Reference)
	if l.err != nil {
		return money.Charged{}, l.err
	}
	replayed := l.paid[c.Reference]
	l.paid[c.Reference] = true
	return money.Charged{Amount: 7, BalanceAfter: 93, Replayed: replayed}, nil
}

func (l *fakeLedger) Refund(context.Context, money.Refund) (money.Refunded, error) {
	return money.Refunded{}, errors.New("not used")
}

func (l *fakeLedger) Balance(context.Context, string) (int64, error) { return 100, nil }

const number = "+971501234567"

func TestReveal(t *testing.T) {
	const reason = "support ticket 42"
	tests := []struct {
		name          string
		chargeRepeats bool
		role          principal.Role
		reason        string
		ledgerErr     error
		writeErr      error // the first settle's write fails (its transaction does not commit)
		dropped       bool  // the number was dropped after its retention
		reveals       int   // reveals asked
		wantReason    fault.Reason
		wantRefs      []string // debit references, "" for the session's own
		wantCharged   []int64  // of each recorded reveal
	}{
		{"the first reveal is charged, a repeat is not", false, principal.RoleAdmin, reason, nil, nil, false, 2, "", []string{""}, []int64{7, 0}},
		{"repeats charged when configured, each its own reference", true, principal.RoleAdmin, reason, nil, nil, false, 3, "", []string{"", ":1", ":2"}, []int64{7, 7, 7}},
		{"a MEMBER key reveals nothing", false, principal.RoleMember, reason, nil, nil, false, 1, fault.PermissionDenied, nil, nil},
		{"a reason too short", false, principal.RoleAdmin, "too short", nil, nil, false, 1, fault.InvalidArgument, nil, nil},
		{"a reason too long", false, principal.RoleAdmin, strings.Repeat("r", 501), nil, nil, false, 1, fault.InvalidArgument, nil, nil},
		{"a debit refused: no audit", false, principal.RoleAdmin, reason, money.ErrInsufficientBalance, nil, false, 1, fault.InsufficientBalance, []string{""}, nil},
		{"a number no longer kept is not charged", false, principal.RoleAdmin, reason, nil, nil, true, 1, fault.NotFound, nil, nil},
		{"a charge whose reveal did not commit is that reveal's on retry", false, principal.RoleAdmin, reason, nil, errors.New("connection lost"), false, 2, "", []string{"", ""}, []int64{7}},
	}
	vault := verificationtest.NewKeys(t).Vault
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := &fakeStore{sessions: map[string]*domain.StuckPlusSession{}, failWrite: tt.writeErr}
			ledger := &fakeLedger{err: tt.ledgerErr, paid: map[string]bool{}}
			s := New(st, st, vault, ledger, tt.chargeRepeats)
			p := principal.Principal{ClientID: uuid.NewString(), KeyID: uuid.NewString(), Role: tt.role}
			num, err := phone.Parse(number)
			if err != nil {
				t.Fatal(err)
			}
			// Kept as a capture keeps it.
			id, err := s.Keep(ctx, keeper{st}, domain.Transaction{ID: uuid.NewString(), ClientID: p.ClientID, MetadataID: "lead"}, "alpha", num)
			if err != nil {
				t.Fatal(err)
			}
			if sp := st.sessions[id]; sp.NumberMasked != phone.Mask(number) || sp.OperatorID != "alpha" {
				t.Fatalf("kept %+v", sp)
			}
			if len(st.events) != 1 || st.events[0].Type != events.StuckPlusCaptured || st.events[0].ClientID != p.ClientID ||
				string(st.events[0].Data) != `{"sessionId":"`+id+`","mobileNumber":"`+phone.Mask(number)+`","operatorCode":"alpha"}` {
				t.Fatalf("events of the capture %+v, want one stuck_plus.captured with the number masked", st.events)
			}
			if tt.dropped {
				st.sessions[id].NumberSealed = nil
			}
			var last error
			for range tt.reveals {
				r, err := s.Reveal(ctx, p, id, tt.reason)
				if last = err; err == nil && r.MobileNumber != number {
					t.Errorf("revealed %q, want %s", r.MobileNumber, number)
				}
			}
			if tt.wantReason == "" && last != nil || tt.wantReason != "" && fault.Find(last, tt.wantReason) == nil {
				t.Fatalf("Reveal = %v, want reason %q", last, tt.wantReason)
			}
			var want []string
			for _, suffix := range tt.wantRefs {
				want = append(want, "stuck-plus-reveal:"+id+suffix)
			}
			if strings.Join(ledger.refs, " ") != strings.Join(want, " ") {
				t.Errorf("debits %v, want %v", ledger.refs, want)
			}
			var charged []int64
			for _, r := range st.reveals {
				if r.Status == domain.RevealSettled { // audited
					charged = append(charged, r.Charged)
				}
			}
			if !slices.Equal(charged, tt.wantCharged) {
				t.Errorf("audit of charges %v, want %v", charged, tt.wantCharged)
			}
		})
	}
}

// keeper gives Keep the fake's sessions, as the capture's transaction would.
type keeper struct{ f *fakeStore }

func (k keeper) InsertStuckPlusSession(_ context.Context, s domain.StuckPlusSession, hash []byte) error {
	if len(hash) == 0 || s.NumberSealed == nil {
		return errors.New("kept without its sealed number or hash")
	}
	k.f.sessions[s.ID] = &s
	return nil
}

func (k keeper) Emit(_ context.Context, evs ...events.Event) error {
	k.f.events = append(k.f.events, evs...)
	return nil
}
