package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The console's people (package people). Every statement on a client's table names client_id.

func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fault.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// InsertCeremony keeps a WebAuthn ceremony for ttl, and drops the expired ones on the way.
func (s *Store) InsertCeremony(ctx context.Context, c people.Ceremony, ttl time.Duration) error {
	_, err := s.db.Exec(ctx, `WITH gone AS (DELETE FROM accounts.webauthn_ceremonies WHERE expires_at < now() - interval '1 hour')
		INSERT INTO accounts.webauthn_ceremonies (id, purpose, data, subject, expires_at)
		VALUES ($1, $2, $3, $4, now() + $5::interval)`, c.ID, c.Purpose, c.Data, c.Subject, ttl)
	return notFound(err, "insert ceremony")
}

// TakeCeremony deletes and returns an unexpired ceremony of the purpose.
func (s *Store) TakeCeremony(ctx context.Context, id, purpose string) (people.Ceremony, error) {
	c := people.Ceremony{ID: id, Purpose: purpose}
	var (
		live   bool
		wasFor string
	)
	// Deleted whatever it was for and whether or not it expired: a ceremony is tried once.
	err := s.db.QueryRow(ctx, `DELETE FROM accounts.webauthn_ceremonies
		WHERE id = $1 RETURNING purpose, data, subject, expires_at > now()`, id).
		Scan(&wasFor, &c.Data, &c.Subject, &live)
	if err == nil && (!live || wasFor != purpose) {
		return c, fault.ErrNotFound
	}
	return c, notFound(err, "take ceremony")
}

const personColumns = `p.id::text, p.profile, p.handle`

func scanPerson(row pgx.Row) (people.Person, error) {
	var p people.Person
	err := row.Scan(&p.ID, &p.Sealed, &p.Handle)
	return p, notFound(err, "person")
}

func (s *Store) InsertPerson(ctx context.Context, p people.Person, emailFP []byte) error {
	_, err := s.db.Exec(ctx, `INSERT INTO accounts.people (id, email_fp, profile, handle) VALUES ($1, $2, $3, $4)`,
		p.ID, emailFP, p.Sealed, p.Handle)
	return notFound(err, "insert person")
}

func (s *Store) PersonByID(ctx context.Context, id string) (people.Person, error) {
	return scanPerson(s.db.QueryRow(ctx, `SELECT `+personColumns+` FROM accounts.people p WHERE p.id = $1`, id))
}

func (s *Store) PersonByEmail(ctx context.Context, emailFP []byte) (people.Person, error) {
	return scanPerson(s.db.QueryRow(ctx, `SELECT `+personColumns+` FROM accounts.people p WHERE p.email_fp = $1`, emailFP))
}

func (s *Store) PersonByHandle(ctx context.Context, handle []byte) (people.Person, error) {
	return scanPerson(s.db.QueryRow(ctx, `SELECT `+personColumns+` FROM accounts.people p WHERE p.handle = $1`, handle))
}

const passkeyColumns = `id::text, person_id::text, credential_id, credential::text::bytea, name, created_at, last_used_at`

func scanPasskey(r pgx.CollectableRow) (people.Passkey, error) {
	var k people.Passkey
	err := r.Scan(&k.ID, &k.PersonID, &k.CredentialID, &k.Credential, &k.Name, &k.CreatedAt, &k.LastUsedAt)
	return k, err
}

func (s *Store) Passkeys(ctx context.Context, personID string) ([]people.Passkey, error) {
	rows, err := s.db.Query(ctx, `SELECT `+passkeyColumns+`
		FROM accounts.passkeys WHERE person_id = $1 ORDER BY created_at, id`, personID)
	if err != nil {
		return nil, fmt.Errorf("passkeys: %w", err)
	}
	return pgx.CollectRows(rows, scanPasskey)
}

