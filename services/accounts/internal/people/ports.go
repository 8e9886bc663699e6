package people

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/principal"
)

// Person is someone who signs in to the console.
type Person struct {
	ID     string
	Email  string
	Name   string
	Handle []byte
	// Sealed holds Email and Name sealed (the store's column); the service opens it.
	Sealed []byte
}

// Passkey is one of a person's WebAuthn credentials, as go-webauthn keeps it (JSON).
type Passkey struct {
	ID           string
	PersonID     string
	CredentialID []byte
	Credential   []byte
	// Name is the person's name for it ("" until given).
	Name       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// Membership is a person's place in a client.
type Membership struct {
	ClientID   string
	ClientName string
	PersonID   string
	Role       principal.Role
	CreatedAt  time.Time
}

// Invitation is a pending (or spent) invitation.
type Invitation struct {
	ID, ClientID string
	EmailFP      []byte
	EmailSealed  []byte
	Email        string
	Role         principal.Role
	Recovery     bool
	InvitedBy    *string
	CreatedAt    time.Time
	ExpiresAt    time.Time
	AcceptedAt   *time.Time
	RevokedAt    *time.Time
}

// Session is a console session as listed.
type Session struct {
	ID, ClientID, PersonID string
	CreatedAt, LastSeenAt  time.Time
	ExpiresAt              time.Time
	SteppedUpAt            *time.Time
	ClientAddress          string
	UserAgent              string
}

// SessionAuth is what authenticating a session finds: the session, the person's role in its
// client and the client's state.
type SessionAuth struct {
	Session
	Role      principal.Role
	Status    principal.Status
	Features  []string
	Operators principal.Operators
	// StepUpValidFor is how much longer the step-up counts, by the database's clock; nil when
	// it does not.
	StepUpValidFor *time.Duration
}

// Ceremony is a WebAuthn ceremony between its two calls.
type Ceremony struct {
	ID      string
	Purpose string
	Data    []byte
	Subject string
}

// Ceremony purposes.
const (
	PurposeSignIn   = "sign-in"
	PurposeRegister = "register"
	PurposeStepUp   = "step-up"
	// PurposePasskey registers another passkey of a signed-in person, bound to their session.
	PurposePasskey = "passkey"
)

// AuditEvent is one thing a person did.
type AuditEvent struct {
	ID, ClientID  string
	At            time.Time
	PersonID      *string
	SessionID     *string
	Action        string
	Target        string
	Status        int
	ClientAddress string
	UserAgent     string
	// Person is filled when listed.
	Person *Person
}

// Store is what people need of the service's storage. A lookup that finds nothing answers
// fault.ErrNotFound.
type Store interface {
	SSOStore
	InsertCeremony(ctx context.Context, c Ceremony, ttl time.Duration) error
	// TakeCeremony deletes and returns an unexpired ceremony of the purpose: used once.
	TakeCeremony(ctx context.Context, id, purpose string) (Ceremony, error)

	InsertPerson(ctx context.Context, p Person, emailFP []byte) error
	PersonByID(ctx context.Context, id string) (Person, error)
	PersonByEmail(ctx context.Context, emailFP []byte) (Person, error)
	PersonByHandle(ctx context.Context, handle []byte) (Person, error)
	Passkeys(ctx context.Context, personID string) ([]Passkey, error)
	InsertPasskey(ctx context.Context, k Passkey) error
	// UsePasskey stores what an assertion changed of a passkey (its sign count, flags).
	UsePasskey(ctx context.Context, personID string, credentialID, credential []byte) error
	// LockPerson holds the person's row until the transaction ends (so two removals of their
	// passkeys cannot both count the other's) and tells whether they sign in with single sign-on.
	LockPerson(ctx context.Context, personID string) (sso bool, err error)
	// RenamePasskey and DeletePasskey touch one passkey of the person; another's is not found.
	RenamePasskey(ctx context.Context, personID, id, name string) (Passkey, error)
	DeletePasskey(ctx context.Context, personID, id string) (Passkey, error)

	ClientName(ctx context.Context, clientID string) (string, error)
	// Memberships lists a person's clients, by client name.
	Memberships(ctx context.Context, personID string) ([]Membership, error)
	Membership(ctx context.Context, clientID, personID string, lock bool) (Membership, error)
	AddMembership(ctx context.Context, m Membership) error
	SetRole(ctx context.Context, clientID, personID string, role principal.Role) error
	RemoveMembership(ctx context.Context, clientID, personID string) error
	// Members lists the client's people with their roles, by join date.
	Members(ctx context.Context, clientID string) ([]Membership, []Person, error)
	CountAdmins(ctx context.Context, clientID string) (int, error)

	InsertInvitation(ctx context.Context, inv Invitation, fp []byte) (Invitation, error)
	// InvitationByToken finds an invitation of the client by its token's fingerprint; lock
	// holds it until the transaction ends.
	InvitationByToken(ctx context.Context, clientID string, fp []byte, lock bool) (Invitation, error)
	AcceptInvitation(ctx context.Context, clientID, id string) error
	// PendingInvitations lists the client's invitations neither accepted, withdrawn nor expired.
	PendingInvitations(ctx context.Context, clientID string) ([]Invitation, error)
	RevokeInvitation(ctx context.Context, clientID, id string) (Invitation, error)

	InsertSession(ctx context.Context, s Session, fp []byte, steppedUp bool) (Session, error)
	// AuthenticateSession finds a usable session of the client by fingerprint (not ended, not
	// past its end, not idle longer than idle, its person still a member) and records its use.
	AuthenticateSession(ctx context.Context, clientID string, fp []byte, idle, stepUp time.Duration) (SessionAuth, error)
	// PersonSessions lists a person's usable sessions in every client, newest first.
	PersonSessions(ctx context.Context, personID string, idle time.Duration) ([]Session, error)
	// EndSession ends a usable session of the person; another person's is not found.
	EndSession(ctx context.Context, personID, sessionID string) (Session, error)
	// EndSessionByToken ends the session of the client whose secret has the fingerprint fp, if
	// it is not ended yet.
	EndSessionByToken(ctx context.Context, clientID string, fp []byte) error
	// EndSessions ends every session of the person (clientID "": in every client) and counts them.
	EndSessions(ctx context.Context, personID, clientID string) (int, error)
	// StepUp marks a usable session of the person (not ended, not past its end, not idle longer
	// than idle) stepped up now; fault.ErrNotFound when there is none.
	StepUp(ctx context.Context, clientID, sessionID, personID string, idle time.Duration) error
	// IsSSOPerson tells whether the person signs in through a client's provider.
	IsSSOPerson(ctx context.Context, personID string) (bool, error)

	InsertAudit(ctx context.Context, e AuditEvent) error
	ListAudit(ctx context.Context, clientID string, limit, offset int64) ([]AuditEvent, int64, error)
}

// Tx runs a function with the store inside one transaction, committed when it returns nil.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}
