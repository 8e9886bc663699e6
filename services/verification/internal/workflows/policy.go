package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/otp"
)

// Channel is a way of verifying a number, a step of a workflow.
type Channel string

// Channels, in the order a default policy runs them.
const (
	// Silent is the network check (header enrichment or NETWORK_API) through the SDK session
	// or browser transaction the client already runs.
	Silent Channel = "SILENT"
	// SMSOTP is a one-time code sent by SMS and typed back.
	SMSOTP Channel = "SMS_OTP"
)

var knownChannels = []Channel{Silent, SMSOTP}

// SwapMode is what a recent SIM swap, or device swap, does to a workflow
// (docs/api-decisions.md#workflows).
type SwapMode string

// Swap modes: OFF never asks; BLOCK fails the workflow on a recent swap (or no answer);
// FALLBACK skips the silent step; REPORT only says what the check found.
const (
	SwapOff      SwapMode = "OFF"
	SwapBlock    SwapMode = "BLOCK"
	SwapFallback SwapMode = "FALLBACK"
	SwapReport   SwapMode = "REPORT"
)

var knownSwapModes = []SwapMode{SwapOff, SwapBlock, SwapFallback, SwapReport}

// Swap is the SIM-swap part of a policy, or its device-swap part (the same fields, the same
// meaning, asked of the operator's other API): a swap within MaxAgeHours counts as recent.
type Swap struct {
	Mode        SwapMode `json:"mode,omitempty"`
	MaxAgeHours *int     `json:"maxAgeHours,omitempty"`
}

// Settings is a policy's default part, or one country's override of it: a field left out
// takes the value of the level above (the country's from the default part, the default
// part's from DefaultPolicy). The JSON names are the API's and the stored form's.
type Settings struct {
	Channels              []Channel `json:"channels,omitempty"`
	SilentTimeoutSeconds  *int      `json:"silentTimeoutSeconds,omitempty"`
	SMSTimeoutSeconds     *int      `json:"smsTimeoutSeconds,omitempty"`
	CodeLength            *int      `json:"codeLength,omitempty"`
	CodeTTLSeconds        *int      `json:"codeTtlSeconds,omitempty"`
	MaxAttempts           *int      `json:"maxAttempts,omitempty"`
	ResendCooldownSeconds *int      `json:"resendCooldownSeconds,omitempty"`
	MaxResends            *int      `json:"maxResends,omitempty"`
	SIMSwap               *Swap     `json:"simSwap,omitempty"`
	// DeviceSwap asks the number's operator whether the line moved to another device (CAMARA
	// Device Swap), where the operator offers it.
	DeviceSwap *Swap `json:"deviceSwap,omitempty"`
	// AppName is the client's app or brand as the SMS text names it ("… is your <appName>
	// verification code"): 1 to MaxAppName characters of the GSM 03.38 basic set, so every
	// text still fits one SMS part (TestTextsFitOneSMS). Absent: a text without a name.
	AppName *string `json:"appName,omitempty"`
}

// Policy is a client's workflow policy: its default settings and overrides by country (ISO
// 3166-1 alpha-2, as the number's region), and what the pumping controls take from it.
//
// SMSCountries and DailySMSCap are the client's, not a country's: the policy is the one owner
// of a client's workflow settings, so the SMS allow-list and spend cap live here rather than in
// accounts (docs/architecture.md, "Pumping controls").
type Policy struct {
	Settings
	Countries map[string]Settings `json:"countries,omitempty"`
	// SMSCountries are the countries (ISO 3166-1 alpha-2, upper case) a code may be sent to by
	// SMS. Empty allows none: a client opts in country by country, so a leaked key cannot
	// text the world (a sandbox client's codes go to the sandbox SMSC and are not asked).
	SMSCountries []string `json:"smsCountries,omitempty"`
	// DailySMSCap caps the client's SMS spend per UTC day, in credits; nil takes the
	// service's (MNV_PUMPING_DAILY_CAP).
	DailySMSCap *int64 `json:"dailySmsCap,omitempty"`
}

// MaxDailySMSCap bounds a client's own cap: far above any real day, far below an overflow.
const MaxDailySMSCap = 1_000_000_000

// Resolved is the policy that applies to one workflow: every field set. A workflow keeps it
// from its start, so an edit of the policy never changes a running workflow.
type Resolved struct {
	Channels       []Channel     `json:"channels"`
	SilentTimeout  time.Duration `json:"silentTimeout"`
	SMSTimeout     time.Duration `json:"smsTimeout"`
	CodeLength     int           `json:"codeLength"`
	CodeTTL        time.Duration `json:"codeTtl"`
	MaxAttempts    int           `json:"maxAttempts"`
	ResendCooldown time.Duration `json:"resendCooldown"`
	MaxResends     int           `json:"maxResends"`
	SIMSwapMode    SwapMode      `json:"simSwapMode"`
	SIMSwapMaxAge  time.Duration `json:"simSwapMaxAge"`
	// DeviceSwapMode is "" in a workflow stored before the device-swap part existed: OFF.
	DeviceSwapMode   SwapMode      `json:"deviceSwapMode,omitempty"`
	DeviceSwapMaxAge time.Duration `json:"deviceSwapMaxAge,omitempty"`
	AppName          string        `json:"appName,omitempty"`
}