func (s *Store) InsertPasskey(ctx context.Context, k people.Passkey) error {
	_, err := s.db.Exec(ctx, `INSERT INTO accounts.passkeys (id, person_id, credential_id, credential, name)
		VALUES ($1, $2, $3, convert_from($4, 'UTF8')::jsonb, $5)`, k.ID, k.PersonID, k.CredentialID, k.Credential, k.Name)
	if pg.IsUniqueViolation(err, "") {
		return fault.New(fault.Conflict, "this passkey is registered already")
	}
	return notFound(err, "insert passkey")
}

func (s *Store) UsePasskey(ctx context.Context, personID string, credentialID, credential []byte) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.passkeys SET credential = convert_from($3, 'UTF8')::jsonb, last_used_at = now()
		WHERE person_id = $1 AND credential_id = $2`, personID, credentialID, credential)
	return notFound(err, "use passkey")
}

// LockPerson holds a person's row for the transaction and tells whether a client's single
// sign-on is how they sign in.
func (s *Store) LockPerson(ctx context.Context, personID string) (bool, error) {
	var sso bool
	err := s.db.QueryRow(ctx, `SELECT sso_client IS NOT NULL FROM accounts.people WHERE id = $1 FOR UPDATE`, personID).Scan(&sso)
	return sso, notFound(err, "lock person")
}

func (s *Store) IsSSOPerson(ctx context.Context, personID string) (bool, error) {
	var sso bool
	err := s.db.QueryRow(ctx, `SELECT sso_client IS NOT NULL FROM accounts.people WHERE id = $1`, personID).Scan(&sso)
	return sso, notFound(err, "sso person")
}

// RenamePasskey renames a passkey of the person.
func (s *Store) RenamePasskey(ctx context.Context, personID, id, name string) (people.Passkey, error) {
	rows, err := s.db.Query(ctx, `UPDATE accounts.passkeys SET name = $3 WHERE person_id = $1 AND id = $2
		RETURNING `+passkeyColumns, personID, id, name)
	if err != nil {
		return people.Passkey{}, fmt.Errorf("rename passkey: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanPasskey)
	return k, notFound(err, "rename passkey")
}

// DeletePasskey removes a passkey of the person.
func (s *Store) DeletePasskey(ctx context.Context, personID, id string) (people.Passkey, error) {
	rows, err := s.db.Query(ctx, `DELETE FROM accounts.passkeys WHERE person_id = $1 AND id = $2
		RETURNING `+passkeyColumns, personID, id)
	if err != nil {
		return people.Passkey{}, fmt.Errorf("delete passkey: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanPasskey)
	return k, notFound(err, "delete passkey")
}

func (s *Store) ClientName(ctx context.Context, clientID string) (string, error) {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM accounts.clients WHERE id = $1`, clientID).Scan(&name)
	return name, notFound(err, "client name")
}

func scanMembership(r pgx.CollectableRow) (people.Membership, error) {
	var m people.Membership
	err := r.Scan(&m.ClientID, &m.ClientName, &m.PersonID, &m.Role, &m.CreatedAt)
	return m, err
}

func (s *Store) Memberships(ctx context.Context, personID string) ([]people.Membership, error) {
	rows, err := s.db.Query(ctx, `SELECT m.client_id::text, c.name, m.person_id::text, m.role, m.created_at
		FROM accounts.memberships m JOIN accounts.clients c ON c.id = m.client_id
		WHERE m.person_id = $1 ORDER BY c.name, c.id`, personID)
	if err != nil {
		return nil, fmt.Errorf("memberships: %w", err)
	}
	return pgx.CollectRows(rows, scanMembership)
}

func (s *Store) Membership(ctx context.Context, clientID, personID string, lock bool) (people.Membership, error) {
	q := `SELECT m.client_id::text, c.name, m.person_id::text, m.role, m.created_at
		FROM accounts.memberships m JOIN accounts.clients c ON c.id = m.client_id
		WHERE m.client_id = $1 AND m.person_id = $2`
	if lock {
		q += ` FOR UPDATE OF m`
	}
	rows, err := s.db.Query(ctx, q, clientID, personID)
	if err != nil {
		return people.Membership{}, fmt.Errorf("membership: %w", err)
	}
	m, err := pgx.CollectExactlyOneRow(rows, scanMembership)
	return m, notFound(err, "membership")
}

