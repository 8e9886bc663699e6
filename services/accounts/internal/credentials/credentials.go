// Package credentials issues and checks the credentials of clients: API keys with roles, the
// client secret, and SDK tokens. Only keyed fingerprints are stored; a credential is shown once,
// when it is issued.
package credentials

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Limits of the requests.
const (
	MaxGrace        = 7 * 24 * time.Hour
	MinSDKTokenTTL  = time.Minute
	MaxSDKTokenTTL  = 365 * 24 * time.Hour
	touchEvery      = time.Minute
	defaultKeyName  = "default"
	touchQueueDepth = 1024
)

// nameRule bounds the names of keys and the labels of SDK tokens.
var nameRule = freetext.Rule{Max: 100}

// Service issues and checks credentials.
type Service struct {
	st  Store
	tx  Tx
	fp  *crypto.Fingerprinter
	log *zap.Logger

	// lastUsed throttles last_used_at writes to one per key per touchEvery per process: a key
	// used a thousand times a second must not cost a thousand row updates.
	mu       sync.Mutex
	lastUsed map[string]time.Time
	touches  chan [2]string // client id, key id
}

// New returns a Service over st (outside any transaction) and tx. Run must run for last-used
// times to be recorded.
func New(st Store, tx Tx, fp *crypto.Fingerprinter, log *zap.Logger) *Service {
	return &Service{st: st, tx: tx, fp: fp, log: log, lastUsed: map[string]time.Time{}, touches: make(chan [2]string, touchQueueDepth)}
}

// Run records last-used times in batches until ctx ends.
func (s *Service) Run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var keys [][2]string
	flush := func() {
		if len(keys) == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := s.st.TouchKeys(fctx, keys); err != nil {
			s.log.Warn("record key use", zap.Error(err), zap.Int("keys", len(keys)))
		}
		cancel()
		keys = keys[:0]
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case k := <-s.touches:
			keys = append(keys, k)
		case <-tick.C:
			flush()
		}
	}
}

func (s *Service) touch(clientID, keyID string) {
	now := time.Now()
	s.mu.Lock()
	last, ok := s.lastUsed[keyID]
	due := !ok || now.Sub(last) >= touchEvery
	if due {
		s.lastUsed[keyID] = now
	}
	s.mu.Unlock()
	if due {
		select {
		case s.touches <- [2]string{clientID, keyID}:
		default: // Never slow a request down for a last-used time.
		}
	}
}

