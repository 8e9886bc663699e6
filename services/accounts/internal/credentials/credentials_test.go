package credentials_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func TestAuthenticateAPIKey(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0, domain.FeatureVerify)
	other := env.Client(t, 0)

	p, err := env.Credentials.AuthenticateAPIKey(ctx, c.APIKey, c.Client.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.ClientID != c.Client.ID || p.Role != principal.RoleAdmin || p.Status != principal.StatusActive || !p.Has(domain.FeatureVerify) {
		t.Fatalf("principal %+v", p)
	}
	if _, err := env.Credentials.AuthenticateAPIKey(ctx, c.APIKey, ""); err != nil {
		t.Fatalf("without client id: %v", err)
	}
	for name, tc := range map[string]struct{ key, client string }{
		"other client's id":  {c.APIKey, other.Client.ID},
		"unknown key":        {principal.APIKeyPrefix + strings.Repeat("A", 40), c.Client.ID},
		"unknown key alone":  {principal.APIKeyPrefix + strings.Repeat("A", 40), ""},
		"client secret used": {c.ClientSecret, c.Client.ID},
	} {
		if _, err := env.Credentials.AuthenticateAPIKey(ctx, tc.key, tc.client); !errors.Is(err, principal.ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
}

// TestNoSecretInClear reads every row of every accounts table as text and looks for the
// credentials and the contact's personal data.
func TestNoSecretInClear(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	token, err := env.Credentials.CreateSDKToken(ctx, c.Client.ID, "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"clients", "api_keys", "sdk_tokens", "balances", "ledger", "client_lookups"} {
		for _, secret := range []string{c.APIKey, c.ClientSecret, token.Secret, "tess@example.com", "0011223344", "Tess Ter"} {
			var n int
			err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM accounts.`+table+` t WHERE strpos(t::text, $1) > 0
				OR strpos(t::text, encode(convert_to($1, 'UTF8'), 'hex')) > 0`, secret).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("accounts.%s holds %q in clear", table, secret[:6])
			}
		}
	}
}

func TestRotate(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)

	t.Run("immediate", func(t *testing.T) {
		c := env.Client(t, 0)
		p := mustAuth(t, env, c.APIKey)
		issued, err := env.Credentials.Rotate(ctx, p, c.ClientSecret, 0)
		if err != nil {
			t.Fatal(err)
		}
		if issued.Secret == c.APIKey || issued.Key.Role != principal.RoleAdmin || issued.Key.Name != "default" {
			t.Fatalf("new key %+v", issued.Key)
		}
		if _, err := env.Credentials.AuthenticateAPIKey(ctx, c.APIKey, ""); !errors.Is(err, principal.ErrUnauthenticated) {
			t.Fatalf("old key still works: %v", err)
		}
		mustAuth(t, env, issued.Secret)
	})
	t.Run("with grace", func(t *testing.T) {
		c := env.Client(t, 0)
		issued, err := env.Credentials.Rotate(ctx, mustAuth(t, env, c.APIKey), c.ClientSecret, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		mustAuth(t, env, c.APIKey)
		mustAuth(t, env, issued.Secret)
		keys, total, err := env.Credentials.ListKeys(ctx, c.Client.ID, 10, 0)
		if err != nil || total != 2 {
			t.Fatalf("keys %d, %v", total, err)
		}
		for _, k := range keys {
			if k.Hint == c.APIKey[len(c.APIKey)-4:] && (k.ExpiresAt == nil || time.Until(*k.ExpiresAt) > time.Hour) {
				t.Fatalf("old key expires at %v, want within an hour", k.ExpiresAt)
			}
		}
	})
	t.Run("wrong secret changes nothing", func(t *testing.T) {
		c := env.Client(t, 0)
		other := env.Client(t, 0)
		for _, secret := range []string{"", "nope", other.ClientSecret, c.APIKey} {
			if _, err := env.Credentials.Rotate(ctx, mustAuth(t, env, c.APIKey), secret, 0); !errors.Is(err, principal.ErrUnauthenticated) {
				t.Fatalf("secret %q: err = %v", secret, err)
			}
		}
		mustAuth(t, env, c.APIKey)
	})
	// The sequence: a key in its grace period rotated again made a second "default"
	// ADMIN key and cut the grace short. It is refused and changes nothing.
	t.Run("superseded key", func(t *testing.T) {
		c := env.Client(t, 0)
		old := mustAuth(t, env, c.APIKey)
		issued, err := env.Credentials.Rotate(ctx, old, c.ClientSecret, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, grace := range []time.Duration{0, time.Minute} {
			if _, err := env.Credentials.Rotate(ctx, mustAuth(t, env, c.APIKey), c.ClientSecret, grace); !errors.Is(err, domain.ErrKeySuperseded) {
				t.Fatalf("rotating the superseded key (grace %v): err = %v, want ErrKeySuperseded", grace, err)
			}
		}
		keys, total, err := env.Credentials.ListKeys(ctx, c.Client.ID, 10, 0)
		if err != nil || total != 2 {
			t.Fatalf("%d keys after the refused rotation, want the old and its replacement (%v)", total, err)
		}
		for _, k := range keys {
			if k.ID == old.KeyID && (k.ExpiresAt == nil || time.Until(*k.ExpiresAt) < 59*time.Minute) {
				t.Fatalf("the old key's grace changed: it expires at %v", k.ExpiresAt)
			}
		}
		mustAuth(t, env, c.APIKey)
		// The replacement is not superseded: it rotates as usual.
		if _, err := env.Credentials.Rotate(ctx, mustAuth(t, env, issued.Secret), c.ClientSecret, 0); err != nil {
			t.Fatalf("rotating the replacement: %v", err)
		}
	})
	t.Run("grace out of range", func(t *testing.T) {
		c := env.Client(t, 0)
		if _, err := env.Credentials.Rotate(ctx, mustAuth(t, env, c.APIKey), c.ClientSecret, 8*24*time.Hour); fault.Find(err, fault.InvalidArgument) == nil {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestGenerateFirstKey(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c, err := env.Clients.Create(ctx, clients.CreateRequest{
		Name: "Bootstrap", Contact: domain.Contact{Name: "B", Email: "b@example.com", Phone: "0000"}, WithoutAPIKey: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Credentials.GenerateFirstKey(ctx, c.Client.ID, "mnvsec_"+strings.Repeat("x", 40)); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := env.Credentials.GenerateFirstKey(ctx, "00000000-0000-0000-0000-000000000000", c.ClientSecret); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("unknown client: %v", err)
	}
	issued, err := env.Credentials.GenerateFirstKey(ctx, c.Client.ID, c.ClientSecret)
	if err != nil {
		t.Fatal(err)
	}
	if p := mustAuth(t, env, issued.Secret); p.Role != principal.RoleAdmin {
		t.Fatalf("first key role %s", p.Role)
	}
	if _, err := env.Credentials.GenerateFirstKey(ctx, c.Client.ID, c.ClientSecret); !errors.Is(err, domain.ErrKeyExists) {
		t.Fatalf("second generate: %v", err)
	}
}

func TestRevokeKeepsAnAdmin(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	admin := mustAuth(t, env, c.APIKey)

	if _, err := env.Credentials.RevokeKey(ctx, c.Client.ID, admin.KeyID); !errors.Is(err, domain.ErrLastAdminKey) {
		t.Fatalf("revoking the last admin key: %v", err)
	}
	member, err := env.Credentials.CreateKey(ctx, admin, "reader", principal.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Credentials.RevokeKey(ctx, c.Client.ID, admin.KeyID); !errors.Is(err, domain.ErrLastAdminKey) {
		t.Fatalf("a MEMBER key does not replace the last admin: %v", err)
	}
	if _, err := env.Credentials.RevokeKey(ctx, c.Client.ID, member.Key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Credentials.AuthenticateAPIKey(ctx, member.Secret, ""); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("revoked key works: %v", err)
	}
	other := env.Client(t, 0)
	if _, err := env.Credentials.RevokeKey(ctx, other.Client.ID, admin.KeyID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("revoking another client's key: %v", err)
	}

	// Two ADMIN keys revoked at the same time: one must survive.
	second, err := env.Credentials.CreateKey(ctx, admin, "second admin", principal.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []string{admin.KeyID, second.Key.ID} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = env.Credentials.RevokeKey(ctx, c.Client.ID, id) }()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("concurrent revocations: %v / %v, want exactly one refused", errs[0], errs[1])
	}
}

func TestCreateKeyValidation(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	p := mustAuth(t, env, c.APIKey)
	tests := []struct {
		name    string
		keyName string
		role    principal.Role
		ok      bool
	}{
		{"member", "ci", principal.RoleMember, true},
		{"100 characters", strings.Repeat("n", 100), principal.RoleAdmin, true},
		{"101 characters", strings.Repeat("n", 101), principal.RoleAdmin, false},
		{"blank", "  ", principal.RoleMember, false},
		{"control character", "a\nb", principal.RoleMember, false},
		{"no role", "x", "", false},
		{"unknown role", "x", "OWNER", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			issued, err := env.Credentials.CreateKey(ctx, p, tt.keyName, tt.role)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := mustAuth(t, env, issued.Secret); got.Role != tt.role {
					t.Fatalf("role %s", got.Role)
				}
				return
			}
			if fault.Find(err, fault.InvalidArgument) == nil {
				t.Fatalf("err = %v, want invalid", err)
			}
		})
	}
}

func TestSDKTokens(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0, domain.FeatureVerify)
	other := env.Client(t, 0)
	ttl := time.Hour
	issued, err := env.Credentials.CreateSDKToken(ctx, c.Client.ID, "ios app", &ttl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(issued.Secret, principal.SDKTokenPrefix) || issued.Token.ExpiresAt == nil {
		t.Fatalf("issued %+v", issued.Token)
	}
	p, err := env.Credentials.AuthenticateSDKToken(ctx, issued.Secret, c.Client.ID)
	if err != nil || p.SDKTokenID != issued.Token.ID || p.KeyID != "" {
		t.Fatalf("authenticate: %+v, %v", p, err)
	}
	if _, err := env.Credentials.AuthenticateSDKToken(ctx, issued.Secret, other.Client.ID); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("token of another client: %v", err)
	}
	if _, err := env.Credentials.AuthenticateAPIKey(ctx, issued.Secret, c.Client.ID); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("SDK token as an API key: %v", err)
	}
	if _, err := env.Credentials.RevokeSDKToken(ctx, other.Client.ID, issued.Token.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("revoke from another client: %v", err)
	}
	if _, err := env.Credentials.RevokeSDKToken(ctx, c.Client.ID, issued.Token.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Credentials.AuthenticateSDKToken(ctx, issued.Secret, c.Client.ID); !errors.Is(err, principal.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v", err)
	}
	short := 30 * time.Second
	if _, err := env.Credentials.CreateSDKToken(ctx, c.Client.ID, "x", &short); fault.Find(err, fault.InvalidArgument) == nil {
		t.Fatalf("ttl 30s: %v", err)
	}
}

func mustAuth(t *testing.T, env *accountstest.Env, key string) principal.Principal {
	t.Helper()
	p, err := env.Credentials.AuthenticateAPIKey(context.Background(), key, "")
	if err != nil {
		t.Fatalf("key does not authenticate: %v", err)
	}
	return p
}

func TestCallerKey(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	other := env.Client(t, 0)
	admin := mustAuth(t, env, c.APIKey)
	member, err := env.Credentials.CreateKey(ctx, admin, "reader", principal.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	memberP := mustAuth(t, env, member.Secret)
	otherP := mustAuth(t, env, other.APIKey)
	// Resolved before its key is revoked: the call that carries it is already under way.
	revoked, err := env.Credentials.CreateKey(ctx, admin, "gone", principal.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	revokedP := mustAuth(t, env, revoked.Secret)
	if _, err := env.Credentials.RevokeKey(ctx, c.Client.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		p        principal.Principal
		wantID   string
		wantRole principal.Role
		wantName string
		wantErr  error
	}{
		{name: "ADMIN key", p: admin, wantID: admin.KeyID, wantRole: principal.RoleAdmin, wantName: "default"},
		{name: "MEMBER key", p: memberP, wantID: member.Key.ID, wantRole: principal.RoleMember, wantName: "reader"},
		{name: "revoked since it was resolved", p: revokedP, wantErr: principal.ErrUnauthenticated},
		{name: "another client's key id", p: principal.Principal{ClientID: c.Client.ID, KeyID: otherP.KeyID}, wantErr: principal.ErrUnauthenticated},
		{name: "an SDK token, no key", p: principal.Principal{ClientID: c.Client.ID, SDKTokenID: "t"}, wantErr: principal.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := env.Credentials.CallerKey(ctx, tt.p)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != tt.wantID || k.ClientID != c.Client.ID || k.Role != tt.wantRole || k.Name != tt.wantName || len(k.Hint) != 4 {
				t.Fatalf("key %+v", k)
			}
		})
	}
}
