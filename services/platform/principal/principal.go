// Package principal is who calls: the kinds of credential and their shapes (Kind, the one table
// of them), the principal a client credential resolves to, and that principal as it travels
// between mnv's processes (mnv.principal.v1). Accounts issues and resolves credentials, the
// gateway resolves each request's once and asserts the principal, and the services' guards
// (platform/auth) believe the assertion or resolve the credential themselves; all of them read
// this, and none links gRPC through it.
package principal

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
	// KeyID is the API key used; empty for an SDK token or a session.
	KeyID string
	// SDKTokenID is the SDK token used; empty for an API key or a session.
	SDKTokenID string
	// SessionID is the console session used, UserID its person; empty for a key or token.
	SessionID string
	UserID    string
	// Role is the API key's, or the person's in the client.
	Role Role
	Status     Status
	// Features enabled for the client (VERIFY, CONNECT, STUCK_PLUS, SANDBOX).
	Features []string
	// Operators the client enabled, with their methods.
	Operators Operators
	// ValidFor is how long the credential still worked when it was resolved, when it expires
	// by itself (a rotated key's grace, an SDK token's lifetime); nil when it does not. A
	// principal cache keeps the principal no longer.
	ValidFor *time.Duration
	// StepUpValidFor is how much longer the session's last step-up counts, when it does.
	StepUpValidFor *time.Duration
}

// Kind is the kind of credential p was resolved from: the one of its ids that is set; 0 when
// none or both are, which no principal accounts resolves has.
func (p Principal) Kind() Kind {
	switch {
	case p.KeyID != "" && p.SDKTokenID == "" && p.SessionID == "":
		return APIKey
	case p.SDKTokenID != "" && p.KeyID == "" && p.SessionID == "":
		return SDKToken
	case p.SessionID != "" && p.KeyID == "" && p.SDKTokenID == "" && p.UserID != "":
		return Session
	}
	return 0
}

// SteppedUp reports whether p is a session whose step-up still counts.
func (p Principal) SteppedUp() bool {
	return p.Kind() == Session && p.StepUpValidFor != nil && *p.StepUpValidFor > 0
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
