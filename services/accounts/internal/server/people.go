package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/paging"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The metadata that opens or ends the caller's console session (people.proto's service
// comment): the gateway turns it into the cookie and forwards none of it.
const (
	MDSessionSet    = "x-mnv-session-set"
	MDSessionMaxAge = "x-mnv-session-max-age"
	MDSessionClear  = "x-mnv-session-clear"
	// MDPriorSession is the session cookie a call that opens a session came with: it ends.
	MDPriorSession = "x-mnv-session-prior"
)

// People implements PeopleService: the console's people.
type People struct {
	accountsv1.UnimplementedPeopleServiceServer
	Deps
}

// meta is where the call came from, as the gateway passes it: the address grpc-gateway put in
// x-forwarded-for (from the socket, or the proxies it trusts), the browser's user agent, and
// the session the browser had.
func meta(ctx context.Context) people.Meta {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	addr := first("x-forwarded-for")
	if i := strings.LastIndexByte(addr, ','); i >= 0 {
		addr = addr[i+1:]
	}
	ua := first("grpcgateway-user-agent")
	if ua == "" {
		ua = first("user-agent")
	}
	return people.Meta{ClientAddress: strings.TrimSpace(addr), UserAgent: ua, PriorSession: first(MDPriorSession)}
}

// setSession tells the gateway to set the session cookie.
func setSession(ctx context.Context, token string, maxAge time.Duration) error {
	return grpc.SetHeader(ctx, metadata.Pairs(MDSessionSet, token, MDSessionMaxAge, strconv.FormatInt(int64(maxAge/time.Second), 10)))
}

func clearSession(ctx context.Context) error {
	return grpc.SetHeader(ctx, metadata.Pairs(MDSessionClear, "1"))
}

func personToProto(p people.Person) *accountsv1.Person {
	return &accountsv1.Person{Id: p.ID, Email: p.Email, Name: p.Name}
}

func membershipToProto(m people.Membership) *accountsv1.Membership {
	return &accountsv1.Membership{ClientId: m.ClientID, ClientName: m.ClientName, Role: roleToProto(m.Role)}
}

func sessionToProto(x people.Session, current string) *accountsv1.ConsoleSession {
	return &accountsv1.ConsoleSession{
		Id: x.ID, ClientId: x.ClientID, CreatedAt: ts(x.CreatedAt), LastSeenAt: ts(x.LastSeenAt), ExpiresAt: ts(x.ExpiresAt),
		ClientAddress: x.ClientAddress, UserAgent: x.UserAgent, Current: x.ID == current,
	}
}

func invitationToProto(i people.Invitation) *accountsv1.Invitation {
	return &accountsv1.Invitation{
		Id: i.ID, Email: i.Email, Role: roleToProto(i.Role), CreatedAt: ts(i.CreatedAt), ExpiresAt: ts(i.ExpiresAt), Recovery: i.Recovery,
	}
}

func (s *People) signed(ctx context.Context, sg people.Signed) (*accountsv1.Person, *accountsv1.Membership, error) {
	if err := setSession(ctx, sg.Token, sg.MaxAge); err != nil {
		return nil, nil, s.fail(ctx, err)
	}
	return personToProto(sg.Person), membershipToProto(sg.Membership), nil
}

