package operators

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ClientAuth is how mnv authenticates itself at an operator's token endpoint.
type ClientAuth string

// The client authentications of the CAMARA security profile mnv speaks.
const (
	// ClientSecretBasic: the client id and secret in an HTTP Basic Authorization header.
	ClientSecretBasic ClientAuth = "client_secret_basic"
	// PrivateKeyJWT: a JWT signed with mnv's private key (RFC 7523), the operator holding the
	// public key.
	PrivateKeyJWT ClientAuth = "private_key_jwt"
)

// DefaultScopes are the scopes asked for when the registry names none: OpenID Connect, and the
// scope of the Number Verification API's verify operation.
var DefaultScopes = []string{"openid", "number-verification:verify"}

// CAMARA is how mnv consumes an operator's CAMARA Number Verification API (NETWORK_API): the
// operator's OpenID Connect endpoints (found by discovery, or given), the API root, and mnv's
// client registration there. Secrets come from files named in the registry, never from the
// registry itself.
type CAMARA struct {
	// DiscoveryURL is the operator's OpenID Connect discovery document
	// (…/.well-known/openid-configuration); empty when the endpoints are given instead.
	DiscoveryURL string
	// Issuer, AuthorizationEndpoint and TokenEndpoint are the operator's endpoints when no
	// discovery URL is given.
	Issuer                string
	AuthorizationEndpoint string
	TokenEndpoint         string
	// APIRoot is the root of the operator's CAMARA APIs: the Number Verification API is at
	// APIRoot + "/number-verification/v2".
	APIRoot string
	// ClientID is mnv's client id at the operator.
	ClientID string
	// ClientAuth is how mnv authenticates at the token endpoint.
	ClientAuth ClientAuth
	// ClientSecretFile, for client_secret_basic, holds the client secret; PrivateKeyFile, for
	// private_key_jwt, the PEM private key (RSA or EC) and KeyID its "kid", if the operator
	// wants one. Relative paths are relative to the registry file.
	ClientSecretFile string
	PrivateKeyFile   string
	KeyID            string
	// ClientSecret and PrivateKeyPEM are the contents of those files, read by Load (empty after
	// Parse, which reads no file).
	ClientSecret  string
	PrivateKeyPEM []byte
	// Scopes are the scopes asked for in the authorization request.
	Scopes []string
	// HashedPhoneNumber: the operator accepts hashedPhoneNumber (SHA-256 of the E.164 number)
	// at /verify, which mnv then sends instead of the number itself.
	HashedPhoneNumber bool
}

type fileCAMARA struct {
	DiscoveryURL          string   `yaml:"discoveryUrl"`
	Issuer                string   `yaml:"issuer"`
	AuthorizationEndpoint string   `yaml:"authorizationEndpoint"`
	TokenEndpoint         string   `yaml:"tokenEndpoint"`
	APIRoot               string   `yaml:"apiRoot"`
	ClientID              string   `yaml:"clientId"`
	ClientAuth            string   `yaml:"clientAuth"`
	ClientSecretFile      string   `yaml:"clientSecretFile"`
	PrivateKeyFile        string   `yaml:"privateKeyFile"`
	KeyID                 string   `yaml:"keyId"`
	Scopes                []string `yaml:"scopes"`
	HashedPhoneNumber     bool     `yaml:"hashedPhoneNumber"`
}

