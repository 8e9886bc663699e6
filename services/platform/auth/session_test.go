package auth_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestGuardSessions: a person's session where a rule takes it, with the person's role and the
// step-up the rule asks; nowhere else.
func TestGuardSessions(t *testing.T) {
	const (
		mKeyOrSession      = "/test.Svc/KeyOrSession"
		mKeyOrSessionAdmin = "/test.Svc/KeyOrSessionAdmin"
		mKeyOrSessionStep  = "/test.Svc/KeyOrSessionStepUp"
		mSessionOnly       = "/test.Svc/SessionOnly"
	)
	policy := auth.Policy{
		mKey:               {Credential: principal.APIKey},
		mKeyOrSession:      {Credential: principal.APIKey, Session: true},
		mKeyOrSessionAdmin: {Credential: principal.APIKey, Session: true, AdminRole: true},
		mKeyOrSessionStep:  {Credential: principal.APIKey, Session: true, AdminRole: true, StepUp: true},
		mSessionOnly:       {Credential: principal.Session},
	}
	fresh := 3 * time.Minute
	person := func(role principal.Role, stepUp *time.Duration) principal.Principal {
		return principal.Principal{ClientID: clientID, SessionID: "s1", UserID: "u1", Role: role, Status: principal.StatusActive, StepUpValidFor: stepUp}
	}
	token := crypto.NewToken(principal.SessionPrefix)
	apiKey := crypto.NewToken(principal.APIKeyPrefix)
	sess := metadata.Pairs(principal.Session.MD(), token)
	type want struct {
		code   codes.Code
		reason fault.Reason
		kind   principal.Kind
	}
	tests := []struct {
		name   string
		method string
		md     metadata.MD
		p      principal.Principal
		want   want
	}{
		{"a session where a key is asked: refused", mKey, sess, person(principal.RoleAdmin, &fresh), want{codes.Unauthenticated, fault.Unauthenticated, 0}},
		{"a session where the rule takes it", mKeyOrSession, sess, person(principal.RoleMember, nil), want{codes.OK, "", principal.Session}},
		{"a MEMBER's session on an ADMIN rule", mKeyOrSessionAdmin, sess, person(principal.RoleMember, &fresh), want{codes.PermissionDenied, fault.PermissionDenied, 0}},
		{"an ADMIN's session on an ADMIN rule", mKeyOrSessionAdmin, sess, person(principal.RoleAdmin, nil), want{codes.OK, "", principal.Session}},
		{"no step-up where one is asked", mKeyOrSessionStep, sess, person(principal.RoleAdmin, nil), want{codes.PermissionDenied, fault.StepUpRequired, 0}},
		{"a step-up that ran out", mKeyOrSessionStep, sess, person(principal.RoleAdmin, new(time.Duration)), want{codes.PermissionDenied, fault.StepUpRequired, 0}},
		{"a fresh step-up", mKeyOrSessionStep, sess, person(principal.RoleAdmin, &fresh), want{codes.OK, "", principal.Session}},
		{"a session-only rule", mSessionOnly, sess, person(principal.RoleMember, nil), want{codes.OK, "", principal.Session}},
		{"a session-only rule without one", mSessionOnly, metadata.Pairs("x-api-key", apiKey), person(principal.RoleAdmin, nil), want{codes.Unauthenticated, fault.Unauthenticated, 0}},
		{"a malformed session", mSessionOnly, metadata.Pairs(principal.Session.MD(), "mnvses_short"), person(principal.RoleAdmin, nil), want{codes.Unauthenticated, fault.Unauthenticated, 0}},
		{"a key with the session: the key decides, no step-up asked", mKeyOrSessionStep, metadata.Pairs("x-api-key", apiKey, principal.Session.MD(), token),
			principal.Principal{ClientID: clientID, KeyID: "k1", Role: principal.RoleAdmin, Status: principal.StatusActive}, want{codes.OK, "", principal.APIKey}},
		{"a key's principal for a session: not believed", mKeyOrSession, sess, principal.Principal{ClientID: clientID, KeyID: "k1", Role: principal.RoleAdmin, Status: principal.StatusActive}, want{codes.Unauthenticated, fault.Unauthenticated, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := auth.NewGuard(policy, &fakeAuthn{principal: tt.p}, auth.NewServiceTokens(callers, adminToken))
			ctx, err := g.Check(metadata.NewIncomingContext(context.Background(), tt.md), tt.method)
			if code := status.Code(err); code != tt.want.code {
				t.Fatalf("Check = %v, want %v", err, tt.want.code)
			}
			if err != nil {
				if r := apierr.Parse(err).Reason; r != tt.want.reason {
					t.Fatalf("reason %q, want %q", r, tt.want.reason)
				}
				return
			}
			p, _ := principal.FromContext(ctx)
			if p.Kind() != tt.want.kind {
				t.Fatalf("principal of kind %v, want %v", p.Kind(), tt.want.kind)
			}
		})
	}
}