// Code is the one-time code rules of the resolved policy.
func (r Resolved) Code() otp.Rules {
	return otp.Rules{Length: r.CodeLength, TTL: r.CodeTTL, MaxAttempts: r.MaxAttempts, ResendCooldown: r.ResendCooldown, MaxResends: r.MaxResends}
}

// DefaultPolicy is what a client that never set a policy gets, and what a policy's missing
// fields take (docs/api-decisions.md#workflows): the network first, then an SMS code of 6
// digits valid 5 minutes, 5 attempts, a resend every 30 s up to 3, SIM and device swap not
// checked.
var DefaultPolicy = Resolved{
	Channels:         []Channel{Silent, SMSOTP},
	SilentTimeout:    60 * time.Second,
	SMSTimeout:       600 * time.Second,
	CodeLength:       6,
	CodeTTL:          300 * time.Second,
	MaxAttempts:      5,
	ResendCooldown:   30 * time.Second,
	MaxResends:       3,
	SIMSwapMode:      SwapOff,
	SIMSwapMaxAge:    240 * time.Hour,
	DeviceSwapMode:   SwapOff,
	DeviceSwapMaxAge: 240 * time.Hour,
}

// bound is an integer field's allowed range.
type bound struct {
	name     string
	min, max int
	get      func(*Settings) *int
}

var bounds = []bound{
	{"silentTimeoutSeconds", 5, 600, func(s *Settings) *int { return s.SilentTimeoutSeconds }},
	{"smsTimeoutSeconds", 30, 3600, func(s *Settings) *int { return s.SMSTimeoutSeconds }},
	{"codeLength", otp.MinLength, otp.MaxLength, func(s *Settings) *int { return s.CodeLength }},
	{"codeTtlSeconds", 60, 1800, func(s *Settings) *int { return s.CodeTTLSeconds }},
	{"maxAttempts", 1, 10, func(s *Settings) *int { return s.MaxAttempts }},
	{"resendCooldownSeconds", 0, 600, func(s *Settings) *int { return s.ResendCooldownSeconds }},
	{"maxResends", 0, 5, func(s *Settings) *int { return s.MaxResends }},
}

// maxCountries bounds the overrides of one policy: every region of the numbering plans fits.
const maxCountries = 250

// Validate checks a policy as written by a client: every value in range, channels known and
// distinct, countries real regions, and every country's resolved policy with a channel. The
// error is 400 INVALID_ARGUMENT naming the field ("countries.GB.codeLength").
func (p Policy) Validate() error {
	if err := p.Settings.validate(""); err != nil {
		return err
	}
	if len(p.Countries) > maxCountries {
		return fault.Invalid("countries", "at most %d countries", maxCountries)
	}
	for _, cc := range p.countryCodes() {
		if !phone.IsRegion(cc) {
			return fault.Invalid("countries", "%q is not an ISO 3166-1 alpha-2 country code of the numbering plans (upper case)", cc)
		}
		s := p.Countries[cc]
		if err := s.validate("countries." + cc + "."); err != nil {
			return err
		}
	}
	if len(p.SMSCountries) > maxCountries {
		return fault.Invalid("smsCountries", "at most %d countries", maxCountries)
	}
	for i, cc := range p.SMSCountries {
		if !phone.IsRegion(cc) {
			return fault.Invalid(fmt.Sprintf("smsCountries[%d]", i), "%q is not an ISO 3166-1 alpha-2 country code of the numbering plans (upper case)", cc)
		}
		if slices.Index(p.SMSCountries, cc) != i {
			return fault.Invalid(fmt.Sprintf("smsCountries[%d]", i), "%s is listed twice", cc)
		}
	}
	if c := p.DailySMSCap; c != nil && (*c < 1 || *c > MaxDailySMSCap) {
		return fault.Invalid("dailySmsCap", "must be between 1 and %d credits", MaxDailySMSCap)
	}
	return nil
}

func (p Policy) countryCodes() []string {
	ccs := make([]string, 0, len(p.Countries))
	for cc := range p.Countries {
		ccs = append(ccs, cc)
	}
	sort.Strings(ccs)
	return ccs
}

