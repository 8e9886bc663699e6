package clients_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The tests in this file hold the client rules against an in-memory fake of the ports; the same
// rules are proven against PostgreSQL in clients_test.go and weborigins_test.go.

// fakeStore implements what Create and the web origins use; the rest of clients.Store is left
// to the embedded nil interface, so a call to it panics and shows.
type fakeStore struct {
	clients.Store
	rows    map[string]domain.ClientRow
	origins map[string][]string
	ledger  []domain.LedgerEntry
	keys    []domain.APIKey
	failKey error
}

func newFake() *fakeStore {
	return &fakeStore{rows: map[string]domain.ClientRow{}, origins: map[string][]string{}}
}

// Emit accepts the events of the credentials issued at creation; their rules are credentials'.
func (f *fakeStore) Emit(context.Context, ...events.Event) error { return nil }

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st clients.Store) error) error {
	saved := *f
	saved.rows, saved.origins = maps.Clone(f.rows), maps.Clone(f.origins)
	saved.ledger, saved.keys = slices.Clone(f.ledger), slices.Clone(f.keys)
	if err := fn(ctx, f); err != nil {
		*f = saved
		return err
	}
	return nil
}

func (f *fakeStore) InsertClient(_ context.Context, c domain.ClientRow) error {
	f.rows[c.ID] = c
	return nil
}

func (f *fakeStore) GetClient(_ context.Context, id string, _ bool) (domain.ClientRow, error) {
	c, ok := f.rows[id]
	if !ok {
		return c, fault.ErrNotFound
	}
	return c, nil
}

func (f *fakeStore) LockBalance(_ context.Context, id string) (domain.BalanceState, error) {
	c, ok := f.rows[id]
	if !ok {
		return domain.BalanceState{}, fault.ErrNotFound
	}
	return domain.BalanceState{Balance: c.Balance, ExpiresAt: c.BalanceExpiresAt, Status: c.Status, Now: time.Now()}, nil
}

func (f *fakeStore) LedgerByReference(_ context.Context, clientID, ref string) (domain.LedgerEntry, error) {
	for _, e := range f.ledger {
		if e.ClientID == clientID && e.Reference == ref {
			return e, nil
		}
	}
	return domain.LedgerEntry{}, fault.ErrNotFound
}

func (f *fakeStore) AppendLedger(_ context.Context, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	for i, e := range entries {
		c := f.rows[e.ClientID]
		c.Balance = e.BalanceAfter
		f.rows[e.ClientID] = c
		entries[i].ID = fmt.Sprintf("e%d", len(f.ledger)+1)
		f.ledger = append(f.ledger, entries[i])
	}
	return entries, nil
}

func (f *fakeStore) InsertKey(_ context.Context, k domain.APIKey, _ []byte) (domain.APIKey, error) {
	if f.failKey != nil {
		return k, f.failKey
	}
	f.keys = append(f.keys, k)
	return k, nil
}

func (f *fakeStore) WebOrigins(_ context.Context, id string) ([]domain.WebOrigin, error) {
	out := []domain.WebOrigin{}
	for _, o := range f.origins[id] {
		out = append(out, domain.WebOrigin{Origin: o})
	}
	return out, nil
}

func (f *fakeStore) SetWebOrigins(_ context.Context, id string, origins []string) error {
	o := slices.Clone(origins)
	slices.Sort(o)
	f.origins[id] = o
	return nil
}

func (f *fakeStore) HasWebOrigin(_ context.Context, id, origin string) (bool, error) {
	return slices.Contains(f.origins[id], origin), nil
}

func newFakeService(t *testing.T, f *fakeStore) *clients.Service {
	t.Helper()
	fp, err := crypto.NewFingerprinter(accountstest.Pepper)
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := crypto.ParseKeyring(accountstest.DataKeys)
	if err != nil {
		t.Fatal(err)
	}
	// Create hands its own transaction's store to both; neither opens one of its own here.
	creds := credentials.New(f, nil, fp, zap.NewNop())
	ledger := billing.NewLedger(f, nil, billing.DefaultPrices())
	return clients.New(f, f, keyring, creds, ledger)
}

