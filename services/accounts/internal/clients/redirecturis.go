package clients

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// MaxRedirectURIs bounds a client's registered redirect URIs, and MaxRedirectURILength each
// one: a site has a few callbacks, and the list is read on every authorization.
const (
	MaxRedirectURIs      = 20
	MaxRedirectURILength = 512
)

// loopbackPrefixes are the loopback http redirect URIs whose port is not compared: a native app
// listens on a port the system gives it at run time (RFC 8252, section 7.3). Only the IP
// literals: a name, localhost included, could be resolved elsewhere.
var loopbackPrefixes = []string{"http://127.0.0.1", "http://[::1]"}

// ValidRedirectURI tells what is wrong with uri as a redirect URI to register, or nil. The
// URI is kept as written and compared as a whole string, so it must already be in the form a
// client sends: an absolute https URI (http only on a loopback host, for development and native
// apps), lower-case scheme and host, no user, no fragment, printable ASCII (percent-encode the
// rest).
func ValidRedirectURI(uri string) error {
	if len(uri) > MaxRedirectURILength {
		return fmt.Errorf("must be at most %d characters", MaxRedirectURILength)
	}
	if strings.ContainsFunc(uri, func(r rune) bool { return r <= 0x20 || r >= 0x7f }) {
		return errors.New("must be printable ASCII without spaces (percent-encode the rest)")
	}
	if strings.Contains(uri, "#") {
		return errors.New("must have no fragment")
	}
	u, err := url.Parse(uri)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return errors.New("must be an absolute URI, like https://shop.example/callback")
	}
	if !strings.HasPrefix(uri, u.Scheme+"://") {
		// url.Parse lower-cases the scheme; the URI is compared as it was written.
		return errors.New("the scheme and host must be lower case, as they are compared exactly")
	}
	if u.User != nil {
		return errors.New("must have no user part")
	}
	host := u.Hostname()
	if host == "" || strings.Contains(host, "*") {
		return errors.New("the host must be a name or an address, without wildcards")
	}
	if host != strings.ToLower(host) {
		return errors.New("the scheme and host must be lower case, as they are compared exactly")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback(host)) {
		return errors.New("must use https (http only on localhost, 127.0.0.1 or [::1])")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return errors.New("the port must be between 1 and 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("the port must be between 1 and 65535")
	}
	return nil
}

// RedirectURIMatches reports whether an authorization request's redirect_uri is the registered
// URI: the same string, or for a loopback IP literal over http the same string but for the
// port.
func RedirectURIMatches(registered, requested string) bool {
	if registered == requested {
		return true
	}
	rp, rrest, ok := splitLoopback(registered)
	if !ok {
		return false
	}
	qp, qrest, ok := splitLoopback(requested)
	return ok && rp == qp && rrest == qrest
}

// splitLoopback splits a loopback http URI into its scheme and host, and what follows its port.
func splitLoopback(uri string) (prefix, rest string, ok bool) {
	for _, p := range loopbackPrefixes {
		rest, found := strings.CutPrefix(uri, p)
		if !found {
			continue
		}
		if port, found := strings.CutPrefix(rest, ":"); found {
			end := strings.IndexAny(port, "/?#")
			if end < 0 {
				end = len(port)
			}
			if n, err := strconv.Atoi(port[:end]); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port[:end] {
				return "", "", false
			}
			rest = port[end:]
		}
		if rest != "" && rest[0] != '/' && rest[0] != '?' {
			return "", "", false // http://127.0.0.1.evil.example: another host
		}
		return p, rest, true
	}
	return "", "", false
}

// RedirectURIs lists the client's registered redirect URIs.
func (s *Service) RedirectURIs(ctx context.Context, clientID string) ([]domain.RedirectURI, error) {
	return s.st.RedirectURIs(ctx, clientID)
}

// SetRedirectURIs replaces the client's registered redirect URIs with uris (duplicates
// dropped) and returns the new list.
func (s *Service) SetRedirectURIs(ctx context.Context, clientID string, uris []string) ([]domain.RedirectURI, error) {
	valid := make([]string, 0, len(uris))
	for _, u := range uris {
		if err := ValidRedirectURI(u); err != nil {
			return nil, fault.Invalid("redirectUris", "%q %s", truncate(u, 80), err.Error())
		}
		if !slices.Contains(valid, u) {
			valid = append(valid, u)
		}
	}
	if len(valid) > MaxRedirectURIs {
		return nil, fault.Invalid("redirectUris", "at most %d redirect URIs", MaxRedirectURIs)
	}
	if _, err := uuid.Parse(clientID); err != nil {
		return nil, fault.ErrNotFound
	}
	var out []domain.RedirectURI
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		// The client row lock orders concurrent replacements of one client's list.
		if _, err := st.GetClient(ctx, clientID, true); err != nil {
			return err
		}
		if err := st.SetRedirectURIs(ctx, clientID, valid); err != nil {
			return err
		}
		var err error
		out, err = st.RedirectURIs(ctx, clientID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set redirect uris: %w", err)
	}
	return out, nil
}

// AllowsRedirectURI reports whether an authorization request of the client may send its code
// to uri (RedirectURIMatches one of its registered URIs), and whether the client registered
// any at all (so that a client that has not yet can be told so).
func (s *Service) AllowsRedirectURI(ctx context.Context, clientID, uri string) (allowed, registered bool, err error) {
	if _, err := uuid.Parse(clientID); err != nil {
		return false, false, nil //nolint:nilerr // a malformed client id is a client that registered nothing, not a failure
	}
	list, err := s.st.RedirectURIs(ctx, clientID)
	if err != nil {
		return false, false, err
	}
	for _, r := range list {
		if RedirectURIMatches(r.URI, uri) {
			return true, true, nil
		}
	}
	return false, len(list) > 0, nil
}