func (s *Settings) validate(prefix string) error {
	if s.Channels != nil {
		if len(s.Channels) == 0 {
			return fault.Invalid(prefix+"channels", "must name at least one channel")
		}
		for i, c := range s.Channels {
			if !slices.Contains(knownChannels, c) {
				return fault.Invalid(fmt.Sprintf("%schannels[%d]", prefix, i), "must be one of %v", knownChannels)
			}
			if slices.Index(s.Channels, c) != i {
				return fault.Invalid(fmt.Sprintf("%schannels[%d]", prefix, i), "%s is listed twice", c)
			}
		}
	}
	for _, b := range bounds {
		if v := b.get(s); v != nil && (*v < b.min || *v > b.max) {
			return fault.Invalid(prefix+b.name, "must be between %d and %d", b.min, b.max)
		}
	}
	if n := s.AppName; n != nil {
		if err := validAppName(*n); err != nil {
			return fault.Invalid(prefix+"appName", "%s", err.Error())
		}
	}
	for _, g := range []struct {
		name string
		sw   *Swap
	}{{"simSwap", s.SIMSwap}, {"deviceSwap", s.DeviceSwap}} {
		if err := g.sw.validate(prefix + g.name); err != nil {
			return err
		}
	}
	return nil
}

func (sw *Swap) validate(field string) error {
	if sw == nil {
		return nil
	}
	if sw.Mode != "" && !slices.Contains(knownSwapModes, sw.Mode) {
		return fault.Invalid(field+".mode", "must be one of %v", knownSwapModes)
	}
	if v := sw.MaxAgeHours; v != nil && (*v < 1 || *v > 2400) {
		return fault.Invalid(field+".maxAgeHours", "must be between 1 and 2400")
	}
	return nil
}

// Resolve is the policy for a number of country (its region, "" when unknown): DefaultPolicy,
// then the policy's default settings, then the country's override, each field from the most
// specific level that sets it.
func (p Policy) Resolve(country string) Resolved {
	r := DefaultPolicy
	r.Channels = slices.Clone(r.Channels)
	p.Settings.apply(&r)
	if s, ok := p.Countries[country]; ok && country != "" {
		s.apply(&r)
	}
	return r
}

func (s Settings) apply(r *Resolved) {
	if len(s.Channels) > 0 {
		r.Channels = slices.Clone(s.Channels)
	}
	secs := func(v *int, d *time.Duration) {
		if v != nil {
			*d = time.Duration(*v) * time.Second
		}
	}
	ints := func(v *int, d *int) {
		if v != nil {
			*d = *v
		}
	}
	secs(s.SilentTimeoutSeconds, &r.SilentTimeout)
	secs(s.SMSTimeoutSeconds, &r.SMSTimeout)
	ints(s.CodeLength, &r.CodeLength)
	secs(s.CodeTTLSeconds, &r.CodeTTL)
	ints(s.MaxAttempts, &r.MaxAttempts)
	secs(s.ResendCooldownSeconds, &r.ResendCooldown)
	ints(s.MaxResends, &r.MaxResends)
	if s.AppName != nil {
		r.AppName = *s.AppName
	}
	s.SIMSwap.apply(&r.SIMSwapMode, &r.SIMSwapMaxAge)
	s.DeviceSwap.apply(&r.DeviceSwapMode, &r.DeviceSwapMaxAge)
}

func (sw *Swap) apply(mode *SwapMode, maxAge *time.Duration) {
	if sw == nil {
		return
	}
	if sw.Mode != "" {
		*mode = sw.Mode
	}
	if sw.MaxAgeHours != nil {
		*maxAge = time.Duration(*sw.MaxAgeHours) * time.Hour
	}
}

// MaxAppName is the longest app name a policy may give the SMS text, in characters: with the
// longest code and lifetime every text still fits one SMS part.
const MaxAppName = 20

// gsmPrinted are the printable characters of the GSM 03.38 default alphabet's basic table: one
// septet each in GSM 7-bit (the extension table's characters, such as '€' or '{', take two,
// and the line breaks would let a name forge lines of the text). smsc's tests hold it to the
// SMPP encoder's table.
const gsmPrinted = "@£$¥èéùìòÇØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"

// GSMPrinted lists the characters an app name may use (for tests of the SMS encoding).
func GSMPrinted() string { return gsmPrinted }

// validAppName checks an app name: 1 to MaxAppName characters of gsmPrinted, not starting or
// ending with a space.
func validAppName(n string) error {
	if l := utf8.RuneCountInString(n); l < 1 || l > MaxAppName {
		return fmt.Errorf("must be 1 to %d characters", MaxAppName)
	}
	if strings.TrimSpace(n) != n {
		return errors.New("must not start or end with a space")
	}
	for _, r := range n {
		if !strings.ContainsRune(gsmPrinted, r) {
			return fmt.Errorf("%q is not a character of the GSM 03.38 basic set (letters, digits, common signs; no line break, no €, [, ], {, }, ~, ^, | or \\)", r)
		}
	}
	return nil
}

// ParsePolicy reads a policy as stored (the API's JSON), refusing unknown fields so a typo
// never silently takes a default.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fault.Invalid("policy", "not a policy: %v", err)
	}
	return p, nil
}