// StartSignIn begins a passkey sign-in.
func (s *People) StartSignIn(ctx context.Context, _ *accountsv1.StartSignInRequest) (*accountsv1.StartSignInResponse, error) {
	o, err := s.People.StartSignIn(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartSignInResponse{CeremonyId: o.CeremonyID, OptionsJson: o.JSON}, nil
}

// SignIn finishes a passkey sign-in and opens a session.
func (s *People) SignIn(ctx context.Context, req *accountsv1.SignInRequest) (*accountsv1.SignInResponse, error) {
	cid := ""
	if req.GetClientId() != "" {
		var ok bool
		if cid, ok = principal.ParseClientID(req.GetClientId()); !ok {
			return nil, s.fail(ctx, fault.Invalid("clientId", "must be a client id (UUID)"))
		}
	}
	sg, err := s.People.SignIn(ctx, req.GetCeremonyId(), req.GetCredentialJson(), cid, meta(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	person, m, err := s.signed(ctx, sg)
	if err != nil {
		return nil, err
	}
	return &accountsv1.SignInResponse{Person: person, Membership: m}, nil
}

// StartInvitation opens an invitation.
func (s *People) StartInvitation(ctx context.Context, req *accountsv1.StartInvitationRequest) (*accountsv1.StartInvitationResponse, error) {
	o, err := s.People.OpenInvitation(ctx, req.GetToken())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartInvitationResponse{
		CeremonyId: o.Options.CeremonyID, OptionsJson: o.Options.JSON, Email: o.Invitation.Email, ClientName: o.ClientName,
		Role: roleToProto(o.Invitation.Role), Recovery: o.Invitation.Recovery, ExistingPerson: o.Existing,
	}, nil
}

// AcceptInvitation accepts an invitation and opens a session.
func (s *People) AcceptInvitation(ctx context.Context, req *accountsv1.AcceptInvitationRequest) (*accountsv1.AcceptInvitationResponse, error) {
	sg, err := s.People.Accept(ctx, req.GetToken(), req.GetCeremonyId(), req.GetCredentialJson(), req.GetName(), meta(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	person, m, err := s.signed(ctx, sg)
	if err != nil {
		return nil, err
	}
	return &accountsv1.AcceptInvitationResponse{Person: person, Membership: m}, nil
}

// GetSession tells the signed-in person who they are.
func (s *People) GetSession(ctx context.Context, _ *accountsv1.GetSessionRequest) (*accountsv1.GetSessionResponse, error) {
	p := principalOf(ctx)
	w, err := s.People.WhoAmI(ctx, p)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &accountsv1.GetSessionResponse{
		Person: personToProto(w.Person), Membership: membershipToProto(w.Membership),
		Memberships: mapItems(w.Memberships, membershipToProto), Session: sessionToProto(w.Session, p.SessionID),
		ClientStatus: statusToProto(p.Status), SingleSignOn: w.SSO,
	}
	if p.SteppedUp() {
		out.SteppedUpUntil = timestamppb.New(time.Now().Add(*p.StepUpValidFor))
	}
	return out, nil
}

// SignOut ends the caller's session.
func (s *People) SignOut(ctx context.Context, _ *accountsv1.SignOutRequest) (*accountsv1.SignOutResponse, error) {
	if err := s.People.SignOut(ctx, principalOf(ctx)); err != nil {
		return nil, s.fail(ctx, err)
	}
	if err := clearSession(ctx); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SignOutResponse{}, nil
}

// ListSessions lists the person's sessions.
func (s *People) ListSessions(ctx context.Context, _ *accountsv1.ListSessionsRequest) (*accountsv1.ListSessionsResponse, error) {
	p := principalOf(ctx)
	xs, err := s.People.Sessions(ctx, p)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &accountsv1.ListSessionsResponse{}
	for _, x := range xs {
		out.Items = append(out.Items, sessionToProto(x, p.SessionID))
	}
	return out, nil
}

// EndSession ends one of the person's sessions.
func (s *People) EndSession(ctx context.Context, req *accountsv1.EndSessionRequest) (*accountsv1.EndSessionResponse, error) {
	own, err := s.People.EndSession(ctx, principalOf(ctx), req.GetSessionId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if own {
		if err := clearSession(ctx); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	return &accountsv1.EndSessionResponse{Own: own}, nil
}

// SignOutEverywhere ends every session of the person.
func (s *People) SignOutEverywhere(ctx context.Context, _ *accountsv1.SignOutEverywhereRequest) (*accountsv1.SignOutEverywhereResponse, error) {
	n, err := s.People.SignOutEverywhere(ctx, principalOf(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if err := clearSession(ctx); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SignOutEverywhereResponse{Ended: int32(min(n, 1<<30))}, nil
}

// SwitchClient moves the person's session to another of their clients.
func (s *People) SwitchClient(ctx context.Context, req *accountsv1.SwitchClientRequest) (*accountsv1.SwitchClientResponse, error) {
	cid, ok := principal.ParseClientID(req.GetClientId())
	if !ok {
		return nil, s.fail(ctx, fault.Invalid("clientId", "must be a client id (UUID)"))
	}
	sg, err := s.People.SwitchClient(ctx, principalOf(ctx), cid, meta(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	_, m, err := s.signed(ctx, sg)
	if err != nil {
		return nil, err
	}
	return &accountsv1.SwitchClientResponse{Membership: m}, nil
}

// StartStepUp begins a step-up.
func (s *People) StartStepUp(ctx context.Context, _ *accountsv1.StartStepUpRequest) (*accountsv1.StartStepUpResponse, error) {
	o, err := s.People.StartStepUp(ctx, principalOf(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartStepUpResponse{CeremonyId: o.CeremonyID, OptionsJson: o.JSON}, nil
}

// StepUp finishes a step-up.
func (s *People) StepUp(ctx context.Context, req *accountsv1.StepUpRequest) (*accountsv1.StepUpResponse, error) {
	until, err := s.People.StepUp(ctx, principalOf(ctx), req.GetCeremonyId(), req.GetCredentialJson())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StepUpResponse{SteppedUpUntil: ts(until)}, nil
}

func memberToProto(m people.Membership, p people.Person) *accountsv1.Member {
	return &accountsv1.Member{Person: personToProto(p), Role: roleToProto(m.Role), JoinedAt: ts(m.CreatedAt)}
}

// ListMembers lists the client's people.
func (s *People) ListMembers(ctx context.Context, _ *accountsv1.ListMembersRequest) (*accountsv1.ListMembersResponse, error) {
	ms, ps, err := s.People.Members(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &accountsv1.ListMembersResponse{}
	for i := range ms {
		out.Items = append(out.Items, memberToProto(ms[i], ps[i]))
	}
	return out, nil
}

// SetMemberRole changes a member's role.
func (s *People) SetMemberRole(ctx context.Context, req *accountsv1.SetMemberRoleRequest) (*accountsv1.SetMemberRoleResponse, error) {
	m, p, err := s.People.SetRole(ctx, principalOf(ctx).ClientID, req.GetUserId(), roleFromProto(req.GetRole()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.SetMemberRoleResponse{Member: memberToProto(m, p)}, nil
}

// RemoveMember takes a person out of the client.
func (s *People) RemoveMember(ctx context.Context, req *accountsv1.RemoveMemberRequest) (*accountsv1.RemoveMemberResponse, error) {
	m, p, err := s.People.Remove(ctx, principalOf(ctx).ClientID, req.GetUserId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RemoveMemberResponse{Member: memberToProto(m, p)}, nil
}

// InviteMember invites a person.
func (s *People) InviteMember(ctx context.Context, req *accountsv1.InviteMemberRequest) (*accountsv1.InviteMemberResponse, error) {
	p := principalOf(ctx)
	inv, err := s.People.Invite(ctx, p.ClientID, p.UserID, req.GetEmail(), roleFromProto(req.GetRole()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.InviteMemberResponse{Invitation: invitationToProto(inv.Invitation), Link: inv.Link}, nil
}

// ListInvitations lists the pending invitations.
func (s *People) ListInvitations(ctx context.Context, _ *accountsv1.ListInvitationsRequest) (*accountsv1.ListInvitationsResponse, error) {
	invs, err := s.People.Invitations(ctx, principalOf(ctx).ClientID)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListInvitationsResponse{Items: mapItems(invs, invitationToProto)}, nil
}

// RevokeInvitation withdraws an invitation.
func (s *People) RevokeInvitation(ctx context.Context, req *accountsv1.RevokeInvitationRequest) (*accountsv1.RevokeInvitationResponse, error) {
	inv, err := s.People.RevokeInvitation(ctx, principalOf(ctx).ClientID, req.GetInvitationId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RevokeInvitationResponse{Invitation: invitationToProto(inv)}, nil
}

// ListAuditEvents lists the audit log.
func (s *People) ListAuditEvents(ctx context.Context, req *accountsv1.ListAuditEventsRequest) (*accountsv1.ListAuditEventsResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	evs, total, err := s.People.Audit(ctx, principalOf(ctx).ClientID, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &accountsv1.ListAuditEventsResponse{Page: pg.Number, Size: pg.Size, TotalItems: total, TotalPages: pg.TotalPages(total)}
	for _, e := range evs {
		a := &accountsv1.AuditEvent{
			Id: e.ID, At: ts(e.At), Action: e.Action, Target: e.Target, Status: int32(e.Status),
			ClientAddress: e.ClientAddress, UserAgent: e.UserAgent,
		}
		if e.Person != nil {
			a.Person = personToProto(*e.Person)
		}
		out.Items = append(out.Items, a)
	}
	return out, nil
}

// AuthenticateSession resolves a console session for another process.
func (s *Internal) AuthenticateSession(ctx context.Context, req *accountsv1.AuthenticateSessionRequest) (*accountsv1.AuthenticateSessionResponse, error) {
	if s.People == nil || !principal.Session.WellFormed(req.GetSessionToken()) {
		return nil, s.fail(ctx, principal.ErrUnauthenticated)
	}
	p, err := s.People.Authenticate(ctx, req.GetSessionToken())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.AuthenticateSessionResponse{Principal: auth.PrincipalToProto(p)}, nil
}

// RecordAudit records what a person did through their session.
func (s *Internal) RecordAudit(ctx context.Context, req *accountsv1.RecordAuditRequest) (*accountsv1.RecordAuditResponse, error) {
	var at time.Time
	if req.GetAt() != nil {
		at = req.GetAt().AsTime()
	}
	err := s.People.Record(ctx, people.Recorded{
		ID: req.GetEventId(), At: at, ClientID: req.GetClientId(), PersonID: req.GetUserId(), SessionID: req.GetSessionId(),
		Action: req.GetAction(), Target: req.GetTarget(), Status: int(req.GetStatus()),
	}, people.Meta{ClientAddress: req.GetClientAddress(), UserAgent: req.GetUserAgent()})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RecordAuditResponse{}, nil
}

// InviteUser invites a person for the operator (mnvctl).
func (s *Admin) InviteUser(ctx context.Context, req *accountsv1.InviteUserRequest) (*accountsv1.InviteUserResponse, error) {
	cid, ok := principal.ParseClientID(req.GetClientId())
	if !ok {
		return nil, s.fail(ctx, fault.Invalid("clientId", "must be a client id (UUID)"))
	}
	if _, err := s.Clients.Get(ctx, cid); err != nil {
		return nil, s.fail(ctx, err)
	}
	inv, err := s.People.Invite(ctx, cid, "", req.GetEmail(), roleFromProto(req.GetRole()))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.InviteUserResponse{Invitation: invitationToProto(inv.Invitation), Link: inv.Link}, nil
}

// The metadata of single sign-on's binding cookie and of the browser's redirect (the gateway's
// to turn into Set-Cookie and a 303).
const (
	MDSSOSet      = "x-mnv-sso-set"
	MDSSOMaxAge   = "x-mnv-sso-max-age"
	MDSSOClear    = "x-mnv-sso-clear"
	MDSSOBinding  = "x-mnv-sso"
	MDRedirect    = "x-mnv-redirect"
	consoleHome   = "/console/"
	consoleFailed = "/console/sign-in?sso=failed"
)

func ssoToProto(x people.SSO) *accountsv1.SsoSettings {
	return &accountsv1.SsoSettings{
		Issuer: x.Issuer, OidcClientId: x.OIDCClientID, HasClientSecret: x.SealedSecret != nil || x.Secret != "",
		RoleClaim: x.RoleClaim, AdminValues: x.AdminValues, MemberValues: x.MemberValues, UpdatedAt: ts(x.UpdatedAt),
		Scopes: x.Scopes,
	}
}

// GetSsoSettings reads the client's single sign-on.
func (s *People) GetSsoSettings(ctx context.Context, _ *accountsv1.GetSsoSettingsRequest) (*accountsv1.GetSsoSettingsResponse, error) {
	out := &accountsv1.GetSsoSettingsResponse{RedirectUri: s.People.RedirectURI()}
	x, err := s.People.SSOSettings(ctx, principalOf(ctx).ClientID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
	case err != nil:
		return nil, s.fail(ctx, err)
	default:
		out.Settings = ssoToProto(x)
		out.Settings.HasClientSecret = x.Secret != "" || s.People.HasSSOSecret(ctx, x.ClientID)
	}
	return out, nil
}

// SetSsoSettings sets the client's single sign-on.
func (s *People) SetSsoSettings(ctx context.Context, req *accountsv1.SetSsoSettingsRequest) (*accountsv1.SetSsoSettingsResponse, error) {
	x, err := s.People.SetSSO(ctx, people.SSO{
		ClientID: principalOf(ctx).ClientID, Issuer: req.GetIssuer(), OIDCClientID: req.GetOidcClientId(),
		RoleClaim: req.GetRoleClaim(), AdminValues: req.GetAdminValues(), MemberValues: req.GetMemberValues(),
		Scopes: req.GetScopes(),
	}, req.ClientSecret)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := ssoToProto(x)
	out.HasClientSecret = s.People.HasSSOSecret(ctx, x.ClientID)
	return &accountsv1.SetSsoSettingsResponse{Settings: out, RedirectUri: s.People.RedirectURI()}, nil
}

// DeleteSsoSettings turns the client's single sign-on off.
func (s *People) DeleteSsoSettings(ctx context.Context, _ *accountsv1.DeleteSsoSettingsRequest) (*accountsv1.DeleteSsoSettingsResponse, error) {
	if err := s.People.DeleteSSO(ctx, principalOf(ctx).ClientID); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.DeleteSsoSettingsResponse{}, nil
}

// StartSsoSignIn begins a sign-in through the client's provider.
func (s *People) StartSsoSignIn(ctx context.Context, req *accountsv1.StartSsoSignInRequest) (*accountsv1.StartSsoSignInResponse, error) {
	st, err := s.People.StartSSO(ctx, req.GetClientId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	md := metadata.Pairs(MDSSOSet, st.Binding, MDSSOMaxAge, strconv.FormatInt(int64(st.MaxAge/time.Second), 10))
	if err := grpc.SetHeader(ctx, md); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartSsoSignInResponse{AuthorizationUrl: st.AuthorizationURL}, nil
}

// StartSsoStepUp begins a step-up of the caller's session through the client's provider.
func (s *People) StartSsoStepUp(ctx context.Context, req *accountsv1.StartSsoStepUpRequest) (*accountsv1.StartSsoStepUpResponse, error) {
	st, err := s.People.StartSSOStepUp(ctx, principalOf(ctx), req.GetReturnTo())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	md := metadata.Pairs(MDSSOSet, st.Binding, MDSSOMaxAge, strconv.FormatInt(int64(st.MaxAge/time.Second), 10))
	if err := grpc.SetHeader(ctx, md); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartSsoStepUpResponse{AuthorizationUrl: st.AuthorizationURL}, nil
}

// FinishSsoSignIn completes a sign-in when the provider sends the browser back. A failure of the
// sign-in itself sends the browser to the sign-in page (the reason is logged, never shown).
func (s *People) FinishSsoSignIn(ctx context.Context, req *accountsv1.FinishSsoSignInRequest) (*accountsv1.FinishSsoSignInResponse, error) {
	binding := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MDSSOBinding); len(v) == 1 {
			binding = v[0]
		}
	}
	sg, err := s.People.FinishSSO(ctx, req.GetCode(), req.GetState(), req.GetError(), binding, meta(ctx))
	to := consoleHome
	md := metadata.Pairs(MDSSOClear, "1")
	switch {
	case errors.Is(err, people.ErrSSO):
		s.Log.Warn("single sign-on refused", zap.Error(err))
		to = consoleFailed
		if sg.Next != "" {
			to = sg.Next
		}
	case err != nil:
		return nil, s.fail(ctx, err)
	case sg.Next != "":
		// A step-up came back: the session is stepped up, no cookie changes but the flow's.
		to = sg.Next
	default:
		md.Append(MDSessionSet, sg.Token)
		md.Append(MDSessionMaxAge, strconv.FormatInt(int64(sg.MaxAge/time.Second), 10))
	}
	md.Append(MDRedirect, to)
	if err := grpc.SetHeader(ctx, md); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.FinishSsoSignInResponse{}, nil
}

func passkeyToProto(k people.PasskeyInfo) *accountsv1.Passkey {
	out := &accountsv1.Passkey{Id: k.ID, Name: k.Name, CreatedAt: ts(k.CreatedAt), BackupEligible: k.BackupEligible, BackedUp: k.BackedUp}
	if k.LastUsedAt != nil {
		out.LastUsedAt = ts(*k.LastUsedAt)
	}
	return out
}

// ListPasskeys lists the person's passkeys.
func (s *People) ListPasskeys(ctx context.Context, _ *accountsv1.ListPasskeysRequest) (*accountsv1.ListPasskeysResponse, error) {
	ks, err := s.People.Passkeys(ctx, principalOf(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.ListPasskeysResponse{Items: mapItems(ks, passkeyToProto)}, nil
}

// StartAddPasskey begins registering another passkey of the person.
func (s *People) StartAddPasskey(ctx context.Context, _ *accountsv1.StartAddPasskeyRequest) (*accountsv1.StartAddPasskeyResponse, error) {
	o, err := s.People.StartAddPasskey(ctx, principalOf(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.StartAddPasskeyResponse{CeremonyId: o.CeremonyID, OptionsJson: o.JSON}, nil
}

// AddPasskey finishes registering another passkey of the person.
func (s *People) AddPasskey(ctx context.Context, req *accountsv1.AddPasskeyRequest) (*accountsv1.AddPasskeyResponse, error) {
	k, err := s.People.AddPasskey(ctx, principalOf(ctx), req.GetCeremonyId(), req.GetCredentialJson(), req.GetName())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.AddPasskeyResponse{Passkey: passkeyToProto(k)}, nil
}

// RenamePasskey renames one of the person's passkeys.
func (s *People) RenamePasskey(ctx context.Context, req *accountsv1.RenamePasskeyRequest) (*accountsv1.RenamePasskeyResponse, error) {
	k, err := s.People.RenamePasskey(ctx, principalOf(ctx), req.GetPasskeyId(), req.GetName())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.RenamePasskeyResponse{Passkey: passkeyToProto(k)}, nil
}

// DeletePasskey removes one of the person's passkeys.
func (s *People) DeletePasskey(ctx context.Context, req *accountsv1.DeletePasskeyRequest) (*accountsv1.DeletePasskeyResponse, error) {
	k, err := s.People.DeletePasskey(ctx, principalOf(ctx), req.GetPasskeyId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &accountsv1.DeletePasskeyResponse{Passkey: passkeyToProto(k)}, nil
}
