package clients

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// MaxWebOrigins bounds a client's allowed origins: a site has a handful, and the list is read
// on every browser capture.
const MaxWebOrigins = 20

// CanonicalOrigin returns the form in which a browser writes origin in its Origin header
// (RFC 6454: lower-case scheme and host, no default port, no path), or an error saying what is
// wrong with it. Only https origins are accepted, and http on a loopback host for development:
// a page served over plain http elsewhere can be rewritten by anyone on its path, so it proves
// nothing about who runs it.
func CanonicalOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return "", errors.New("must be scheme://host[:port], like https://shop.example")
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", errors.New("must be scheme://host[:port] with no path, query or user, like https://shop.example")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if host == "" || strings.ContainsFunc(host, func(r rune) bool { return r > 0x7e || r <= 0x20 || r == '*' }) {
		return "", errors.New("the host must be a name (in its xn-- form when not ASCII) or an address, without wildcards")
	}
	if scheme != "https" && !(scheme == "http" && loopback(host)) {
		return "", errors.New("must use https (http only on localhost, 127.0.0.1 or [::1])")
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", errors.New("the port must be between 1 and 65535")
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = ""
		} else {
			port = strconv.Itoa(n)
		}
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	return scheme + "://" + hostport, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WebOrigins lists the origins allowed to capture the client's browser flows.
func (s *Service) WebOrigins(ctx context.Context, clientID string) ([]domain.WebOrigin, error) {
	return s.st.WebOrigins(ctx, clientID)
}

// SetWebOrigins replaces the client's allowed origins with origins (each canonicalised,
// duplicates dropped) and returns the new list.
func (s *Service) SetWebOrigins(ctx context.Context, clientID string, origins []string) ([]domain.WebOrigin, error) {
	canon := make([]string, 0, len(origins))
	for _, o := range origins {
		c, err := CanonicalOrigin(o)
		if err != nil {
			return nil, fault.Invalid("origins", "%q %s", truncate(o, 80), err.Error())
		}
		if !slices.Contains(canon, c) {
			canon = append(canon, c)
		}
	}
	if len(canon) > MaxWebOrigins {
		return nil, fault.Invalid("origins", "at most %d origins", MaxWebOrigins)
	}
	if _, err := uuid.Parse(clientID); err != nil {
		return nil, fault.ErrNotFound
	}
	var out []domain.WebOrigin
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		// The client row lock orders concurrent replacements of one client's list.
		if _, err := st.GetClient(ctx, clientID, true); err != nil {
			return err
		}
		if err := st.SetWebOrigins(ctx, clientID, canon); err != nil {
			return err
		}
		var err error
		out, err = st.WebOrigins(ctx, clientID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set web origins: %w", err)
	}
	return out, nil
}

// AllowsWebOrigin reports whether a browser page whose Origin header is origin may capture the
// client's browser flows. Anything that is not a canonical allowed origin is refused, the
// opaque origin "null" included.
func (s *Service) AllowsWebOrigin(ctx context.Context, clientID, origin string) (bool, error) {
	c, err := CanonicalOrigin(origin)
	if err != nil || c != origin {
		// Browsers send the canonical form; anything else did not come from one.
		return false, nil //nolint:nilerr // a malformed origin is refused, not an error
	}
	if _, err := uuid.Parse(clientID); err != nil {
		return false, nil //nolint:nilerr // a malformed id names no client: nothing is allowed
	}
	return s.st.HasWebOrigin(ctx, clientID, c)
}

// truncate keeps an echoed value short: a list entry may be anything a caller sent.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
