package credentials_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The tests in this file hold the credential rules against an in-memory fake of the ports; the
// same rules are proven against PostgreSQL in credentials_test.go.

type fakeKey struct {
	key        domain.APIKey
	fp         []byte
	revoked    bool
	replacedBy string
}

// fakeStore is credentials.Store and credentials.Tx in memory; InTx keeps its changes only when
// fn returns nil.
type fakeStore struct {
	now     time.Time
	clients map[string]domain.ClientRow
	keys    map[string]fakeKey
	events  []events.Event
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st credentials.Store) error) error {
	saved, savedEvents := maps.Clone(f.keys), slices.Clone(f.events)
	if err := fn(ctx, f); err != nil {
		f.keys, f.events = saved, savedEvents
		return err
	}
	return nil
}

func (f *fakeStore) Emit(_ context.Context, evs ...events.Event) error {
	f.events = append(f.events, evs...)
	return nil
}

func (f *fakeStore) usable(k fakeKey) bool {
	return !k.revoked && (k.key.ExpiresAt == nil || k.key.ExpiresAt.After(f.now))
}

func (f *fakeStore) GetClient(_ context.Context, id string, _ bool) (domain.ClientRow, error) {
	c, ok := f.clients[id]
	if !ok {
		return c, fault.ErrNotFound
	}
	return c, nil
}

func (f *fakeStore) ClientOfKey(_ context.Context, fp []byte) (string, error) {
	for _, k := range f.keys {
		if bytes.Equal(k.fp, fp) {
			return k.key.ClientID, nil
		}
	}
	return "", fault.ErrNotFound
}

func (f *fakeStore) KeyByFingerprint(_ context.Context, clientID string, fp []byte) (domain.KeyAuth, error) {
	for _, k := range f.keys {
		if k.key.ClientID == clientID && bytes.Equal(k.fp, fp) && f.usable(k) {
			c := f.clients[k.key.ClientID]
			return domain.KeyAuth{Key: k.key, Status: c.Status, Features: c.Features}, nil
		}
	}
	return domain.KeyAuth{}, fault.ErrNotFound
}

func (f *fakeStore) TouchKeys(context.Context, [][2]string) error { return nil }

func (f *fakeStore) InsertKey(_ context.Context, k domain.APIKey, fp []byte) (domain.APIKey, error) {
	k.CreatedAt = f.now
	f.keys[k.ID] = fakeKey{key: k, fp: fp}
	return k, nil
}

func (f *fakeStore) UsableKey(_ context.Context, clientID, keyID string) (domain.APIKey, error) {
	k, ok := f.keys[keyID]
	if !ok || k.key.ClientID != clientID || !f.usable(k) {
		return domain.APIKey{}, fault.ErrNotFound
	}
	k.key.Superseded = k.replacedBy != ""
	return k.key, nil
}

func (f *fakeStore) ListUsableKeys(context.Context, string, int64, int64) ([]domain.APIKey, int64, error) {
	return nil, 0, errors.New("not used")
}

func (f *fakeStore) CountUsableKeys(_ context.Context, clientID, exceptID string) (all, lastingAdmins int, err error) {
	for id, k := range f.keys {
		if k.key.ClientID != clientID || !f.usable(k) {
			continue
		}
		all++
		if k.key.Role == principal.RoleAdmin && k.key.ExpiresAt == nil && id != exceptID {
			lastingAdmins++
		}
	}
	return all, lastingAdmins, nil
}

func (f *fakeStore) RevokeKey(_ context.Context, clientID, keyID string) error {
	if k, ok := f.keys[keyID]; ok && k.key.ClientID == clientID {
		k.revoked = true
		f.keys[keyID] = k
	}
	return nil
}

func (f *fakeStore) RetireKey(_ context.Context, clientID, keyID, replacedBy string, grace time.Duration) (*time.Time, error) {
	k, ok := f.keys[keyID]
	if !ok || k.key.ClientID != clientID {
		return nil, nil
	}
	k.replacedBy = replacedBy
	if grace <= 0 {
		k.revoked = true
	} else if end := f.now.Add(grace); k.key.ExpiresAt == nil || end.Before(*k.key.ExpiresAt) {
		k.key.ExpiresAt = &end
	}
	f.keys[keyID] = k
	return k.key.ExpiresAt, nil
}

