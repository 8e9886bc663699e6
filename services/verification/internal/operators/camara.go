package operators

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// DefaultScopes are the scopes asked for when the registry names none: OpenID Connect, and the
// scope of the Number Verification API's verify operation.
var DefaultScopes = []string{"openid", "number-verification:verify"}

// CAMARA is how mnv consumes an operator's CAMARA Number Verification API (NETWORK_API): the
// operator's OpenID Connect endpoints (found by discovery, or given), the API root, and mnv's
// client registration there.
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
	Registration
	// Scopes are the scopes asked for in the authorization request.
	Scopes []string
	// HashedPhoneNumber: the operator accepts hashedPhoneNumber (SHA-256 of the E.164 number)
	// at /verify, which mnv then sends instead of the number itself.
	HashedPhoneNumber bool
}

type fileCAMARA struct {
	DiscoveryURL          string `yaml:"discoveryUrl"`
	Issuer                string `yaml:"issuer"`
	AuthorizationEndpoint string `yaml:"authorizationEndpoint"`
	TokenEndpoint         string `yaml:"tokenEndpoint"`
	APIRoot               string `yaml:"apiRoot"`
	fileRegistration      `yaml:",inline"`
	Scopes                []string `yaml:"scopes"`
	HashedPhoneNumber     bool     `yaml:"hashedPhoneNumber"`
}

// validate checks a camara block; its errors start with the field's name, below "camara.".
func (fc fileCAMARA) validate(sandbox bool) (*CAMARA, error) {
	err := checkEndpoints(fc.DiscoveryURL, "issuer, authorizationEndpoint and tokenEndpoint", []endpoint{
		{"issuer", fc.Issuer}, {"authorizationEndpoint", fc.AuthorizationEndpoint}, {"tokenEndpoint", fc.TokenEndpoint},
	}, fc.APIRoot, sandbox)
	if err != nil {
		return nil, err
	}
	registration, err := fc.fileRegistration.validate()
	if err != nil {
		return nil, err
	}
	c := &CAMARA{
		DiscoveryURL: fc.DiscoveryURL, Issuer: fc.Issuer, AuthorizationEndpoint: fc.AuthorizationEndpoint,
		TokenEndpoint: fc.TokenEndpoint, APIRoot: strings.TrimSuffix(fc.APIRoot, "/"), Registration: registration,
		Scopes: slices.Clone(fc.Scopes), HashedPhoneNumber: fc.HashedPhoneNumber,
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
