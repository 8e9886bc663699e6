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

// Registration is mnv's client registration at an operator's authorization server, as a camara or a
// swap block gives it (each has its own: an operator may register mnv once per API). Secrets
// come from files named in the registry, never from the registry itself.
type Registration struct {
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
}

// fileRegistration is a block's client registration, inline in the block.
type fileRegistration struct {
	ClientID         string `yaml:"clientId"`
	ClientAuth       string `yaml:"clientAuth"`
	ClientSecretFile string `yaml:"clientSecretFile"`
	PrivateKeyFile   string `yaml:"privateKeyFile"`
	KeyID            string `yaml:"keyId"`
}

// validate checks the registration and the files it names; its errors start with the field's
// name.
func (fc fileRegistration) validate() (Registration, error) {
	c := Registration{
		ClientID: fc.ClientID, ClientAuth: ClientAuth(fc.ClientAuth), ClientSecretFile: fc.ClientSecretFile,
		PrivateKeyFile: fc.PrivateKeyFile, KeyID: fc.KeyID,
	}
	if strings.TrimSpace(fc.ClientID) == "" || strings.ContainsAny(fc.ClientID, " \t\r\n:") {
		return c, errors.New("clientId: required, without spaces or ':'")
	}
	switch c.ClientAuth {
	case ClientSecretBasic:
		if fc.ClientSecretFile == "" {
			return c, errors.New("clientSecretFile: required by client_secret_basic")
		}
		if fc.PrivateKeyFile != "" || fc.KeyID != "" {
			return c, errors.New("privateKeyFile: given, but clientAuth is client_secret_basic")
		}
	case PrivateKeyJWT:
		if fc.PrivateKeyFile == "" {
			return c, errors.New("privateKeyFile: required by private_key_jwt")
		}
		if fc.ClientSecretFile != "" {
			return c, errors.New("clientSecretFile: given, but clientAuth is private_key_jwt")
		}
	default:
		return c, fmt.Errorf("clientAuth: %q is not %s or %s", c.ClientAuth, ClientSecretBasic, PrivateKeyJWT)
	}
	return c, nil
}

// readSecrets reads the registration's secret file, relative to dir (block names it in
// errors): the client secret for client_secret_basic, the PEM private key for private_key_jwt.
func (c *Registration) readSecrets(block, dir string) error {
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
	switch c.ClientAuth {
	case ClientSecretBasic:
		b, err := read("clientSecretFile", c.ClientSecretFile)
		if err != nil {
			return err
		}
		c.ClientSecret = string(b)
	case PrivateKeyJWT:
		b, err := read("privateKeyFile", c.PrivateKeyFile)
		if err != nil {
			return err
		}
		if blk, _ := pem.Decode(b); blk == nil || !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
			return fmt.Errorf("%s.privateKeyFile: not a PEM private key", block)
		}
		c.PrivateKeyPEM = b
	}
	return nil
}

// endpoint is one of a block's URL fields, by its name in the registry.
type endpoint struct{ name, url string }

// checkEndpoints checks where a block finds the operator's authorization server and its APIs:
// discoveryURL, or else every one of given (which may not be mixed with it), and the API root;
// its errors start with the field's name. either names the alternative to discoveryUrl.
func checkEndpoints(discoveryURL, either string, given []endpoint, apiRoot string, sandbox bool) error {
	explicit := false
	for _, e := range given {
		explicit = explicit || e.url != ""
	}
	switch {
	case discoveryURL != "" && explicit:
		return fmt.Errorf("discoveryUrl: give either discoveryUrl or %s, not both", either)
	case discoveryURL != "":
		if err := checkURL(discoveryURL, sandbox); err != nil {
			return fmt.Errorf("discoveryUrl: %w", err)
		}
	default:
		for _, e := range given {
			if e.url == "" {
				return fmt.Errorf("%s: required without discoveryUrl", e.name)
			}
			if err := checkURL(e.url, sandbox); err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
		}
	}
	if apiRoot == "" {
		return errors.New("apiRoot: required")
	}
	if err := checkURL(apiRoot, sandbox); err != nil {
		return fmt.Errorf("apiRoot: %w", err)
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
