package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestPersonsOwnPasskeys: a person lists, renames and removes only their own passkeys (another
// person's is not found, whatever the call), the flags a passkey was registered with show, and
// a person's last passkey is kept; a person of single sign-on gets none.
func TestPersonsOwnPasskeys(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	st := store.New(env.Pool)
	stores := pg.NewStores(env.Pool, func(db pg.DB) people.Store { return store.New(db) })
	fp, err := crypto.NewFingerprinter(accountstest.Pepper)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := people.New(stores.Pool(), stores, fp, env.Keyring, people.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	person := func() principal.Principal {
		p := people.Person{ID: uuid.NewString(), Handle: []byte(uuid.NewString()[:32])}
		p.Sealed = env.Keyring.Seal([]byte(`{"email":"`+p.ID+`@example.com","name":"A Person"}`), []byte("accounts.people:"+p.ID))
		if err := st.InsertPerson(ctx, p, []byte("email-"+p.ID)); err != nil {
			t.Fatal(err)
		}
		return principal.Principal{UserID: p.ID, SessionID: uuid.NewString()}
	}
	passkey := func(p principal.Principal, credential string) string {
		k := people.Passkey{ID: uuid.NewString(), PersonID: p.UserID, CredentialID: []byte(uuid.NewString()), Credential: []byte(credential)}
		if err := st.InsertPasskey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k.ID
	}
	alice, bob := person(), person()
	a1 := passkey(alice, `{"flags":{"backupEligible":true,"backupState":true}}`)
	a2 := passkey(alice, `{"flags":{}}`)
	b1 := passkey(bob, `{"flags":{}}`)

	list, err := svc.Passkeys(ctx, alice)
	if err != nil || len(list) != 2 || list[0].ID != a1 || !list[0].BackupEligible || !list[0].BackedUp || list[1].BackupEligible || list[0].LastUsedAt != nil {
		t.Fatalf("alice's passkeys: %+v, %v", list, err)
	}
	if k, err := svc.RenamePasskey(ctx, alice, a1, "  Work laptop "); err != nil || k.Name != "Work laptop" {
		t.Fatalf("rename: %+v, %v", k, err)
	}

	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"rename another person's", func() error { _, err := svc.RenamePasskey(ctx, alice, b1, "mine now"); return err }},
		{"remove another person's", func() error { _, err := svc.DeletePasskey(ctx, alice, b1); return err }},
		{"remove one that is no id", func() error { _, err := svc.DeletePasskey(ctx, alice, "b1"); return err }},
		{"remove one that never was", func() error { _, err := svc.DeletePasskey(ctx, alice, uuid.NewString()); return err }},
	} {
		if err := tt.call(); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("%s: %v, want not found", tt.name, err)
		}
	}
	if list, _ := svc.Passkeys(ctx, bob); len(list) != 1 || list[0].Name != "" {
		t.Fatalf("bob's passkeys after alice's attempts: %+v", list)
	}

	if _, err := svc.DeletePasskey(ctx, alice, a1); err != nil {
		t.Fatalf("remove one of two: %v", err)
	}
	var f *fault.Error
	if _, err := svc.DeletePasskey(ctx, alice, a2); !errors.As(err, &f) || f.Reason != fault.Conflict {
		t.Fatalf("remove the last: %v, want a conflict", err)
	}
	if list, _ := svc.Passkeys(ctx, alice); len(list) != 1 || list[0].ID != a2 {
		t.Fatalf("alice's passkeys after removing the last: %+v", list)
	}
	if _, err := svc.RenamePasskey(ctx, alice, a2, ""); err == nil {
		t.Fatal("an empty name was taken")
	}

	// A person of a client's single sign-on is let in by the provider alone: no passkey for them.
	cr, err := env.Clients.Create(ctx, clients.CreateRequest{
		Name: "SSO client", Contact: domain.Contact{Name: "Tess Ter", Email: "tess@example.com", Phone: "0011223344"}, WithoutAPIKey: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	sso := people.Person{ID: uuid.NewString(), Sealed: []byte("sealed"), Handle: []byte(uuid.NewString()[:32])}
	if err := st.InsertSSOPerson(ctx, sso, []byte("sso-"+sso.ID), cr.Client.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.StartAddPasskey(ctx, principal.Principal{UserID: sso.ID, SessionID: uuid.NewString()}); !errors.As(err, &f) || f.Reason != fault.Conflict {
		t.Fatalf("a passkey for a person of single sign-on: %v, want a conflict", err)
	}
	// Alice may: the registration's options exclude the passkey she has.
	o, err := svc.StartAddPasskey(ctx, alice)
	if err != nil || !strings.Contains(o.JSON, `"excludeCredentials"`) || o.CeremonyID == "" {
		t.Fatalf("alice's registration: %+v, %v", o, err)
	}
}