// AuthenticateAPIKey resolves an API key (of clientID, when not empty) to a principal.
func (s *Service) AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (principal.Principal, error) {
	// The row is found by the client and the key's fingerprint, so the key is proved, and is
	// the client's. A key sent without its client id (under /v1/api/me/) is first mapped to
	// its client by its fingerprint.
	fp := s.fp.Sum(apiKey)
	keyClient := clientID
	if keyClient == "" {
		var err error
		if keyClient, err = s.st.ClientOfKey(ctx, fp); errors.Is(err, fault.ErrNotFound) {
			return principal.Principal{}, principal.ErrUnauthenticated
		} else if err != nil {
			return principal.Principal{}, err
		}
	}
	a, err := s.st.KeyByFingerprint(ctx, keyClient, fp)
	if errors.Is(err, fault.ErrNotFound) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	if err != nil {
		return principal.Principal{}, err
	}
	if clientID != "" && clientID != a.Key.ClientID {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	s.touch(a.Key.ClientID, a.Key.ID)
	return principal.Principal{ClientID: a.Key.ClientID, KeyID: a.Key.ID, Role: a.Key.Role, Status: a.Status, Features: a.Features, Operators: a.Operators, ValidFor: a.ValidFor}, nil
}

// AuthenticateSDKToken resolves an SDK token of clientID to a principal.
func (s *Service) AuthenticateSDKToken(ctx context.Context, token, clientID string) (principal.Principal, error) {
	// Found by the client and the token's fingerprint, as in AuthenticateAPIKey.
	a, err := s.st.SDKTokenByFingerprint(ctx, clientID, s.fp.Sum(token))
	if errors.Is(err, fault.ErrNotFound) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	if err != nil {
		return principal.Principal{}, err
	}
	if clientID != a.ClientID {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	return principal.Principal{ClientID: a.ClientID, SDKTokenID: a.TokenID, Status: a.Status, Features: a.Features, Operators: a.Operators, ValidFor: a.ValidFor}, nil
}

// AuthenticateClientSecret resolves a client id and its client secret to the client's principal
// (no key), by the check GenerateFirstKey makes: the secret's fingerprint against the client's,
// in constant time. An unknown client is as unauthenticated as a wrong secret.
func (s *Service) AuthenticateClientSecret(ctx context.Context, clientID, secret string) (principal.Principal, error) {
	if !principal.WellFormedClientSecret(secret) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	c, err := s.st.GetClient(ctx, clientID, false)
	if errors.Is(err, fault.ErrNotFound) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	if err != nil {
		return principal.Principal{}, err
	}
	if !s.fp.Matches(secret, c.SecretFP) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	return principal.Principal{ClientID: c.ID, Status: c.Status, Features: c.Features, Operators: c.Operators}, nil
}

// ClientPrincipal reads a client's principal (no key) by its id, for a caller that already
// proved the client earlier (verification's CAMARA facade, holding an access token) and must
// apply its status, features and operators of now. fault.ErrNotFound for an unknown client.
func (s *Service) ClientPrincipal(ctx context.Context, clientID string) (principal.Principal, error) {
	c, err := s.st.GetClient(ctx, clientID, false)
	if err != nil {
		return principal.Principal{}, err
	}
	return principal.Principal{ClientID: c.ID, Status: c.Status, Features: c.Features, Operators: c.Operators}, nil
}

// NewClientSecret returns a fresh client secret and its fingerprint.
func (s *Service) NewClientSecret() (secret string, fp []byte) {
	secret = crypto.NewToken(principal.ClientSecretPrefix)
	return secret, s.fp.Sum(secret)
}

// Issued is a newly issued key: its description and the key itself, to be shown once.
type Issued struct {
	Key    domain.APIKey
	Secret string
}

// IssueKey stores a new key with st, a store inside the caller's transaction, and writes its
// api_key.created event in it.
func (s *Service) IssueKey(ctx context.Context, st Store, clientID, name string, role principal.Role) (Issued, error) {
	out, err := s.issue(ctx, st, clientID, name, role)
	if err != nil {
		return Issued{}, err
	}
	return out, emitKey(ctx, st, events.APIKeyCreated, out.Key, nil, nil)
}

// issue stores a new key with st, without an event: a rotation's new key is told by the
// rotation's own event (api_key.rotated names it as replacedBy).
func (s *Service) issue(ctx context.Context, st Store, clientID, name string, role principal.Role) (Issued, error) {
	raw := crypto.NewToken(principal.APIKeyPrefix)
	k, err := st.InsertKey(ctx, domain.APIKey{
		ID: uuid.NewString(), ClientID: clientID, Name: name, Role: role, Hint: crypto.Hint(raw),
	}, s.fp.Sum(raw))
	if err != nil {
		return Issued{}, err
	}
	return Issued{Key: k, Secret: raw}, nil
}

// emitKey writes the event typ of key k in st's transaction; replacedBy and graceUntil are a
// rotation's.
func emitKey(ctx context.Context, st Store, typ string, k domain.APIKey, replacedBy *string, graceUntil *time.Time) error {
	data := events.APIKeyData{KeyID: k.ID, Name: k.Name, Role: string(k.Role), Hint: k.Hint, ReplacedBy: replacedBy}
	if graceUntil != nil {
		t := events.Time(*graceUntil)
		data.GraceUntil = &t
	}
	e, err := events.New(k.ClientID, typ, data, time.Now())
	if err != nil {
		return err
	}
	return st.Emit(ctx, e)
}

// withClient runs fn in a transaction holding the client's row lock, after checking the client
// secret; fn gets the client as locked. Key changes of one client are serialised this way, so
// two concurrent revocations cannot both remove "the other" ADMIN key.
func (s *Service) withClient(ctx context.Context, clientID, secret string, fn func(st Store, c domain.ClientRow) error) error {
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		c, err := st.GetClient(ctx, clientID, true)
		if err != nil {
			return err
		}
		if !s.fp.Matches(secret, c.SecretFP) {
			return principal.ErrUnauthenticated
		}
		return fn(st, c)
	})
}

