// Package operators is the operator registry (docs/api-decisions.md#operators): the mobile
// operators mnv can capture a number through, read from a YAML configuration file.
//
// For header enrichment an operator's proxy adds the subscriber's number to the request in a
// header; that header is believed only when the request comes from one of the operator's trusted
// address ranges (docs/api-decisions.md#operators). The registry answers which operator, if any, a
// source address belongs to (ByAddr), and which header names can carry a number (NumberHeaders).
//
// The file is decoded strictly: an unknown field is an error, so a typo cannot silently drop a
// setting. Parse validates every operator and names the operator and the field at fault.
// A Registry is immutable once built and safe for concurrent use; the Operator values it hands
// out are copies.
package operators

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/mnvhq/mnv/services/platform/principal"
)

// Method is a way of learning the subscriber's number from the operator.
type Method string

// The methods an operator can support.
const (
	// MethodHeaderEnrichment: the operator's proxy adds the number to the request in a header
	// (Operator.NumberHeader), believed only from the operator's Operator.TrustedRanges.
	MethodHeaderEnrichment Method = principal.MethodHeaderEnrichment
	// MethodNetworkAPI: the number is checked through the operator's network API.
	MethodNetworkAPI Method = principal.MethodNetworkAPI
)

// knownMethods lists every valid Method, in the order error messages name them.
var knownMethods = []Method{MethodHeaderEnrichment, MethodNetworkAPI}

// KnownMethod reports whether m is a method an operator can support.
func KnownMethod(m Method) bool { return slices.Contains(knownMethods, m) }

// MethodNames are the known methods, as messages name them.
func MethodNames() []string {
	out := make([]string, len(knownMethods))
	for i, m := range knownMethods {
		out[i] = string(m)
	}
	return out
}

// ValidID reports whether id has the shape of an operator's id (lower-case letters, digits and
// '-', at most 63 characters), whether or not the registry holds it.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// FeatureSandbox is the client feature that enables sandbox operators.
const FeatureSandbox = "SANDBOX"

// MaxNumberHeaderLen is the longest number header name accepted.
const MaxNumberHeaderLen = 64

// Operator is one mobile operator of the registry.
type Operator struct {
	// ID is the stable identifier clients see as operatorId: lower-case letters, digits and
	// '-', at most 63 characters, unique in the registry.
	ID string
	// Name is the operator's display name.
	Name string
	// Country is the ISO 3166-1 alpha-2 code of the operator's country ("ZZ" for none, as the
	// sandbox operator uses).
	Country string
	// MCCMNC lists the operator's mobile country and network codes, as "MCC-MNC" ("424-02").
	MCCMNC []string
	// Methods lists the methods the operator supports, at least one.
	Methods []Method
	// Sandbox marks a development operator: usable only by clients with the SANDBOX feature,
	// and the default set of a client without a list of its own (MethodsFor).
	Sandbox bool
	// TrustedRanges are, for header enrichment, the addresses the operator's proxy speaks
	// from, in masked form; IPv4 ranges are always in IPv4 form (a 4-in-6 range in the file
	// is converted). Empty when the operator does not support header enrichment.
	TrustedRanges []netip.Prefix
	// NumberHeader is, for header enrichment, the canonical name
	// (textproto.CanonicalMIMEHeaderKey) of the HTTP header that carries the number. Empty
	// when the operator does not support header enrichment.
	NumberHeader string
	// CAMARA is, for the network API, how mnv reaches the operator's CAMARA Number
	// Verification API; nil when the operator does not support NETWORK_API.
	CAMARA *CAMARA
	// Swap is how mnv asks the operator's CAMARA SIM Swap (and Device Swap) API whether a
	// line's SIM changed recently; nil when mnv does not.
	Swap *Swap
}

// Supports reports whether the operator supports method m.
func (o Operator) Supports(m Method) bool {
	return slices.Contains(o.Methods, m)
}