func (f *fakeStore) SDKTokenByFingerprint(context.Context, string, []byte) (domain.SDKTokenAuth, error) {
	return domain.SDKTokenAuth{}, fault.ErrNotFound
}

func (f *fakeStore) InsertSDKToken(context.Context, domain.SDKToken, []byte) (domain.SDKToken, error) {
	return domain.SDKToken{}, errors.New("not used")
}

func (f *fakeStore) ListUsableSDKTokens(context.Context, string, int64, int64) ([]domain.SDKToken, int64, error) {
	return nil, 0, errors.New("not used")
}

func (f *fakeStore) RevokeSDKToken(context.Context, string, string) (domain.SDKToken, error) {
	return domain.SDKToken{}, fault.ErrNotFound
}

// fakeClient is a fake store with one client, its secret and credentials over it.
type fakeClient struct {
	store  *fakeStore
	creds  *credentials.Service
	id     string
	secret string
}

func newFakeClient(t *testing.T, status principal.Status) *fakeClient {
	t.Helper()
	fp, err := crypto.NewFingerprinter(accountstest.Pepper)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeStore{now: time.Now(), clients: map[string]domain.ClientRow{}, keys: map[string]fakeKey{}}
	creds := credentials.New(f, f, fp, zap.NewNop())
	secret, secretFP := creds.NewClientSecret()
	id := uuid.NewString()
	f.clients[id] = domain.ClientRow{ID: id, Status: status, SecretFP: secretFP}
	return &fakeClient{store: f, creds: creds, id: id, secret: secret}
}

// key issues a key of the client; expiring gives it an expiry of its own.
func (c *fakeClient) key(t *testing.T, role principal.Role, expiring bool) credentials.Issued {
	t.Helper()
	k, err := c.creds.IssueKey(context.Background(), c.store, c.id, "k", role)
	if err != nil {
		t.Fatal(err)
	}
	if expiring {
		fk := c.store.keys[k.Key.ID]
		end := c.store.now.Add(time.Hour)
		fk.key.ExpiresAt = &end
		c.store.keys[k.Key.ID] = fk
	}
	return k
}

func (c *fakeClient) principal(k credentials.Issued) principal.Principal {
	return principal.Principal{ClientID: c.id, KeyID: k.Key.ID, Role: k.Key.Role}
}

func TestRevokeRules(t *testing.T) {
	tests := []struct {
		name string
		// keys issues the client's keys and returns the id to revoke.
		keys    func(t *testing.T, c *fakeClient) string
		wantErr error
	}{
		{name: "the only ADMIN key stays", keys: func(t *testing.T, c *fakeClient) string {
			return c.key(t, principal.RoleAdmin, false).Key.ID
		}, wantErr: domain.ErrLastAdminKey},
		{name: "an ADMIN key with another lasting ADMIN goes", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, false)
			return c.key(t, principal.RoleAdmin, false).Key.ID
		}},
		{name: "an expiring ADMIN key does not count as the one kept", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, true)
			return c.key(t, principal.RoleAdmin, false).Key.ID
		}, wantErr: domain.ErrLastAdminKey},
		{name: "a MEMBER key does not count as the one kept", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleMember, false)
			return c.key(t, principal.RoleAdmin, false).Key.ID
		}, wantErr: domain.ErrLastAdminKey},
		{name: "an expiring ADMIN key goes while a lasting one stays", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, false)
			return c.key(t, principal.RoleAdmin, true).Key.ID
		}},
		{name: "a MEMBER key goes", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, false)
			return c.key(t, principal.RoleMember, false).Key.ID
		}},
		{name: "an unknown key", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, false)
			return uuid.NewString()
		}, wantErr: fault.ErrNotFound},
		{name: "not a key id", keys: func(t *testing.T, c *fakeClient) string { return "nope" }, wantErr: fault.ErrNotFound},
		{name: "another client's key", keys: func(t *testing.T, c *fakeClient) string {
			other := newFakeClient(t, principal.StatusActive)
			other.store = c.store
			other.id = uuid.NewString()
			c.store.clients[other.id] = domain.ClientRow{ID: other.id, Status: principal.StatusActive}
			c.key(t, principal.RoleAdmin, false)
			return other.key(t, principal.RoleMember, false).Key.ID
		}, wantErr: fault.ErrNotFound},
		{name: "an already revoked key", keys: func(t *testing.T, c *fakeClient) string {
			c.key(t, principal.RoleAdmin, false)
			k := c.key(t, principal.RoleMember, false).Key.ID
			if _, err := c.creds.RevokeKey(context.Background(), c.id, k); err != nil {
				t.Fatal(err)
			}
			return k
		}, wantErr: fault.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClient(t, principal.StatusActive)
			id := tt.keys(t, c)
			wasUsable := c.store.usable(c.store.keys[id]) && c.store.keys[id].key.ClientID == c.id
			got, err := c.creds.RevokeKey(context.Background(), c.id, id)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("RevokeKey = %v, want %v", err, tt.wantErr)
				}
				if k, ok := c.store.keys[id]; ok && wasUsable && k.revoked {
					t.Error("a refused revocation revoked the key")
				}
				return
			}
			if err != nil {
				t.Fatalf("RevokeKey: %v", err)
			}
			if got.ID != id || !c.store.keys[id].revoked {
				t.Errorf("RevokeKey = %+v; key revoked = %v", got, c.store.keys[id].revoked)
			}
		})
	}
}

