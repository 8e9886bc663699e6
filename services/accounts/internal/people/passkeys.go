package people

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// A signed-in person manages their own passkeys (docs/api-decisions.md#console): lists them,
// registers another (after a step-up, in a ceremony bound to the session), renames and removes
// one. Every call names the person of the session, so another person's passkey is not found.

var (
	// errLastPasskey keeps a person's only way in: they would be locked out until an ADMIN or
	// the operator sent a recovery invitation.
	errLastPasskey = fault.New(fault.Conflict, "this is your last passkey: add another one before removing it")
	// errSSOPasskey: a person of a client's single sign-on is that provider's to let in; a
	// passkey would open their sessions past the provider and its role claim.
	errSSOPasskey = fault.New(fault.Conflict, "you sign in through your organisation's single sign-on: passkeys are not used for your account")
)

// PasskeyInfo is a passkey as its person sees it: never its credential id.
type PasskeyInfo struct {
	ID             string
	Name           string
	CreatedAt      time.Time
	LastUsedAt     *time.Time
	BackupEligible bool
	BackedUp       bool
}

func passkeyInfo(k Passkey) (PasskeyInfo, error) {
	info := PasskeyInfo{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt}
	if len(k.Credential) > 0 {
		var c webauthn.Credential
		if err := json.Unmarshal(k.Credential, &c); err != nil {
			return info, fmt.Errorf("passkey %s: %w", k.ID, err)
		}
		info.BackupEligible, info.BackedUp = c.Flags.BackupEligible, c.Flags.BackupState
	}
	return info, nil
}

// Passkeys lists p's person's passkeys, oldest first.
func (s *Service) Passkeys(ctx context.Context, p principal.Principal) ([]PasskeyInfo, error) {
	keys, err := s.st.Passkeys(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	out := make([]PasskeyInfo, 0, len(keys))
	for _, k := range keys {
		info, err := passkeyInfo(k)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// registrationOptions are what every new passkey is asked for: discoverable (sign-in picks it
// without an e-mail), with user verification, and none of the person's own again.
func registrationOptions(u *user) []webauthn.RegistrationOption {
	var excl []protocol.CredentialDescriptor
	for _, c := range u.creds {
		excl = append(excl, c.Descriptor())
	}
	return []webauthn.RegistrationOption{
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementRequired, RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification: protocol.VerificationRequired,
		}),
		webauthn.WithExclusions(excl),
	}
}

// StartAddPasskey begins the registration of another passkey of p's person, for this session.
func (s *Service) StartAddPasskey(ctx context.Context, p principal.Principal) (Options, error) {
	sso, err := s.st.LockPerson(ctx, p.UserID)
	if err != nil {
		return Options{}, err
	}
	if sso {
		return Options{}, errSSOPasskey
	}
	u, err := s.userByID(ctx, s.st, p.UserID)
	if err != nil {
		return Options{}, err
	}
	opts, data, err := s.wa.BeginRegistration(u, registrationOptions(u)...)
	if err != nil {
		return Options{}, fmt.Errorf("begin passkey registration: %w", err)
	}
	return s.keep(ctx, s.st, PurposePasskey, p.SessionID, opts, data)
}

// AddPasskey finishes a registration StartAddPasskey began in p's session.
func (s *Service) AddPasskey(ctx context.Context, p principal.Principal, ceremonyID, credentialJSON, name string) (PasskeyInfo, error) {
	if err := checkCeremony(ceremonyID, credentialJSON); err != nil {
		return PasskeyInfo{}, err
	}
	name = strings.TrimSpace(name)
	if name != "" {
		if err := nameRule.Check("name", name); err != nil {
			return PasskeyInfo{}, err
		}
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(credentialJSON))
	if err != nil {
		return PasskeyInfo{}, ErrCeremony
	}
	var out PasskeyInfo
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		data, err := s.take(ctx, st, ceremonyID, PurposePasskey, p.SessionID)
		if err != nil {
			return err
		}
		sso, err := st.LockPerson(ctx, p.UserID)
		if err != nil {
			return err
		}
		if sso {
			return errSSOPasskey
		}
		u, err := s.userByID(ctx, st, p.UserID)
		if err != nil {
			return err
		}
		k, err := s.register(ctx, st, u, data, parsed, name)
		if err != nil {
			return err
		}
		out, err = passkeyInfo(k)
		return err
	})
	return out, err
}

// RenamePasskey renames one of p's person's passkeys.
func (s *Service) RenamePasskey(ctx context.Context, p principal.Principal, id, name string) (PasskeyInfo, error) {
	if _, err := uuid.Parse(id); err != nil {
		return PasskeyInfo{}, fault.ErrNotFound
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return PasskeyInfo{}, fault.Invalid("name", "must not be empty")
	}
	if err := nameRule.Check("name", name); err != nil {
		return PasskeyInfo{}, err
	}
	k, err := s.st.RenamePasskey(ctx, p.UserID, id, name)
	if err != nil {
		return PasskeyInfo{}, err
	}
	return passkeyInfo(k)
}

// DeletePasskey removes one of p's person's passkeys; their last is kept unless they have
// another way in. The sessions it opened go on: signing out everywhere ends those.
func (s *Service) DeletePasskey(ctx context.Context, p principal.Principal, id string) (PasskeyInfo, error) {
	if _, err := uuid.Parse(id); err != nil {
		return PasskeyInfo{}, fault.ErrNotFound
	}
	var out PasskeyInfo
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		sso, err := st.LockPerson(ctx, p.UserID)
		if err != nil {
			return err
		}
		keys, err := st.Passkeys(ctx, p.UserID)
		if err != nil {
			return err
		}
		mine := false
		for _, k := range keys {
			mine = mine || k.ID == id
		}
		if !mine {
			return fault.ErrNotFound
		}
		if len(keys) == 1 && !sso {
			return errLastPasskey
		}
		k, err := st.DeletePasskey(ctx, p.UserID, id)
		if err != nil {
			return err
		}
		out, err = passkeyInfo(k)
		return err
	})
	return out, err
}
