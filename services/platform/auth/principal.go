// Package auth holds who a caller is and how every service decides it: the credential formats,
// the metadata that carries them, and a gRPC interceptor that enforces a per-method policy.
// Health checks need no credential; every other method needs the one its rule names, and a
// method without a rule is refused, so a new RPC is closed until someone decides otherwise.
package auth

import (
	"context"
	"slices"
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