func TestCreateRules(t *testing.T) {
	errDisk := errors.New("disk full")
	tests := []struct {
		name        string
		req         func(r *clients.CreateRequest)
		failKey     error
		wantErr     error
		wantInvalid string
		wantBalance int64
		wantKey     bool
	}{
		{name: "client, initial credit and ADMIN key", req: func(r *clients.CreateRequest) { r.InitialBalance = 25 }, wantBalance: 25, wantKey: true},
		{name: "no initial credit, no ledger entry", wantKey: true},
		{name: "without an API key", req: func(r *clients.CreateRequest) { r.WithoutAPIKey = true }},
		{name: "a bad e-mail", req: func(r *clients.CreateRequest) { r.Contact.Email = "ada at acme" }, wantInvalid: "contactPersonEmail"},
		{name: "a blank name", req: func(r *clients.CreateRequest) { r.Name = "  " }, wantInvalid: "clientName"},
		{name: "a negative initial balance", req: func(r *clients.CreateRequest) { r.InitialBalance = -1 }, wantInvalid: "initialBalance"},
		{name: "an unknown feature", req: func(r *clients.CreateRequest) { r.Features = []string{"TELEPORT"} }, wantInvalid: "features"},
		{name: "a failed key rolls the client back", req: func(r *clients.CreateRequest) { r.InitialBalance = 5 }, failKey: errDisk, wantErr: errDisk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.failKey = tt.failKey
			r := valid()
			if tt.req != nil {
				tt.req(&r)
			}
			got, err := newFakeService(t, f).Create(context.Background(), r)
			switch {
			case tt.wantInvalid != "":
				if e := fault.Find(err, fault.InvalidArgument); e == nil || e.Field != tt.wantInvalid {
					t.Fatalf("Create = %v, want invalid %s", err, tt.wantInvalid)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Create = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Create: %v", err)
			}
			if err != nil {
				if len(f.rows)+len(f.ledger)+len(f.keys) != 0 {
					t.Errorf("a failed creation left %d clients, %d entries, %d keys", len(f.rows), len(f.ledger), len(f.keys))
				}
				return
			}
			row := f.rows[got.Client.ID]
			if len(f.rows) != 1 || row.Status != principal.StatusActive || bytes.Contains(row.ContactSealed, []byte(r.Contact.Email)) {
				t.Errorf("stored %+v: want one ACTIVE client with its contact sealed", row)
			}
			if got.Client.Contact != r.Contact || got.Client.Balance != tt.wantBalance || got.ClientSecret == "" {
				t.Errorf("created %+v, want the contact back and balance %d", got, tt.wantBalance)
			}
			if wantEntries := min(tt.wantBalance, 1); int64(len(f.ledger)) != wantEntries ||
				(wantEntries == 1 && (f.ledger[0].Kind != "TOP_UP" || f.ledger[0].Amount != tt.wantBalance)) {
				t.Errorf("ledger %+v, want a TOP_UP of %d only when there is credit", f.ledger, tt.wantBalance)
			}
			if tt.wantKey != (got.APIKey != "") || len(f.keys) != map[bool]int{true: 1}[tt.wantKey] ||
				(tt.wantKey && f.keys[0].Role != principal.RoleAdmin) {
				t.Errorf("key %q, stored %+v; want an ADMIN key: %v", got.APIKey, f.keys, tt.wantKey)
			}
		})
	}
}

func TestWebOriginRules(t *testing.T) {
	ctx := context.Background()
	many := make([]string, clients.MaxWebOrigins+1)
	for i := range many {
		many[i] = fmt.Sprintf("https://s%d.example", i)
	}
	tests := []struct {
		name        string
		client      string // "" the client, else this id
		origins     []string
		want        []string
		wantErr     error
		wantInvalid bool
	}{
		{name: "canonical, distinct, replacing the old list", origins: []string{"https://Shop.Example:443/", "https://shop.example", "http://127.0.0.1:8080"},
			want: []string{"http://127.0.0.1:8080", "https://shop.example"}},
		{name: "an empty list clears", origins: nil, want: []string{}},
		{name: "plain http elsewhere than loopback", origins: []string{"https://ok.example", "http://shop.example"}, wantInvalid: true},
		{name: "a path", origins: []string{"https://shop.example/cart"}, wantInvalid: true},
		{name: "a wildcard", origins: []string{"https://*.example"}, wantInvalid: true},
		{name: "too many", origins: many, wantInvalid: true},
		{name: "exactly the most", origins: many[:clients.MaxWebOrigins], want: func() []string {
			w := slices.Clone(many[:clients.MaxWebOrigins])
			slices.Sort(w)
			return w
		}()},
		{name: "an unknown client", client: uuid.NewString(), origins: []string{"https://shop.example"}, wantErr: fault.ErrNotFound},
		{name: "not a client id", client: "nope", origins: []string{"https://shop.example"}, wantErr: fault.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			id := uuid.NewString()
			f.rows[id] = domain.ClientRow{ID: id, Status: principal.StatusActive}
			f.origins[id] = []string{"https://old.example"}
			target := id
			if tt.client != "" {
				target = tt.client
			}
			s := newFakeService(t, f)
			got, err := s.SetWebOrigins(ctx, target, tt.origins)
			switch {
			case tt.wantInvalid:
				if e := fault.Find(err, fault.InvalidArgument); e == nil || e.Field != "origins" {
					t.Fatalf("SetWebOrigins = %v, want invalid origins", err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("SetWebOrigins = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("SetWebOrigins: %v", err)
			}
			if err != nil {
				if !slices.Equal(f.origins[id], []string{"https://old.example"}) {
					t.Errorf("a refused replacement changed the list to %v", f.origins[id])
				}
				return
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Origin)
			}
			if !slices.Equal(names, tt.want) && !(len(names) == 0 && len(tt.want) == 0) {
				t.Errorf("SetWebOrigins = %v, want %v", names, tt.want)
			}
			if ok, _ := s.AllowsWebOrigin(ctx, id, "https://old.example"); ok {
				t.Error("the old origin is still allowed after the replacement")
			}
			for _, o := range tt.want {
				if ok, _ := s.AllowsWebOrigin(ctx, id, o); !ok {
					t.Errorf("%s is not allowed after being set", o)
				}
			}
		})
	}
}
