package credentials_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// keyData is an api_key.* event's data as a receiver reads it.
type keyData struct {
	KeyID      string  `json:"keyId"`
	Name       string  `json:"name"`
	Role       string  `json:"role"`
	Hint       string  `json:"hint"`
	ReplacedBy *string `json:"replacedBy"`
	GraceUntil *string `json:"graceUntil"`
}

func decodeKey(t *testing.T, e events.Event) keyData {
	t.Helper()
	var d keyData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestKeyEvents: every change of a key writes its event with the key's description (never the
// key), and a change refused writes none.
func TestKeyEvents(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)

	tests := []struct {
		name string
		// act changes the keys of client c and returns the key id the event must name.
		act      func(t *testing.T, c clientKeys) (keyID string, err error)
		wantType []string // the events after the one of the first key, in order
		check    func(t *testing.T, c clientKeys, d keyData)
	}{
		{
			name: "created",
			act: func(t *testing.T, c clientKeys) (string, error) {
				k, err := env.Credentials.CreateKey(ctx, mustAuth(t, env, c.apiKey), "ci", principal.RoleMember)
				return k.Key.ID, err
			},
			wantType: []string{events.APIKeyCreated},
			check: func(t *testing.T, _ clientKeys, d keyData) {
				if d.Name != "ci" || d.Role != "MEMBER" || len(d.Hint) != 4 || d.ReplacedBy != nil || d.GraceUntil != nil {
					t.Fatalf("data %+v", d)
				}
			},
		},
		{
			name: "revoked",
			act: func(t *testing.T, c clientKeys) (string, error) {
				k, err := env.Credentials.CreateKey(ctx, mustAuth(t, env, c.apiKey), "ci", principal.RoleMember)
				if err != nil {
					return "", err
				}
				_, err = env.Credentials.RevokeKey(ctx, c.id, k.Key.ID)
				return k.Key.ID, err
			},
			wantType: []string{events.APIKeyCreated, events.APIKeyRevoked},
			check: func(t *testing.T, _ clientKeys, d keyData) {
				if d.Name != "ci" || d.Role != "MEMBER" {
					t.Fatalf("data %+v", d)
				}
			},
		},
		{
			name: "rotated at once",
			act: func(t *testing.T, c clientKeys) (string, error) {
				p := mustAuth(t, env, c.apiKey)
				_, err := env.Credentials.Rotate(ctx, p, c.secret, 0)
				return p.KeyID, err
			},
			wantType: []string{events.APIKeyRotated},
			check: func(t *testing.T, c clientKeys, d keyData) {
				if d.ReplacedBy == nil || *d.ReplacedBy == d.KeyID || d.GraceUntil != nil || d.Role != "ADMIN" {
					t.Fatalf("data %+v", d)
				}
			},
		},
		{
			name: "rotated with grace",
			act: func(t *testing.T, c clientKeys) (string, error) {
				p := mustAuth(t, env, c.apiKey)
				_, err := env.Credentials.Rotate(ctx, p, c.secret, time.Hour)
				return p.KeyID, err
			},
			wantType: []string{events.APIKeyRotated},
			check: func(t *testing.T, _ clientKeys, d keyData) {
				if d.ReplacedBy == nil || d.GraceUntil == nil {
					t.Fatalf("data %+v", d)
				}
				until, err := time.Parse(events.TimeLayout, *d.GraceUntil)
				if err != nil || until.Before(time.Now().Add(59*time.Minute)) || until.After(time.Now().Add(61*time.Minute)) {
					t.Fatalf("graceUntil %s, want in an hour", *d.GraceUntil)
				}
			},
		},
		{
			name: "refused: the last ADMIN key",
			act: func(t *testing.T, c clientKeys) (string, error) {
				p := mustAuth(t, env, c.apiKey)
				_, err := env.Credentials.RevokeKey(ctx, c.id, p.KeyID)
				if !errors.Is(err, domain.ErrLastAdminKey) {
					t.Fatalf("err = %v, want ErrLastAdminKey", err)
				}
				return "", nil
			},
		},
		{
			name: "refused: rotating a superseded key",
			act: func(t *testing.T, c clientKeys) (string, error) {
				p := mustAuth(t, env, c.apiKey)
				if _, err := env.Credentials.Rotate(ctx, p, c.secret, time.Hour); err != nil {
					return "", err
				}
				_, err := env.Credentials.Rotate(ctx, p, c.secret, time.Hour)
				if !errors.Is(err, domain.ErrKeySuperseded) {
					t.Fatalf("err = %v, want ErrKeySuperseded", err)
				}
				return p.KeyID, nil
			},
			wantType: []string{events.APIKeyRotated}, // the first rotation's alone
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			created := env.Client(t, 0)
			c := clientKeys{id: created.Client.ID, apiKey: created.APIKey, secret: created.ClientSecret}
			first := env.Events(t, c.id)
			// The first key, issued with the client, has its event too.
			if len(first) != 1 || first[0].Type != events.APIKeyCreated || decodeKey(t, first[0]).Role != "ADMIN" {
				t.Fatalf("events of a new client: %+v", first)
			}
			keyID, err := tt.act(t, c)
			if err != nil {
				t.Fatal(err)
			}
			got := env.Events(t, c.id)[1:]
			if len(got) != len(tt.wantType) {
				t.Fatalf("%d events %+v, want %v", len(got), got, tt.wantType)
			}
			for i, e := range got {
				if e.Type != tt.wantType[i] {
					t.Fatalf("event %d is %s, want %s", i, e.Type, tt.wantType[i])
				}
			}
			if len(got) == 0 {
				return
			}
			last := decodeKey(t, got[len(got)-1])
			if last.KeyID != keyID {
				t.Fatalf("event names key %s, want %s", last.KeyID, keyID)
			}
			if tt.check != nil {
				tt.check(t, c, last)
			}
		})
	}
}

type clientKeys struct{ id, apiKey, secret string }

// TestKeyEventFollowsItsTransaction: when the key's transaction fails at commit, after its
// event was written, neither the key nor the event remains.
func TestKeyEventFollowsItsTransaction(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	// A deferred check fails the commit of a key named "doomed", after everything else ran.
	if _, err := env.Pool.Exec(ctx, `
		CREATE FUNCTION accounts.doom() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF NEW.name = 'doomed' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER doom AFTER INSERT ON accounts.api_keys
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION accounts.doom();`); err != nil {
		t.Fatal(err)
	}
	p := mustAuth(t, env, c.APIKey)
	if _, err := env.Credentials.CreateKey(ctx, p, "doomed", principal.RoleMember); err == nil {
		t.Fatal("the doomed key was created")
	}
	if got := env.Events(t, c.Client.ID, events.APIKeyCreated); len(got) != 1 {
		t.Fatalf("%d api_key.created events, want the first key's alone", len(got))
	}
	if _, err := env.Credentials.CreateKey(ctx, p, "kept", principal.RoleMember); err != nil {
		t.Fatal(err)
	}
	if got := env.Events(t, c.Client.ID, events.APIKeyCreated); len(got) != 2 || decodeKey(t, got[1]).Name != "kept" {
		t.Fatalf("events %+v, want the first key's and kept's", got)
	}
}
