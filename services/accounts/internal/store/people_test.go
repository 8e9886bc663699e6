package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestSessionAuthentication: a session authenticates while it is not ended, not past its end,
// not idle too long, its person still a member of its client, and only under its own client.
func TestSessionAuthentication(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	st := store.New(env.Pool)
	client := func() string {
		cr, err := env.Clients.Create(ctx, clients.CreateRequest{
			Name: "People client", Contact: domain.Contact{Name: "Tess Ter", Email: "tess@example.com", Phone: "0011223344"}, WithoutAPIKey: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return cr.Client.ID
	}
	c1, c2 := client(), client()
	p := people.Person{ID: uuid.NewString(), Sealed: []byte("sealed"), Handle: make([]byte, 32)}
	copy(p.Handle, uuid.New().String())
	if err := st.InsertPerson(ctx, p, []byte("email-"+p.ID)); err != nil {
		t.Fatal(err)
	}
	if err := st.AddMembership(ctx, people.Membership{ClientID: c1, PersonID: p.ID, Role: principal.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	session := func(expires time.Time, steppedUp bool) (string, []byte) {
		id, fp := uuid.NewString(), []byte("fp-"+uuid.NewString())
		if _, err := st.InsertSession(ctx, people.Session{ID: id, ClientID: c1, PersonID: p.ID, ExpiresAt: expires}, fp, steppedUp); err != nil {
			t.Fatal(err)
		}
		return id, fp
	}
	hour := time.Hour
	auth := func(client string, fp []byte) (people.SessionAuth, error) {
		return st.AuthenticateSession(ctx, client, fp, hour, 5*time.Minute)
	}

	live, liveFP := session(time.Now().Add(hour), true)
	a, err := auth(c1, liveFP)
	if err != nil || a.ID != live || a.Role != principal.RoleAdmin || a.StepUpValidFor == nil || *a.StepUpValidFor <= 0 {
		t.Fatalf("a live session: %+v, %v", a, err)
	}
	_, plainFP := session(time.Now().Add(hour), false)
	if a, err := auth(c1, plainFP); err != nil || a.StepUpValidFor != nil {
		t.Fatalf("a session never stepped up: %+v, %v", a, err)
	}
	_, pastFP := session(time.Now().Add(-time.Second), false)
	_, idleFP := session(time.Now().Add(hour), false)
	if _, err := env.Pool.Exec(ctx, `UPDATE accounts.console_sessions SET last_seen_at = now() - interval '2 hours' WHERE fingerprint = $1`, idleFP); err != nil {
		t.Fatal(err)
	}
	ended, endedFP := session(time.Now().Add(hour), false)
	if _, err := st.EndSession(ctx, p.ID, ended); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		client string
		fp     []byte
	}{
		{"past its end", c1, pastFP},
		{"idle too long", c1, idleFP},
		{"ended", c1, endedFP},
		{"under another client", c2, liveFP},
		{"unknown", c1, []byte("nothing")},
	} {
		if _, err := auth(tt.client, tt.fp); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("a session %s: %v, want not found", tt.name, err)
		}
	}
	// Using a session moves its idle timeout.
	if _, err := env.Pool.Exec(ctx, `UPDATE accounts.console_sessions SET last_seen_at = now() - interval '50 minutes' WHERE fingerprint = $1`, liveFP); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(c1, liveFP); err != nil {
		t.Fatal(err)
	}
	var idleFor time.Duration
	if err := env.Pool.QueryRow(ctx, `SELECT now() - last_seen_at FROM accounts.console_sessions WHERE fingerprint = $1`, liveFP).Scan(&idleFor); err != nil {
		t.Fatal(err)
	}
	if idleFor > time.Minute {
		t.Errorf("used, the session was last seen %s ago", idleFor)
	}
	// A person who leaves the client loses the session at once.
	if err := st.RemoveMembership(ctx, c1, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(c1, liveFP); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("a removed member's session: %v, want not found", err)
	}
}

// TestCeremoniesAreUsedOnce: a ceremony is taken once, for its purpose, before it expires.
func TestCeremoniesAreUsedOnce(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	st := store.New(env.Pool)
	keep := func(ttl time.Duration) string {
		c := people.Ceremony{ID: uuid.NewString(), Purpose: people.PurposeSignIn, Data: []byte(`{}`)}
		if err := st.InsertCeremony(ctx, c, ttl); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	take := func(id, purpose string) error {
		_, err := st.TakeCeremony(ctx, id, purpose)
		return err
	}
	live, expired, other := keep(time.Minute), keep(-time.Second), keep(time.Minute)
	if err := take(live, people.PurposeSignIn); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, id, purpose string }{
		{"twice", live, people.PurposeSignIn},
		{"expired", expired, people.PurposeSignIn},
		{"for another purpose", other, people.PurposeStepUp},
	} {
		if err := take(tt.id, tt.purpose); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("a ceremony taken %s: %v, want not found", tt.name, err)
		}
	}
	// The attempt for another purpose used it up too: it is tried once.
	if err := take(other, people.PurposeSignIn); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("a ceremony taken after a wrong attempt: %v", err)
	}
}