// validate checks a camara block; its errors start with the field's name, below "camara.".
func (fc fileCAMARA) validate(sandbox bool) (*CAMARA, error) {
	c := &CAMARA{
		DiscoveryURL: fc.DiscoveryURL, Issuer: fc.Issuer, AuthorizationEndpoint: fc.AuthorizationEndpoint,
		TokenEndpoint: fc.TokenEndpoint, APIRoot: strings.TrimSuffix(fc.APIRoot, "/"), ClientID: fc.ClientID,
		ClientAuth: ClientAuth(fc.ClientAuth), ClientSecretFile: fc.ClientSecretFile, PrivateKeyFile: fc.PrivateKeyFile,
		KeyID: fc.KeyID, Scopes: slices.Clone(fc.Scopes), HashedPhoneNumber: fc.HashedPhoneNumber,
	}
	explicit := fc.Issuer != "" || fc.AuthorizationEndpoint != "" || fc.TokenEndpoint != ""
	switch {
	case fc.DiscoveryURL != "" && explicit:
		return nil, errors.New("discoveryUrl: give either discoveryUrl or issuer, authorizationEndpoint and tokenEndpoint, not both")
	case fc.DiscoveryURL != "":
		if err := checkURL(fc.DiscoveryURL, sandbox); err != nil {
			return nil, fmt.Errorf("discoveryUrl: %w", err)
		}
	default:
		for _, f := range []struct{ name, v string }{
			{"issuer", fc.Issuer}, {"authorizationEndpoint", fc.AuthorizationEndpoint}, {"tokenEndpoint", fc.TokenEndpoint},
		} {
			if f.v == "" {
				return nil, fmt.Errorf("%s: required without discoveryUrl", f.name)
			}
			if err := checkURL(f.v, sandbox); err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
		}
	}
	if fc.APIRoot == "" {
		return nil, errors.New("apiRoot: required")
	}
	if err := checkURL(fc.APIRoot, sandbox); err != nil {
		return nil, fmt.Errorf("apiRoot: %w", err)
	}
	if strings.TrimSpace(fc.ClientID) == "" || strings.ContainsAny(fc.ClientID, " \t\r\n:") {
		return nil, errors.New("clientId: required, without spaces or ':'")
	}
	if err := checkClientAuth(c.ClientAuth, fc.ClientSecretFile, fc.PrivateKeyFile, fc.KeyID); err != nil {
		return nil, err
	}
	if len(c.Scopes) == 0 {
		c.Scopes = slices.Clone(DefaultScopes)
	}
	for j, sc := range c.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			return nil, fmt.Errorf("scopes[%d]: %q is not a scope", j, sc)
		}
		if slices.Contains(c.Scopes[:j], sc) {
			return nil, fmt.Errorf("scopes[%d]: %q is listed twice", j, sc)
		}
	}
	if !slices.Contains(c.Scopes, "openid") {
		return nil, errors.New("scopes: must include openid (the authorization code flow is OpenID Connect's)")
	}
	return c, nil
}

// checkClientAuth checks a client registration's authentication and the files it names; its
// errors start with the field's name. The camara and swap blocks share it.
func checkClientAuth(auth ClientAuth, secretFile, keyFile, keyID string) error {
	switch auth {
	case ClientSecretBasic:
		if secretFile == "" {
			return errors.New("clientSecretFile: required by client_secret_basic")
		}
		if keyFile != "" || keyID != "" {
			return errors.New("privateKeyFile: given, but clientAuth is client_secret_basic")
		}
	case PrivateKeyJWT:
		if keyFile == "" {
			return errors.New("privateKeyFile: required by private_key_jwt")
		}
		if secretFile != "" {
			return errors.New("clientSecretFile: given, but clientAuth is private_key_jwt")
		}
	default:
		return fmt.Errorf("clientAuth: %q is not %s or %s", auth, ClientSecretBasic, PrivateKeyJWT)
	}
	return nil
}

// checkURL accepts an absolute https URL without user info, query or fragment; plain http only
// on loopback or for a sandbox operator (development and tests).
func checkURL(s string, sandbox bool) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not carry user info, a query or a fragment", s)
	}
	if u.Scheme == "http" && !sandbox {
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%q: plain http is allowed only on loopback or for a sandbox operator", s)
		}
	}
	return nil
}

// readSecrets reads the secret files, relative to dir.
func (c *CAMARA) readSecrets(dir string) error {
	secret, key, err := readClientSecrets("camara", dir, c.ClientAuth, c.ClientSecretFile, c.PrivateKeyFile)
	c.ClientSecret, c.PrivateKeyPEM = secret, key
	return err
}

// readClientSecrets reads the secret file of a client registration (block names it in errors),
// relative to dir: the client secret for client_secret_basic, the PEM private key for
// private_key_jwt.
func readClientSecrets(block, dir string, auth ClientAuth, secretFile, keyFile string) (string, []byte, error) {
	read := func(name, p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", block, name, err)
		}
		if b = bytes.TrimSpace(b); len(b) == 0 {
			return nil, fmt.Errorf("%s.%s: %s is empty", block, name, p)
		}
		return b, nil
	}
	switch auth {
	case ClientSecretBasic:
		b, err := read("clientSecretFile", secretFile)
		if err != nil {
			return "", nil, err
		}
		return string(b), nil, nil
	case PrivateKeyJWT:
		b, err := read("privateKeyFile", keyFile)
		if err != nil {
			return "", nil, err
		}
		if blk, _ := pem.Decode(b); blk == nil || !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
			return "", nil, fmt.Errorf("%s.privateKeyFile: not a PEM private key", block)
		}
		return "", b, nil
	}
	return "", nil, nil
}
