package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// keyed is a page as the ids (or references) of its rows, with its total.
func keyed[T any](items []T, total int64, err error, key func(T) string) ([]string, int64, error) {
	var out []string
	for _, it := range items {
		out = append(out, key(it))
	}
	return out, total, err
}

// TestPagedLists reads pages of each paged list: their rows in order and the total of the whole
// list, without other clients' rows or revoked credentials, and the pages past the end.
func TestPagedLists(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	st := store.New(env.Pool)

	// Clients c[0..2], oldest first, each with a TOP_UP of 10 and no key of their own.
	var c []string
	for range 3 {
		cr, err := env.Clients.Create(ctx, clients.CreateRequest{
			Name:           "Test client",
			Contact:        domain.Contact{Name: "Tess Ter", Email: "tess@example.com", Phone: "0011223344"},
			InitialBalance: 10,
			WithoutAPIKey:  true,
		})
		if err != nil {
			t.Fatal(err)
		}
		c = append(c, cr.Client.ID)
	}
	// c[0] has keys k[0..3] and tokens tk[0..3], oldest first, of which k[1] and tk[2] are
	// revoked; c[1] has a key and a token of its own.
	var k, tk []string
	for i := range 5 {
		client := c[0]
		if i == 4 {
			client = c[1]
		}
		key, err := st.InsertKey(ctx, domain.APIKey{ID: uuid.NewString(), ClientID: client, Name: "key", Role: principal.RoleMember, Hint: "h"}, []byte("key"+uuid.NewString()))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := st.InsertSDKToken(ctx, domain.SDKToken{ID: uuid.NewString(), ClientID: client, Label: "token", Hint: "h"}, []byte("tok"+uuid.NewString()))
		if err != nil {
			t.Fatal(err)
		}
		k, tk = append(k, key.ID), append(tk, tok.ID)
	}
	if err := st.RevokeKey(ctx, c[0], k[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeSDKToken(ctx, c[0], tk[2]); err != nil {
		t.Fatal(err)
	}
	// c[0]'s ledger: its TOP_UP, then debits d1, d2, d3.
	for _, ref := range []string{"d1", "d2", "d3"} {
		if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c[0], Kind: money.KindVerification, Variant: "HEADER_ENRICHMENT", Reference: ref}); err != nil {
			t.Fatal(err)
		}
	}

	keys := func(client string) func(l, o int64) ([]string, int64, error) {
		return func(l, o int64) ([]string, int64, error) {
			items, total, err := st.ListUsableKeys(ctx, client, l, o)
			return keyed(items, total, err, func(k domain.APIKey) string { return k.ID })
		}
	}
	tokens := func(client string) func(l, o int64) ([]string, int64, error) {
		return func(l, o int64) ([]string, int64, error) {
			items, total, err := st.ListUsableSDKTokens(ctx, client, l, o)
			return keyed(items, total, err, func(t domain.SDKToken) string { return t.ID })
		}
	}
	ledger := func(l, o int64) ([]string, int64, error) {
		items, total, err := st.ListLedger(ctx, c[0], l, o)
		return keyed(items, total, err, func(e domain.LedgerEntry) string { return e.Reference })
	}
	allClients := func(l, o int64) ([]string, int64, error) {
		items, total, err := st.ListClients(ctx, l, o)
		return keyed(items, total, err, func(c domain.ClientRow) string { return c.ID })
	}
	tests := []struct {
		name          string
		read          func(limit, offset int64) ([]string, int64, error)
		limit, offset int64
		want          []string
		total         int64
	}{
		{"keys, first page", keys(c[0]), 2, 0, []string{k[3], k[2]}, 3},
		{"keys, last page", keys(c[0]), 2, 2, []string{k[0]}, 3},
		{"keys, past the end", keys(c[0]), 2, 4, nil, 3},
		{"keys of a client without any", keys(c[2]), 2, 0, nil, 0},
		{"sdk tokens, first page", tokens(c[0]), 2, 0, []string{tk[3], tk[1]}, 3},
		{"sdk tokens, last page", tokens(c[0]), 2, 2, []string{tk[0]}, 3},
		{"sdk tokens of another client", tokens(c[1]), 2, 0, []string{tk[4]}, 1},
		{"ledger, first page", ledger, 3, 0, []string{"d3", "d2", "d1"}, 4},
		{"ledger, last page", ledger, 3, 3, []string{"initial-balance"}, 4},
		{"ledger, past the end", ledger, 3, 10, nil, 4},
		{"clients, first page", allClients, 2, 0, []string{c[2], c[1]}, 3},
		{"clients, last page", allClients, 2, 2, []string{c[0]}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total, err := tt.read(tt.limit, tt.offset)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) || total != tt.total {
				t.Errorf("page = %v, total %d; want %v, total %d", got, total, tt.want, tt.total)
			}
		})
	}
}