func (s *Store) AddMembership(ctx context.Context, m people.Membership) error {
	_, err := s.db.Exec(ctx, `INSERT INTO accounts.memberships (client_id, person_id, role) VALUES ($1, $2, $3)
		ON CONFLICT (client_id, person_id) DO NOTHING`, m.ClientID, m.PersonID, m.Role)
	return notFound(err, "add membership")
}

func (s *Store) SetRole(ctx context.Context, clientID, personID string, role principal.Role) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.memberships SET role = $3 WHERE client_id = $1 AND person_id = $2`, clientID, personID, role)
	return notFound(err, "set role")
}

func (s *Store) RemoveMembership(ctx context.Context, clientID, personID string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM accounts.memberships WHERE client_id = $1 AND person_id = $2`, clientID, personID)
	return notFound(err, "remove membership")
}

func (s *Store) Members(ctx context.Context, clientID string) ([]people.Membership, []people.Person, error) {
	rows, err := s.db.Query(ctx, `SELECT m.client_id::text, '', m.person_id::text, m.role, m.created_at, `+personColumns+`
		FROM accounts.memberships m JOIN accounts.people p ON p.id = m.person_id
		WHERE m.client_id = $1 ORDER BY m.created_at, m.person_id`, clientID)
	if err != nil {
		return nil, nil, fmt.Errorf("members: %w", err)
	}
	defer rows.Close()
	var (
		ms []people.Membership
		ps []people.Person
	)
	for rows.Next() {
		var m people.Membership
		var p people.Person
		if err := rows.Scan(&m.ClientID, &m.ClientName, &m.PersonID, &m.Role, &m.CreatedAt, &p.ID, &p.Sealed, &p.Handle); err != nil {
			return nil, nil, err
		}
		ms, ps = append(ms, m), append(ps, p)
	}
	return ms, ps, rows.Err()
}

func (s *Store) CountAdmins(ctx context.Context, clientID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM accounts.memberships WHERE client_id = $1 AND role = 'ADMIN'`, clientID).Scan(&n)
	return n, notFound(err, "count admins")
}

const invitationColumns = `id::text, client_id::text, email_fp, email, role, recovery, invited_by::text, created_at, expires_at, accepted_at, revoked_at`

func scanInvitation(r pgx.CollectableRow) (people.Invitation, error) {
	var i people.Invitation
	err := r.Scan(&i.ID, &i.ClientID, &i.EmailFP, &i.EmailSealed, &i.Role, &i.Recovery, &i.InvitedBy, &i.CreatedAt, &i.ExpiresAt, &i.AcceptedAt, &i.RevokedAt)
	return i, err
}

func (s *Store) InsertInvitation(ctx context.Context, inv people.Invitation, fp []byte) (people.Invitation, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO accounts.invitations (client_id, id, fingerprint, email_fp, email, role, recovery, invited_by, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING created_at`,
		inv.ClientID, inv.ID, fp, inv.EmailFP, inv.EmailSealed, inv.Role, inv.Recovery, inv.InvitedBy, inv.ExpiresAt).Scan(&inv.CreatedAt)
	return inv, notFound(err, "insert invitation")
}

func (s *Store) InvitationByToken(ctx context.Context, clientID string, fp []byte, lock bool) (people.Invitation, error) {
	q := `SELECT ` + invitationColumns + ` FROM accounts.invitations WHERE client_id = $1 AND fingerprint = $2`
	if lock {
		q += ` FOR UPDATE`
	}
	rows, err := s.db.Query(ctx, q, clientID, fp)
	if err != nil {
		return people.Invitation{}, fmt.Errorf("invitation: %w", err)
	}
	inv, err := pgx.CollectExactlyOneRow(rows, scanInvitation)
	return inv, notFound(err, "invitation")
}

