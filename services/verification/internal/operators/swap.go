package operators

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// SwapGrant is how mnv obtains the access token of a SIM Swap or Device Swap call.
type SwapGrant string

// The grants of CAMARA's identity and consent guidelines for a call made by a backend.
const (
	// GrantCIBA is OpenID Connect Client-Initiated Backchannel Authentication: a
	// backchannel authentication request naming the line (login_hint=tel:+…) and the purpose,
	// then the token endpoint polled with the CIBA grant. The token is three-legged: it names
	// the line, so the API call carries no number. CAMARA's default for backend calls.
	GrantCIBA SwapGrant = "ciba"
	// GrantClientCredentials is the two-legged client credentials grant, for an operator whose
	// onboarding agreed on it: the token names no line, so the call carries phoneNumber.
	GrantClientCredentials SwapGrant = "client_credentials"
)

// DefaultSwapPurpose is the purpose asked for when the registry names none: fraud prevention
// and detection, the purpose the SIM Swap API exists for (W3C DPV, as CAMARA writes purposes).
const DefaultSwapPurpose = "dpv:FraudPreventionAndDetection"

// Swap is how mnv calls an operator's CAMARA SIM Swap API, and its Device Swap API where the
// operator offers one: the operator's token endpoints (by discovery, or given), the API root,
// mnv's client registration there (the same client authentications as the camara block's) and
// the grant. An operator may have it without NETWORK_API: a SIM swap check needs no capture.
type Swap struct {
	// DiscoveryURL is the operator's OpenID Connect discovery document, which names the token
	// endpoint and, for CIBA, the backchannel authentication endpoint; empty when they are
	// given instead.
	DiscoveryURL string
	// TokenEndpoint and BackchannelEndpoint are the endpoints when no discovery URL is given
	// (the backchannel one for CIBA only).
	TokenEndpoint       string
	BackchannelEndpoint string
	// APIRoot is the root of the operator's CAMARA APIs: SIM Swap is at
	// APIRoot + "/sim-swap/" + SIMSwapVersion.
	APIRoot string
	Registration
	// Grant is the token grant: CIBA (default) or client credentials.
	Grant SwapGrant
	// Purpose is the purpose put in the scope beside the operation's scope.
	Purpose string
	// SIMSwapVersion and DeviceSwapVersion are the versions in the APIs' base paths ("v2",
	// "v1"); empty when the operator does not offer that API.
	SIMSwapVersion    string
	DeviceSwapVersion string
}

type fileSwap struct {
	DiscoveryURL        string `yaml:"discoveryUrl"`
	TokenEndpoint       string `yaml:"tokenEndpoint"`
	BackchannelEndpoint string `yaml:"backchannelAuthenticationEndpoint"`
	APIRoot             string `yaml:"apiRoot"`
	fileRegistration    `yaml:",inline"`
	Grant               string `yaml:"grant"`
	Purpose             string `yaml:"purpose"`
	SIMSwap             string `yaml:"simSwap"`
	DeviceSwap          string `yaml:"deviceSwap"`
}

var (
	// versionPattern is a CAMARA base path's version: v2, v1, v0.4, v1rc1.
	versionPattern = regexp.MustCompile(`^v[0-9][a-z0-9.]{0,15}$`)
	purposePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9:#._-]{0,127}$`)
)

// validate checks a swap block; its errors start with the field's name, below "swap.".
func (fs fileSwap) validate(sandbox bool) (*Swap, error) {
	s := &Swap{
		DiscoveryURL: fs.DiscoveryURL, TokenEndpoint: fs.TokenEndpoint, BackchannelEndpoint: fs.BackchannelEndpoint,
		APIRoot: strings.TrimSuffix(fs.APIRoot, "/"), Grant: SwapGrant(fs.Grant), Purpose: fs.Purpose,
		SIMSwapVersion: fs.SIMSwap, DeviceSwapVersion: fs.DeviceSwap,
	}
	if s.Grant == "" {
		s.Grant = GrantCIBA
	}
	if s.Grant != GrantCIBA && s.Grant != GrantClientCredentials {
		return nil, fmt.Errorf("grant: %q is not %s or %s", fs.Grant, GrantCIBA, GrantClientCredentials)
	}
	// The backchannel endpoint is CIBA's alone.
	endpoints := []endpoint{{"tokenEndpoint", fs.TokenEndpoint}, {"backchannelAuthenticationEndpoint", fs.BackchannelEndpoint}}
	if s.Grant != GrantCIBA && fs.BackchannelEndpoint != "" && fs.DiscoveryURL == "" {
		return nil, errors.New("backchannelAuthenticationEndpoint: given, but the grant is client_credentials")
	}
	if s.Grant != GrantCIBA && fs.DiscoveryURL == "" {
		endpoints = endpoints[:1] // given beside discoveryUrl, it is refused for mixing the two
	}
	if err := checkEndpoints(fs.DiscoveryURL, "the endpoints", endpoints, fs.APIRoot, sandbox); err != nil {
		return nil, err
	}
	var err error
	if s.Registration, err = fs.fileRegistration.validate(); err != nil {
		return nil, err
	}
	if s.Purpose == "" {
		s.Purpose = DefaultSwapPurpose
	}
	if !purposePattern.MatchString(s.Purpose) {
		return nil, fmt.Errorf("purpose: %q is not a scope value", s.Purpose)
	}
	if fs.SIMSwap == "" && fs.DeviceSwap == "" {
		return nil, errors.New("simSwap: name the SIM Swap API's version (or deviceSwap's): a swap block offers at least one")
	}
	for _, v := range []struct{ name, v string }{{"simSwap", fs.SIMSwap}, {"deviceSwap", fs.DeviceSwap}} {
		if v.v != "" && !versionPattern.MatchString(v.v) {
			return nil, fmt.Errorf("%s: %q is not an API version of a base path (v2, v1, v0.4)", v.name, v.v)
		}
	}
	return s, nil
}