func TestRotateRules(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		role    principal.Role
		grace   time.Duration
		prepare func(t *testing.T, c *fakeClient, k credentials.Issued)
		secret  func(c *fakeClient) string
		wantErr error
		invalid string
	}{
		{name: "the only ADMIN key is replaced by an ADMIN key", role: principal.RoleAdmin},
		{name: "a MEMBER key is replaced by a MEMBER key", role: principal.RoleMember},
		{name: "with grace the old key lives on, superseded", role: principal.RoleAdmin, grace: time.Hour},
		{name: "a superseded key cannot be rotated again", role: principal.RoleAdmin, grace: time.Hour,
			prepare: func(t *testing.T, c *fakeClient, k credentials.Issued) {
				if _, err := c.creds.Rotate(ctx, c.principal(k), c.secret, time.Hour); err != nil {
					t.Fatal(err)
				}
			}, wantErr: domain.ErrKeySuperseded},
		{name: "a key revoked since authentication", role: principal.RoleMember,
			prepare: func(t *testing.T, c *fakeClient, k credentials.Issued) {
				fk := c.store.keys[k.Key.ID]
				fk.revoked = true
				c.store.keys[k.Key.ID] = fk
			}, wantErr: principal.ErrUnauthenticated},
		{name: "a wrong client secret", role: principal.RoleAdmin, secret: func(c *fakeClient) string {
			s, _ := c.creds.NewClientSecret()
			return s
		}, wantErr: principal.ErrUnauthenticated},
		{name: "not a client secret", role: principal.RoleAdmin, secret: func(*fakeClient) string { return "secret" }, wantErr: principal.ErrUnauthenticated},
		{name: "grace beyond the bound", role: principal.RoleAdmin, grace: credentials.MaxGrace + time.Second, invalid: "oldKeyGraceSeconds"},
		{name: "negative grace", role: principal.RoleAdmin, grace: -time.Second, invalid: "oldKeyGraceSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClient(t, principal.StatusActive)
			old := c.key(t, tt.role, false)
			if tt.prepare != nil {
				tt.prepare(t, c, old)
			}
			secret := c.secret
			if tt.secret != nil {
				secret = tt.secret(c)
			}
			before := len(c.store.keys)
			got, err := c.creds.Rotate(ctx, c.principal(old), secret, tt.grace)
			switch {
			case tt.invalid != "":
				if e := fault.Find(err, fault.InvalidArgument); e == nil || e.Field != tt.invalid {
					t.Fatalf("Rotate = %v, want invalid %s", err, tt.invalid)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Rotate = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Rotate: %v", err)
			}
			if err != nil {
				if len(c.store.keys) != before {
					t.Error("a refused rotation issued a key")
				}
				return
			}
			if got.Key.Role != tt.role || got.Key.Name != old.Key.Name || got.Key.ID == old.Key.ID {
				t.Errorf("new key %+v, want a %s key named %q", got.Key, tt.role, old.Key.Name)
			}
			if p, err := c.creds.AuthenticateAPIKey(ctx, got.Secret, c.id); err != nil || p.Role != tt.role {
				t.Errorf("the new key authenticates as %+v, %v", p, err)
			}
			_, oldErr := c.creds.AuthenticateAPIKey(ctx, old.Secret, c.id)
			if stillWorks := oldErr == nil; stillWorks != (tt.grace > 0) {
				t.Errorf("old key still works = %v, want %v", stillWorks, tt.grace > 0)
			}
			if _, admins, _ := c.store.CountUsableKeys(ctx, c.id, old.Key.ID); tt.role == principal.RoleAdmin && admins != 1 {
				t.Errorf("%d lasting ADMIN keys besides the old one, want 1", admins)
			}
		})
	}
}