// Trusts reports whether addr lies inside one of the operator's trusted ranges. An
// IPv4-mapped IPv6 address (::ffff:a.b.c.d) counts as the IPv4 address it maps, and an IPv6
// zone is ignored.
func (o Operator) Trusts(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.WithZone("").Unmap()
	for _, p := range o.TrustedRanges {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Client is what decides which operators, and which of their methods, a client may use: its
// features (SANDBOX) and its own enablement, which accounts keeps (operators are enabled
// per client, docs/api-decisions.md#operators).
type Client struct {
	Features  []string
	Operators principal.Operators
}

// ClientOf is the Client of an authenticated caller.
func ClientOf(p principal.Principal) Client {
	return Client{Features: p.Features, Operators: p.Operators}
}

// MethodsFor returns the methods of o that c may use, in o's order: those o supports and c
// enabled. None (nil) means c may not use o at all. A sandbox operator needs the SANDBOX feature
// besides whatever c enabled. A client with the default set (Operators.Default) has every
// sandbox operator with all of its methods and nothing else; a client with its own list has the
// methods it granted o by id and those it granted every operator ("*"). Whether the client may
// use the product at all (VERIFY, STUCK_PLUS) is not this function's concern.
func (o Operator) MethodsFor(c Client) []Method {
	if o.Sandbox && !slices.Contains(c.Features, FeatureSandbox) {
		return nil
	}
	if c.Operators.Default {
		if !o.Sandbox {
			return nil
		}
		return slices.Clone(o.Methods)
	}
	enabled := c.Operators.MethodsOf(o.ID)
	var out []Method
	for _, m := range o.Methods {
		if slices.Contains(enabled, string(m)) {
			out = append(out, m)
		}
	}
	return out
}

// EnabledFor reports whether c may use o with at least one method.
func (o Operator) EnabledFor(c Client) bool {
	return len(o.MethodsFor(c)) > 0
}

// Allows reports whether c may use o with method m: o supports it and c enabled it.
func (o Operator) Allows(c Client, m Method) bool {
	return slices.Contains(o.MethodsFor(c), m)
}

// clone returns a copy of o that shares no memory with it.
func (o Operator) clone() Operator {
	o.MCCMNC = slices.Clone(o.MCCMNC)
	o.Methods = slices.Clone(o.Methods)
	o.TrustedRanges = slices.Clone(o.TrustedRanges)
	if o.CAMARA != nil {
		c := *o.CAMARA
		c.Scopes = slices.Clone(c.Scopes)
		c.PrivateKeyPEM = slices.Clone(c.PrivateKeyPEM)
		o.CAMARA = &c
	}
	if o.Swap != nil {
		s := *o.Swap
		s.PrivateKeyPEM = slices.Clone(s.PrivateKeyPEM)
		o.Swap = &s
	}
	return o
}

// Registry is a validated, immutable list of operators. The zero value is not usable; build
// one with Default, Load or Parse.
type Registry struct {
	ops     []Operator
	byID    map[string]int
	headers []string
}

//go:embed default.yaml
var defaultFile []byte

var defaultRegistry = sync.OnceValue(func() *Registry {
	r, err := Parse(defaultFile)
	if err != nil {
		panic("operators: the embedded default.yaml is invalid: " + err.Error())
	}
	return r
})

// Default returns the registry of the embedded default file (default.yaml): the sandbox
// operator only, trusting loopback and reading the number from X-Mnv-Sandbox-Msisdn.
func Default() *Registry {
	return defaultRegistry()
}

// ErrSandboxOff is the error of a registry file that lists a sandbox operator while the sandbox
// is switched off.
var ErrSandboxOff = errors.New("a sandbox operator, and the sandbox is switched off")

// Load reads and parses the registry file at path. An empty path means the built-in registry:
// Default when sandbox is true, no operator at all otherwise.
//
// The sandbox operator trusts loopback, and behind a same-host proxy or a mesh sidecar every
// request comes from loopback: any client with the SANDBOX feature could assert any number. So
// it exists only where the deployment switches it on (development, tests), and with the switch
// off a file that lists a sandbox operator is refused rather than quietly trimmed: whoever
// wrote it expected that operator to work.
func Load(path string, sandbox bool) (*Registry, error) {
	if path == "" {
		if sandbox {
			return Default(), nil
		}
		return &Registry{byID: map[string]int{}}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operators: %w", err)
	}
	r, err := parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !sandbox {
		for i, op := range r.ops {
			if op.Sandbox {
				return nil, fmt.Errorf("%s: operators[%d] (id %q): %w", path, i, op.ID, ErrSandboxOff)
			}
		}
	}
	return r, nil
}

// file is the YAML layout of a registry file.
type file struct {
	Operators []fileOperator `yaml:"operators"`
}

type fileOperator struct {
	ID               string            `yaml:"id"`
	Name             string            `yaml:"name"`
	Country          string            `yaml:"country"`
	MCCMNC           []string          `yaml:"mccMnc"`
	Methods          []string          `yaml:"methods"`
	Sandbox          bool              `yaml:"sandbox"`
	HeaderEnrichment *headerEnrichment `yaml:"headerEnrichment"`
	CAMARA           *fileCAMARA       `yaml:"camara"`
	Swap             *fileSwap         `yaml:"swap"`
}

type headerEnrichment struct {
	TrustedRanges []string `yaml:"trustedRanges"`
	NumberHeader  string   `yaml:"numberHeader"`
}

var (
	idPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	countryPattern = regexp.MustCompile(`^[A-Z]{2}$`)
	mccMncPattern  = regexp.MustCompile(`^[0-9]{3}-[0-9]{2,3}$`)
	headerPattern  = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
)

// Parse decodes and validates a registry file. Unknown fields are errors, as is a file with
// more than one YAML document. Each validation error names the operator (index and id) and
// the field. Parse reads no file: the CAMARA secrets (clientSecretFile, privateKeyFile) are
// checked for shape only and left unread; Load reads them.
func Parse(data []byte) (*Registry, error) { return parse(data, "") }

// parse is Parse, reading the CAMARA secret files relative to dir when dir is not "".
func parse(data []byte, dir string) (*Registry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("operators: the file is empty")
		}
		return nil, fmt.Errorf("operators: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("operators: the file must hold exactly one YAML document")
	}
	if len(f.Operators) == 0 {
		return nil, errors.New("operators: at least one operator is required")
	}

	r := &Registry{byID: make(map[string]int, len(f.Operators))}
	for i, fo := range f.Operators {
		op, err := fo.validate()
		if err == nil && op.CAMARA != nil && dir != "" {
			err = op.CAMARA.readSecrets("camara", dir)
		}
		if err == nil && op.Swap != nil && dir != "" {
			err = op.Swap.readSecrets("swap", dir)
		}
		if err != nil {
			return nil, fmt.Errorf("operators[%d] (id %q): %w", i, fo.ID, err)
		}
		if j, dup := r.byID[op.ID]; dup {
			return nil, fmt.Errorf("operators[%d] (id %q): id: already used by operators[%d]", i, fo.ID, j)
		}
		r.byID[op.ID] = i
		r.ops = append(r.ops, op)
		if op.NumberHeader != "" && !slices.Contains(r.headers, op.NumberHeader) {
			r.headers = append(r.headers, op.NumberHeader)
		}
	}
	slices.Sort(r.headers)
	return r, nil
}

// validate checks one operator of the file and converts it.
func (fo fileOperator) validate() (Operator, error) {
	op := Operator{ID: fo.ID, Name: fo.Name, Country: fo.Country, Sandbox: fo.Sandbox}
	if !idPattern.MatchString(fo.ID) {
		return op, errors.New("id: must be 1 to 63 lower-case letters, digits or '-', starting with a letter or digit")
	}
	if strings.TrimSpace(fo.Name) == "" {
		return op, errors.New("name: must not be empty")
	}
	if !countryPattern.MatchString(fo.Country) {
		return op, fmt.Errorf("country: %q is not two upper-case letters (ISO 3166-1 alpha-2, or ZZ)", fo.Country)
	}
	for j, code := range fo.MCCMNC {
		if !mccMncPattern.MatchString(code) {
			return op, fmt.Errorf("mccMnc[%d]: %q is not MCC-MNC (3 digits, '-', 2 or 3 digits)", j, code)
		}
		if slices.Contains(fo.MCCMNC[:j], code) {
			return op, fmt.Errorf("mccMnc[%d]: %q is listed twice", j, code)
		}
	}
	op.MCCMNC = slices.Clone(fo.MCCMNC)

	if len(fo.Methods) == 0 {
		return op, errors.New("methods: at least one method is required")
	}
	for j, s := range fo.Methods {
		m := Method(s)
		if !slices.Contains(knownMethods, m) {
			return op, fmt.Errorf("methods[%d]: unknown method %q (want one of %v)", j, s, knownMethods)
		}
		if slices.Contains(op.Methods, m) {
			return op, fmt.Errorf("methods[%d]: %s is listed twice", j, s)
		}
		op.Methods = append(op.Methods, m)
	}

	c := fo.CAMARA
	switch {
	case op.Supports(MethodNetworkAPI) && c == nil:
		return op, fmt.Errorf("camara: required by method %s", MethodNetworkAPI)
	case !op.Supports(MethodNetworkAPI) && c != nil:
		return op, fmt.Errorf("camara: given, but methods does not list %s", MethodNetworkAPI)
	case c != nil:
		cc, err := c.validate(op.Sandbox)
		if err != nil {
			return op, fmt.Errorf("camara.%w", err)
		}
		op.CAMARA = cc
	}
	if fo.Swap != nil {
		sw, err := fo.Swap.validate(op.Sandbox)
		if err != nil {
			return op, fmt.Errorf("swap.%w", err)
		}
		op.Swap = sw
	}

	he := fo.HeaderEnrichment
	switch {
	case op.Supports(MethodHeaderEnrichment) && he == nil:
		return op, fmt.Errorf("headerEnrichment: required by method %s", MethodHeaderEnrichment)
	case !op.Supports(MethodHeaderEnrichment) && he != nil:
		return op, fmt.Errorf("headerEnrichment: given, but methods does not list %s", MethodHeaderEnrichment)
	case he == nil:
		return op, nil
	}
	if len(he.TrustedRanges) == 0 {
		return op, errors.New("headerEnrichment.trustedRanges: at least one range is required")
	}
	for j, s := range he.TrustedRanges {
		p, err := parseRange(s)
		if err != nil {
			return op, fmt.Errorf("headerEnrichment.trustedRanges[%d]: %w", j, err)
		}
		op.TrustedRanges = append(op.TrustedRanges, p)
	}
	h := he.NumberHeader
	switch {
	case h == "":
		return op, errors.New("headerEnrichment.numberHeader: required")
	case len(h) > MaxNumberHeaderLen:
		return op, fmt.Errorf("headerEnrichment.numberHeader: longer than %d characters", MaxNumberHeaderLen)
	case !headerPattern.MatchString(h):
		return op, fmt.Errorf("headerEnrichment.numberHeader: %q is not a header name (letters, digits and '-' only)", h)
	}
	op.NumberHeader = textproto.CanonicalMIMEHeaderKey(h)
	return op, nil
}

// parseRange parses one CIDR of trustedRanges, returning it masked and, for an IPv4-mapped
// IPv6 range, in IPv4 form (Trusts compares unmapped addresses). A range covering every
// address is refused.
func parseRange(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR range: %w", s, err)
	}
	p = p.Masked()
	// After masking, only a range of /96 or longer keeps the ::ffff: marker.
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("%q would trust the whole internet", s)
	}
	return p, nil
}

// Get returns a copy of the operator with the given id.
func (r *Registry) Get(id string) (Operator, bool) {
	i, ok := r.byID[id]
	if !ok {
		return Operator{}, false
	}
	return r.ops[i].clone(), true
}

// ByAddr returns a copy of the first operator, in file order, that trusts addr (see
// Operator.Trusts). Only header-enrichment operators have trusted ranges.
func (r *Registry) ByAddr(addr netip.Addr) (Operator, bool) {
	for _, op := range r.ops {
		if op.Trusts(addr) {
			return op.clone(), true
		}
	}
	return Operator{}, false
}

// List returns copies of every operator, in file order.
func (r *Registry) List() []Operator {
	out := make([]Operator, len(r.ops))
	for i, op := range r.ops {
		out[i] = op.clone()
	}
	return out
}

// NumberHeaders returns the distinct canonical number header names of the registry, sorted.
// These are the headers an edge must let through to the service, and must never accept from
// anyone but an operator.
func (r *Registry) NumberHeaders() []string {
	return slices.Clone(r.headers)
}