func (s *Store) AcceptInvitation(ctx context.Context, clientID, id string) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.invitations SET accepted_at = now() WHERE client_id = $1 AND id = $2`, clientID, id)
	return notFound(err, "accept invitation")
}

func (s *Store) PendingInvitations(ctx context.Context, clientID string) ([]people.Invitation, error) {
	rows, err := s.db.Query(ctx, `SELECT `+invitationColumns+` FROM accounts.invitations
		WHERE client_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
		ORDER BY created_at DESC`, clientID)
	if err != nil {
		return nil, fmt.Errorf("invitations: %w", err)
	}
	return pgx.CollectRows(rows, scanInvitation)
}

func (s *Store) RevokeInvitation(ctx context.Context, clientID, id string) (people.Invitation, error) {
	rows, err := s.db.Query(ctx, `UPDATE accounts.invitations SET revoked_at = now()
		WHERE client_id = $1 AND id = $2 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
		RETURNING `+invitationColumns, clientID, id)
	if err != nil {
		return people.Invitation{}, fmt.Errorf("revoke invitation: %w", err)
	}
	inv, err := pgx.CollectExactlyOneRow(rows, scanInvitation)
	return inv, notFound(err, "revoke invitation")
}

func (s *Store) InsertSession(ctx context.Context, x people.Session, fp []byte, steppedUp bool) (people.Session, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO accounts.console_sessions
		(client_id, id, fingerprint, person_id, expires_at, stepped_up_at, client_address, user_agent)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN now() END, $7, $8) RETURNING created_at, last_seen_at`,
		x.ClientID, x.ID, fp, x.PersonID, x.ExpiresAt, steppedUp, x.ClientAddress, x.UserAgent).Scan(&x.CreatedAt, &x.LastSeenAt)
	return x, notFound(err, "insert session")
}

// AuthenticateSession finds and touches a usable session in one statement: the membership join
// makes a removed member's session fail at once.
func (s *Store) AuthenticateSession(ctx context.Context, clientID string, fp []byte, idle, stepUp time.Duration) (people.SessionAuth, error) {
	var (
		a        people.SessionAuth
		ops      map[string][]string
		stepLeft *float64
	)
	err := s.db.QueryRow(ctx, `UPDATE accounts.console_sessions s SET last_seen_at = now()
		FROM accounts.memberships m, accounts.clients c
		WHERE s.client_id = $1 AND s.fingerprint = $2 AND s.ended_at IS NULL AND s.expires_at > now()
		  AND s.last_seen_at > now() - $3::interval
		  AND m.client_id = s.client_id AND m.person_id = s.person_id AND c.id = s.client_id
		RETURNING s.id::text, s.client_id::text, s.person_id::text, s.created_at, s.last_seen_at, s.expires_at,
		  m.role, c.status, c.features, c.operators,
		  extract(epoch FROM s.stepped_up_at + $4::interval - now())::float8`,
		clientID, fp, idle, stepUp).
		Scan(&a.ID, &a.ClientID, &a.PersonID, &a.CreatedAt, &a.LastSeenAt, &a.ExpiresAt, &a.Role, &a.Status, &a.Features, &ops, &stepLeft)
	if err != nil {
		return a, notFound(err, "authenticate session")
	}
	a.Operators = principal.OperatorsFromMap(ops)
	if stepLeft != nil && *stepLeft > 0 {
		a.StepUpValidFor = seconds(stepLeft)
	}
	return a, nil
}

const sessionColumns = `id::text, client_id::text, person_id::text, created_at, last_seen_at, expires_at, stepped_up_at, client_address, user_agent`

func scanSession(r pgx.CollectableRow) (people.Session, error) {
	var x people.Session
	err := r.Scan(&x.ID, &x.ClientID, &x.PersonID, &x.CreatedAt, &x.LastSeenAt, &x.ExpiresAt, &x.SteppedUpAt, &x.ClientAddress, &x.UserAgent)
	return x, err
}

