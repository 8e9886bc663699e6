// Package identity is who a client caller is — the principal the auth interceptor resolves from
// a credential — apart from how it is resolved, so that the rules of every service can read it
// without linking gRPC.
package identity

import (
	"context"
	"slices"
	"time"
)

// Role of an API key.
type Role string

// Roles.
const (
	RoleAdmin  Role = "ADMIN"
	RoleMember Role = "MEMBER"
)

// Status of a client.
type Status string

// Client statuses.
const (
	StatusActive    Status = "ACTIVE"
	StatusSuspended Status = "SUSPENDED"
)

// Principal is an authenticated client: who is calling, through which credential.
type Principal struct {
	ClientID string
	// KeyID is the API key used; empty for an SDK token.
	KeyID string
	// SDKTokenID is the SDK token used; empty for an API key.
	SDKTokenID string
	Role       Role
	Status     Status
	// Features enabled for the client (VERIFY, CONNECT, STUCK_PLUS, SANDBOX).
	Features []string
	// Operators the client enabled, with their methods.
	Operators Operators
	// ValidFor is how long the credential still worked when it was resolved, when it expires
	// by itself (a rotated key's grace, an SDK token's lifetime); nil when it does not. A
	// principal cache keeps the principal no longer.
	ValidFor *time.Duration
}

// Has reports whether the client has feature enabled.
func (p Principal) Has(feature string) bool { return slices.Contains(p.Features, feature) }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the interceptor put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