// TestAppendLedgerIfUnchanged: a batch of two clients' debits is written only when each
// client's rows still hold what the batch was decided against; when one does not, nothing of
// the batch is written, the other client's debits included, written as one statement per step
// or one per client.
func TestAppendLedgerIfUnchanged(t *testing.T) {
	for _, spread := range tenancy.Spreads {
		t.Run(spread.String(), func(t *testing.T) { testAppendLedgerIfUnchanged(t, spread) })
	}
}

func testAppendLedgerIfUnchanged(t *testing.T, spread tenancy.Spread) {
	env := accountstest.NewSpread(t, billing.DefaultPrices(), spread)
	ctx := accountstest.Deadline(t)
	stores := pg.NewStores(env.Pool, func(db pg.DB) *store.Store { return store.New(db).WithSpread(spread) }).Piped()
	two := int64(2)
	tests := []struct {
		name    string
		prepare func(t *testing.T, b string)
		seen    func(s *domain.SeenBalance) // what the batch took b's rows to hold
		wantErr error
	}{
		{name: "both hold"},
		{name: "the balance moved", seen: func(s *domain.SeenBalance) { s.Balance = 9 }, wantErr: domain.ErrBalanceChanged},
		{name: "the client suspended", wantErr: domain.ErrBalanceChanged, prepare: func(t *testing.T, b string) {
			if _, err := env.Clients.SetStatus(ctx, b, principal.StatusSuspended); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another threshold", seen: func(s *domain.SeenBalance) { s.LowThreshold = &two }, wantErr: domain.ErrBalanceChanged},
		{name: "an override that is not there", wantErr: domain.ErrBalanceChanged, seen: func(s *domain.SeenBalance) {
			s.Overrides = []domain.Price{{Kind: money.KindVerification, Amount: 2}}
		}},
		{name: "the overrides that are there", prepare: func(t *testing.T, b string) {
			if _, err := env.Ledger.SetPrice(ctx, b, money.KindVerification, "NETWORK_API", &two); err != nil {
				t.Fatal(err)
			}
		}, seen: func(s *domain.SeenBalance) {
			s.Overrides = []domain.Price{{Kind: money.KindVerification, Variant: "NETWORK_API", Amount: 2, Overridden: true}}
		}},
		{name: "expired, asked unexpired", wantErr: domain.ErrBalanceChanged, prepare: func(t *testing.T, b string) { env.ExpireBalance(t, b) }},
		{name: "expired, not asked", prepare: func(t *testing.T, b string) { env.ExpireBalance(t, b) }, seen: func(s *domain.SeenBalance) { s.Unexpired = false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := env.Client(t, 10).Client.ID, env.Client(t, 10).Client.ID
			if tt.prepare != nil {
				tt.prepare(t, b)
			}
			seen := []domain.SeenBalance{
				{ClientID: a, Balance: 10, Status: principal.StatusActive, Unexpired: true},
				{ClientID: b, Balance: 10, Status: principal.StatusActive, Unexpired: true},
			}
			if tt.seen != nil {
				tt.seen(&seen[1])
			}
			var entries []domain.LedgerEntry
			for _, id := range []string{a, b} {
				entries = append(entries, domain.LedgerEntry{ClientID: id, Kind: money.KindVerification, Amount: -1, BalanceAfter: 9, Reference: "v-1"})
			}
			err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
				_, err := st.AppendLedgerIfUnchanged(ctx, seen, entries)
				return err
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			want := int64(9)
			if tt.wantErr != nil {
				want = 10
			}
			for _, id := range []string{a, b} {
				if got := env.CheckLedger(t, id); got != want {
					t.Errorf("balance %d, want %d", got, want)
				}
			}
		})
	}
}