func (s *Store) PersonSessions(ctx context.Context, personID string, idle time.Duration) ([]people.Session, error) {
	rows, err := s.db.Query(ctx, `SELECT `+sessionColumns+` FROM accounts.console_sessions
		WHERE person_id = $1 AND ended_at IS NULL AND expires_at > now() AND last_seen_at > now() - $2::interval
		ORDER BY created_at DESC`, personID, idle)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return pgx.CollectRows(rows, scanSession)
}

func (s *Store) EndSession(ctx context.Context, personID, sessionID string) (people.Session, error) {
	rows, err := s.db.Query(ctx, `UPDATE accounts.console_sessions SET ended_at = now()
		WHERE person_id = $1 AND id = $2 AND ended_at IS NULL RETURNING `+sessionColumns, personID, sessionID)
	if err != nil {
		return people.Session{}, fmt.Errorf("end session: %w", err)
	}
	x, err := pgx.CollectExactlyOneRow(rows, scanSession)
	return x, notFound(err, "end session")
}

func (s *Store) EndSessionByToken(ctx context.Context, clientID string, fp []byte) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.console_sessions SET ended_at = now()
		WHERE client_id = $1 AND fingerprint = $2 AND ended_at IS NULL`, clientID, fp)
	return notFound(err, "end session by token")
}

func (s *Store) EndSessions(ctx context.Context, personID, clientID string) (int, error) {
	tag, err := s.db.Exec(ctx, `UPDATE accounts.console_sessions SET ended_at = now()
		WHERE person_id = $1 AND ($2 = '' OR client_id = $2::uuid) AND ended_at IS NULL`, personID, clientID)
	return int(tag.RowsAffected()), notFound(err, "end sessions")
}

func (s *Store) StepUp(ctx context.Context, clientID, sessionID, personID string, idle time.Duration) error {
	tag, err := s.db.Exec(ctx, `UPDATE accounts.console_sessions SET stepped_up_at = now()
		WHERE client_id = $1 AND id = $2 AND person_id = $3 AND ended_at IS NULL AND expires_at > now()
		  AND last_seen_at > now() - $4::interval`, clientID, sessionID, personID, idle)
	if err == nil && tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return notFound(err, "step up")
}

func (s *Store) InsertAudit(ctx context.Context, e people.AuditEvent) error {
	// A repeat of an event (the gateway retrying a record whose answer it lost) is no second one.
	var at *time.Time
	if !e.At.IsZero() {
		at = &e.At
	}
	_, err := s.db.Exec(ctx, `INSERT INTO accounts.audit_events
		(client_id, id, person_id, session_id, action, target, status, client_address, user_agent, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, least(coalesce($10, now()), now()))
		ON CONFLICT (client_id, id) DO NOTHING`,
		e.ClientID, e.ID, e.PersonID, e.SessionID, e.Action, e.Target, e.Status, e.ClientAddress, e.UserAgent, at)
	return notFound(err, "insert audit event")
}

func (s *Store) ListAudit(ctx context.Context, clientID string, limit, offset int64) ([]people.AuditEvent, int64, error) {
	rows, err := s.db.Query(ctx, `SELECT a.id::text, a.client_id::text, a.at, a.person_id::text, a.session_id::text, a.action,
		a.target, a.status, a.client_address, a.user_agent, p.id::text, p.profile, p.handle, count(*) OVER ()
		FROM accounts.audit_events a LEFT JOIN accounts.people p ON p.id = a.person_id
		WHERE a.client_id = $1 ORDER BY a.at DESC, a.id LIMIT $2 OFFSET $3`, clientID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	var (
		out   []people.AuditEvent
		total int64
	)
	for rows.Next() {
		var (
			e      people.AuditEvent
			pid    *string
			sealed []byte
			handle []byte
		)
		if err := rows.Scan(&e.ID, &e.ClientID, &e.At, &e.PersonID, &e.SessionID, &e.Action, &e.Target, &e.Status,
			&e.ClientAddress, &e.UserAgent, &pid, &sealed, &handle, &total); err != nil {
			return nil, 0, err
		}
		if pid != nil {
			e.Person = &people.Person{ID: *pid, Sealed: sealed, Handle: handle}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) == 0 && offset > 0 {
		err := s.db.QueryRow(ctx, `SELECT count(*) FROM accounts.audit_events WHERE client_id = $1`, clientID).Scan(&total)
		if err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

// SSO reads a client's single sign-on provider.
func (s *Store) SSO(ctx context.Context, clientID string) (people.SSO, error) {
	x := people.SSO{ClientID: clientID}
	err := s.db.QueryRow(ctx, `SELECT issuer, oidc_client_id, client_secret, role_claim, admin_values, member_values, scopes, updated_at
		FROM accounts.sso_providers WHERE client_id = $1`, clientID).
		Scan(&x.Issuer, &x.OIDCClientID, &x.SealedSecret, &x.RoleClaim, &x.AdminValues, &x.MemberValues, &x.Scopes, &x.UpdatedAt)
	return x, notFound(err, "sso provider")
}

// PutSSO writes a client's single sign-on provider.
func (s *Store) PutSSO(ctx context.Context, x people.SSO) (people.SSO, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO accounts.sso_providers
		(client_id, issuer, oidc_client_id, client_secret, role_claim, admin_values, member_values, scopes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (client_id) DO UPDATE SET issuer = excluded.issuer, oidc_client_id = excluded.oidc_client_id,
			client_secret = excluded.client_secret, role_claim = excluded.role_claim, admin_values = excluded.admin_values,
			member_values = excluded.member_values, scopes = excluded.scopes, updated_at = now()
		RETURNING updated_at`,
		x.ClientID, x.Issuer, x.OIDCClientID, x.SealedSecret, x.RoleClaim, nonNil(x.AdminValues), nonNil(x.MemberValues), nonNil(x.Scopes)).Scan(&x.UpdatedAt)
	return x, notFound(err, "put sso provider")
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// DeleteSSO removes a client's single sign-on provider.
func (s *Store) DeleteSSO(ctx context.Context, clientID string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM accounts.sso_providers WHERE client_id = $1`, clientID)
	if err == nil && tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return notFound(err, "delete sso provider")
}

// PersonBySSO finds the person of a provider's subject by its key.
func (s *Store) PersonBySSO(ctx context.Context, key []byte) (people.Person, error) {
	return scanPerson(s.db.QueryRow(ctx, `SELECT `+personColumns+` FROM accounts.people p WHERE p.sso_key = $1`, key))
}

// InsertSSOPerson stores a person of a client's provider.
func (s *Store) InsertSSOPerson(ctx context.Context, p people.Person, key []byte, clientID string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO accounts.people (id, sso_key, sso_client, profile, handle) VALUES ($1, $2, $3, $4, $5)`,
		p.ID, key, clientID, p.Sealed, p.Handle)
	return notFound(err, "insert sso person")
}

// UpdateProfile replaces a person's sealed profile.
func (s *Store) UpdateProfile(ctx context.Context, personID string, sealed []byte) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.people SET profile = $2 WHERE id = $1`, personID, sealed)
	return notFound(err, "update profile")
}

// EndSSOSessions ends the sessions of the people a client's provider signed in.
func (s *Store) EndSSOSessions(ctx context.Context, clientID string) error {
	_, err := s.db.Exec(ctx, `UPDATE accounts.console_sessions s SET ended_at = now()
		FROM accounts.people p
		WHERE s.client_id = $1 AND s.ended_at IS NULL AND p.id = s.person_id AND p.sso_client = $1`, clientID)
	return notFound(err, "end sso sessions")
}