// GenerateFirstKey issues the first (ADMIN) key of a client that proves itself with its secret.
func (s *Service) GenerateFirstKey(ctx context.Context, clientID, secret string) (Issued, error) {
	if !principal.WellFormedClientSecret(secret) {
		return Issued{}, principal.ErrUnauthenticated
	}
	var out Issued
	err := s.withClient(ctx, clientID, secret, func(st Store, c domain.ClientRow) error {
		if c.Status != principal.StatusActive {
			return fault.ErrSuspended
		}
		n, _, err := st.CountUsableKeys(ctx, clientID, "")
		if err != nil {
			return err
		}
		if n > 0 {
			return domain.ErrKeyExists
		}
		out, err = s.IssueKey(ctx, st, clientID, defaultKeyName, principal.RoleAdmin)
		return err
	})
	if errors.Is(err, fault.ErrNotFound) {
		// Never confirm that a client id exists to someone without its secret.
		return Issued{}, principal.ErrUnauthenticated
	}
	return out, err
}

// Rotate replaces the key p authenticated with by a new key of the same name and role. The old
// key stops at once, or after grace. A key already replaced (living out its grace) cannot be
// rotated: one rotation, one replacement.
func (s *Service) Rotate(ctx context.Context, p principal.Principal, secret string, grace time.Duration) (Issued, error) {
	if grace < 0 || grace > MaxGrace {
		return Issued{}, fault.Invalid("oldKeyGraceSeconds", "must be between 0 and %d", int(MaxGrace.Seconds()))
	}
	if !principal.WellFormedClientSecret(secret) {
		return Issued{}, principal.ErrUnauthenticated
	}
	var out Issued
	err := s.withClient(ctx, p.ClientID, secret, func(st Store, _ domain.ClientRow) error {
		old, err := st.UsableKey(ctx, p.ClientID, p.KeyID)
		if errors.Is(err, fault.ErrNotFound) {
			// Revoked or expired since the call was authenticated.
			return principal.ErrUnauthenticated
		}
		if err != nil {
			return err
		}
		if old.Superseded {
			return domain.ErrKeySuperseded
		}
		if out, err = s.issue(ctx, st, p.ClientID, old.Name, old.Role); err != nil {
			return err
		}
		until, err := st.RetireKey(ctx, p.ClientID, old.ID, out.Key.ID, grace)
		if err != nil {
			return err
		}
		return emitKey(ctx, st, events.APIKeyRotated, old, &out.Key.ID, until)
	})
	return out, err
}

// RotateByID replaces the client's key keyID, for an ADMIN (a key or a person) who need not hold
// it: the console's rotation. The rest is Rotate's. until is when the old key stops (nil: now).
func (s *Service) RotateByID(ctx context.Context, clientID, keyID string, grace time.Duration) (out Issued, until *time.Time, err error) {
	if grace < 0 || grace > MaxGrace {
		return Issued{}, nil, fault.Invalid("oldKeyGraceSeconds", "must be between 0 and %d", int(MaxGrace.Seconds()))
	}
	if _, err := uuid.Parse(keyID); err != nil {
		return Issued{}, nil, fault.ErrNotFound
	}
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if _, err := st.GetClient(ctx, clientID, true); err != nil {
			return err
		}
		old, err := st.UsableKey(ctx, clientID, keyID)
		if err != nil {
			return err
		}
		if old.Superseded {
			return domain.ErrKeySuperseded
		}
		if out, err = s.issue(ctx, st, clientID, old.Name, old.Role); err != nil {
			return err
		}
		if until, err = st.RetireKey(ctx, clientID, old.ID, out.Key.ID, grace); err != nil {
			return err
		}
		return emitKey(ctx, st, events.APIKeyRotated, old, &out.Key.ID, until)
	})
	return out, until, err
}

// CreateKey issues a further named key with a role.
func (s *Service) CreateKey(ctx context.Context, p principal.Principal, name string, role principal.Role) (Issued, error) {
	if err := nameRule.Check("name", name); err != nil {
		return Issued{}, err
	}
	if role != principal.RoleAdmin && role != principal.RoleMember {
		return Issued{}, fault.Invalid("role", "must be ADMIN or MEMBER")
	}
	var out Issued
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		out, err = s.IssueKey(ctx, st, p.ClientID, name, role)
		return err
	})
	return out, err
}