func TestAuthenticateRules(t *testing.T) {
	ctx := context.Background()
	c := newFakeClient(t, principal.StatusActive)
	k := c.key(t, principal.RoleMember, false)
	expired := c.key(t, principal.RoleAdmin, false)
	fk := c.store.keys[expired.Key.ID]
	past := c.store.now.Add(-time.Second)
	fk.key.ExpiresAt = &past
	c.store.keys[expired.Key.ID] = fk
	unknown := crypto.NewToken(principal.APIKeyPrefix)

	tests := []struct {
		name     string
		key      string
		clientID string
		wantErr  error
	}{
		{name: "a key of the client", key: k.Secret, clientID: c.id},
		{name: "a key without a client id", key: k.Secret},
		{name: "an unknown key", key: unknown, clientID: c.id, wantErr: principal.ErrUnauthenticated},
		{name: "an expired key", key: expired.Secret, clientID: c.id, wantErr: principal.ErrUnauthenticated},
		{name: "a key of another client id", key: k.Secret, clientID: uuid.NewString(), wantErr: principal.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := c.creds.AuthenticateAPIKey(ctx, tt.key, tt.clientID)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || p.ClientID != "" {
					t.Fatalf("AuthenticateAPIKey = %+v, %v; want %v", p, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.ClientID != c.id || p.KeyID != k.Key.ID || p.Role != principal.RoleMember {
				t.Fatalf("AuthenticateAPIKey = %+v, %v", p, err)
			}
		})
	}
	t.Run("an unknown SDK token", func(t *testing.T) {
		if _, err := c.creds.AuthenticateSDKToken(ctx, crypto.NewToken(principal.SDKTokenPrefix), c.id); !errors.Is(err, principal.ErrUnauthenticated) {
			t.Fatalf("AuthenticateSDKToken = %v, want unauthenticated", err)
		}
	})
}

func TestGenerateFirstKeyRules(t *testing.T) {
	tests := []struct {
		name    string
		status  principal.Status
		prepare func(t *testing.T, c *fakeClient)
		client  func(c *fakeClient) string
		wantErr error
	}{
		{name: "issues an ADMIN key", status: principal.StatusActive},
		{name: "once only", status: principal.StatusActive, prepare: func(t *testing.T, c *fakeClient) { c.key(t, principal.RoleMember, false) }, wantErr: domain.ErrKeyExists},
		{name: "not for a suspended client", status: principal.StatusSuspended, wantErr: fault.ErrSuspended},
		{name: "an unknown client looks like a wrong secret", status: principal.StatusActive, client: func(*fakeClient) string { return uuid.NewString() }, wantErr: principal.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeClient(t, tt.status)
			if tt.prepare != nil {
				tt.prepare(t, c)
			}
			id := c.id
			if tt.client != nil {
				id = tt.client(c)
			}
			got, err := c.creds.GenerateFirstKey(context.Background(), id, c.secret)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("GenerateFirstKey = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Key.Role != principal.RoleAdmin || c.store.keys[got.Key.ID].key.ClientID != c.id {
				t.Fatalf("GenerateFirstKey = %+v, %v", got, err)
			}
		})
	}
}
