package credentials

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
)

// Store is what credentials need of the service's storage. Lookups of one key, token or client
// that find none answer fault.ErrNotFound. The changes that stop a key or token (RevokeKey,
// RetireKey, RevokeSDKToken) tell the principal caches in their own transaction.
type Store interface {
	// GetClient reads a client; lock holds its row until the transaction ends, which
	// serialises the credential changes of one client.
	GetClient(ctx context.Context, id string, lock bool) (domain.ClientRow, error)

	// ClientOfKey finds the client of the API key with fingerprint fp, for a key sent without
	// its client id.
	ClientOfKey(ctx context.Context, fp []byte) (string, error)
	// KeyByFingerprint finds the usable API key of the client with fingerprint fp.
	KeyByFingerprint(ctx context.Context, clientID string, fp []byte) (domain.KeyAuth, error)
	// TouchKeys records that keys (pairs of client id and key id) were used now.
	TouchKeys(ctx context.Context, keys [][2]string) error
	// InsertKey stores a new key, findable by its fingerprint alone too (ClientOfKey).
	InsertKey(ctx context.Context, k domain.APIKey, fp []byte) (domain.APIKey, error)
	// UsableKey reads a usable key of the client; another client's key is not found.
	UsableKey(ctx context.Context, clientID, keyID string) (domain.APIKey, error)
	ListUsableKeys(ctx context.Context, clientID string, limit, offset int64) ([]domain.APIKey, int64, error)
	// CountUsableKeys counts the client's usable keys and, of them, the ADMIN keys that do not
	// expire by themselves, exceptID left out.
	CountUsableKeys(ctx context.Context, clientID, exceptID string) (all, lastingAdmins int, err error)
	RevokeKey(ctx context.Context, clientID, keyID string) error
	// RetireKey marks a rotated key as replaced: it stops at once (grace 0, nil returned) or
	// after grace, at the time returned.
	RetireKey(ctx context.Context, clientID, keyID, replacedBy string, grace time.Duration) (*time.Time, error)

	// SDKTokenByFingerprint finds the usable SDK token of the client with fingerprint fp.
	SDKTokenByFingerprint(ctx context.Context, clientID string, fp []byte) (domain.SDKTokenAuth, error)
	InsertSDKToken(ctx context.Context, t domain.SDKToken, fp []byte) (domain.SDKToken, error)
	ListUsableSDKTokens(ctx context.Context, clientID string, limit, offset int64) ([]domain.SDKToken, int64, error)
	// RevokeSDKToken stops a usable token of the client and returns it as it was.
	RevokeSDKToken(ctx context.Context, clientID, tokenID string) (domain.SDKToken, error)

	// Emit writes events in the store's transaction (refused outside one), so each commits
	// with its fact.
	Emit(ctx context.Context, evs ...events.Event) error
}

// Tx runs a function with the store inside one transaction, committed when it returns nil.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}