// ListKeys reads a page of the client's usable keys.
func (s *Service) ListKeys(ctx context.Context, clientID string, limit, offset int64) ([]domain.APIKey, int64, error) {
	return s.st.ListUsableKeys(ctx, clientID, limit, offset)
}

// CallerKey reads the API key p called with. A key revoked or expired since p was resolved is
// ErrUnauthenticated, as the call would have been a moment earlier: the caller learns that its
// key stopped, never that the key exists.
func (s *Service) CallerKey(ctx context.Context, p principal.Principal) (domain.APIKey, error) {
	if p.KeyID == "" {
		return domain.APIKey{}, principal.ErrUnauthenticated
	}
	k, err := s.st.UsableKey(ctx, p.ClientID, p.KeyID)
	if errors.Is(err, fault.ErrNotFound) {
		return domain.APIKey{}, principal.ErrUnauthenticated
	}
	return k, err
}

// CountKeys counts the client's usable keys.
func (s *Service) CountKeys(ctx context.Context, clientID string) (int, error) {
	n, _, err := s.st.CountUsableKeys(ctx, clientID, "")
	return n, err
}

// RevokeKey stops a key of the client at once. The client must keep one lasting ADMIN key.
func (s *Service) RevokeKey(ctx context.Context, clientID, keyID string) (domain.APIKey, error) {
	if _, err := uuid.Parse(keyID); err != nil {
		return domain.APIKey{}, fault.ErrNotFound
	}
	var k domain.APIKey
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if _, err := st.GetClient(ctx, clientID, true); err != nil {
			return err
		}
		var err error
		if k, err = st.UsableKey(ctx, clientID, keyID); err != nil {
			return err
		}
		if k.Role == principal.RoleAdmin {
			_, admins, err := st.CountUsableKeys(ctx, clientID, keyID)
			if err != nil {
				return err
			}
			if admins == 0 {
				return domain.ErrLastAdminKey
			}
		}
		if err := st.RevokeKey(ctx, clientID, keyID); err != nil {
			return err
		}
		return emitKey(ctx, st, events.APIKeyRevoked, k, nil, nil)
	})
	return k, err
}

// IssuedSDKToken is a newly issued SDK token, to be shown once.
type IssuedSDKToken struct {
	Token  domain.SDKToken
	Secret string
}

// CreateSDKToken issues an SDK token with a label and an optional lifetime.
func (s *Service) CreateSDKToken(ctx context.Context, clientID, label string, ttl *time.Duration) (IssuedSDKToken, error) {
	if err := nameRule.Check("label", label); err != nil {
		return IssuedSDKToken{}, err
	}
	var expires *time.Time
	if ttl != nil {
		if *ttl < MinSDKTokenTTL || *ttl > MaxSDKTokenTTL {
			return IssuedSDKToken{}, fault.Invalid("ttlSeconds", "must be between %d and %d", int(MinSDKTokenTTL.Seconds()), int(MaxSDKTokenTTL.Seconds()))
		}
		t := time.Now().Add(*ttl)
		expires = &t
	}
	raw := crypto.NewToken(principal.SDKTokenPrefix)
	t, err := s.st.InsertSDKToken(ctx, domain.SDKToken{
		ID: uuid.NewString(), ClientID: clientID, Label: label, Hint: crypto.Hint(raw), ExpiresAt: expires,
	}, s.fp.Sum(raw))
	if err != nil {
		return IssuedSDKToken{}, err
	}
	return IssuedSDKToken{Token: t, Secret: raw}, nil
}

// ListSDKTokens reads a page of the client's usable SDK tokens.
func (s *Service) ListSDKTokens(ctx context.Context, clientID string, limit, offset int64) ([]domain.SDKToken, int64, error) {
	return s.st.ListUsableSDKTokens(ctx, clientID, limit, offset)
}

// RevokeSDKToken stops an SDK token of the client at once.
func (s *Service) RevokeSDKToken(ctx context.Context, clientID, tokenID string) (domain.SDKToken, error) {
	if _, err := uuid.Parse(tokenID); err != nil {
		return domain.SDKToken{}, fault.ErrNotFound
	}
	return s.st.RevokeSDKToken(ctx, clientID, tokenID)
}
