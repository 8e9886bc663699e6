package clients_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func valid() clients.CreateRequest {
	return clients.CreateRequest{
		Name:    "ACME",
		Contact: domain.Contact{Name: "Ada Lovelace", Email: "ada@acme.test", Phone: "00441234567"},
	}
}

func TestCreate(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	past := time.Now().Add(-time.Hour)
	future := time.Now().Add(72 * time.Hour)
	tests := []struct {
		name      string
		edit      func(*clients.CreateRequest)
		wantField string
	}{
		{name: "minimal"},
		{name: "full", edit: func(r *clients.CreateRequest) {
			r.InitialBalance, r.BalanceExpiresAt = 100, &future
			r.Features = []string{"VERIFY", "SANDBOX", "VERIFY"}
		}},
		{name: "blank name", edit: func(r *clients.CreateRequest) { r.Name = " " }, wantField: "clientName"},
		{name: "long name", edit: func(r *clients.CreateRequest) { r.Name = strings.Repeat("a", 201) }, wantField: "clientName"},
		{name: "bad e-mail", edit: func(r *clients.CreateRequest) { r.Contact.Email = "ada at acme" }, wantField: "contactPersonEmail"},
		{name: "named e-mail", edit: func(r *clients.CreateRequest) { r.Contact.Email = "Ada <ada@acme.test>" }, wantField: "contactPersonEmail"},
		{name: "phone with plus", edit: func(r *clients.CreateRequest) { r.Contact.Phone = "+441234567" }, wantField: "contactPhoneNumber"},
		{name: "short phone", edit: func(r *clients.CreateRequest) { r.Contact.Phone = "123" }, wantField: "contactPhoneNumber"},
		{name: "negative balance", edit: func(r *clients.CreateRequest) { r.InitialBalance = -1 }, wantField: "initialBalance"},
		{name: "expiry in the past", edit: func(r *clients.CreateRequest) { r.BalanceExpiresAt = &past }, wantField: "balanceExpiresAt"},
		{name: "unknown feature", edit: func(r *clients.CreateRequest) { r.Features = []string{"TELEPORT"} }, wantField: "features"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := valid()
			if tt.edit != nil {
				tt.edit(&req)
			}
			got, err := env.Clients.Create(ctx, req)
			if tt.wantField != "" {
				if invalid := fault.Find(err, fault.InvalidArgument); invalid == nil || invalid.Field != tt.wantField {
					t.Fatalf("err = %v, want invalid %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := got.Client
			if c.Contact != req.Contact || c.Status != principal.StatusActive || c.Balance != req.InitialBalance {
				t.Fatalf("created %+v from %+v", c, req)
			}
			if !strings.HasPrefix(got.ClientSecret, principal.ClientSecretPrefix) || !strings.HasPrefix(got.APIKey, principal.APIKeyPrefix) {
				t.Fatal("credentials have the wrong shape")
			}
			if len(req.Features) > 0 && strings.Join(c.Features, ",") != "SANDBOX,VERIFY" {
				t.Fatalf("features %v", c.Features)
			}
			env.CheckLedger(t, c.ID)
		})
	}
}

func TestStatusAndFeatures(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 5)
	got, err := env.Clients.SetStatus(ctx, c.Client.ID, principal.StatusSuspended)
	if err != nil || got.Status != principal.StatusSuspended || got.BalanceValid(time.Now()) {
		t.Fatalf("suspend: %+v, %v", got, err)
	}
	if got, err = env.Clients.SetFeatures(ctx, c.Client.ID, []string{"CONNECT"}); err != nil || strings.Join(got.Features, ",") != "CONNECT" {
		t.Fatalf("features: %+v, %v", got.Features, err)
	}
	if _, err := env.Clients.SetStatus(ctx, "00000000-0000-0000-0000-000000000000", principal.StatusActive); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
	if _, err := env.Clients.Get(ctx, "not-a-uuid"); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
}
