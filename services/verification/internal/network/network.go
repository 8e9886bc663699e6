// Package network reads what an operator's network shows about a request: the operator it came
// through and, when that operator's proxy vouches for it, the subscriber's number. An SDK
// session and a browser capture both take their number from here. A number header is believed
// only when the request comes from the operator's trusted ranges and holds a valid number.
package network

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// Request is what a request showed of the network it came through: the client's address (as
// the gateway resolved it), the headers an operator's proxy may have added, by canonical name,
// and for a browser capture the page's Origin header.
type Request struct {
	Addr    netip.Addr
	Headers map[string]string
	Origin  string
}

// Identity is what the network told of a request: its operator (Found false: none) and the
// number its proxy gave (the zero Number, E164 "", when none was believed).
type Identity struct {
	Operator operators.Operator
	Found    bool
	Number   phone.Number
}

// OperatorID is the id of the operator, nil when none was found.
func (i Identity) OperatorID() *string {
	if !i.Found {
		return nil
	}
	id := i.Operator.ID
	return &id
}

// Status is the capture status of the identity: CAPTURED with a number, NO_NETWORK_IDENTITY
// without.
func (i Identity) Status() domain.Status {
	if i.Number.E164 == "" {
		return domain.NoNetworkIdentity
	}
	return domain.Captured
}

// Identifier identifies requests by the operator registry.
type Identifier struct {
	ops *operators.Registry
	log *zap.Logger
}

// NewIdentifier returns the Identifier of ops.
func NewIdentifier(ops *operators.Registry, log *zap.Logger) *Identifier {
	return &Identifier{ops: ops, log: log}
}

// Operators lists the operators c may use, each with only the methods c may use there.
func (d *Identifier) Operators(c operators.Client) []operators.Operator {
	var out []operators.Operator
	for _, op := range d.ops.List() {
		if methods := op.MethodsFor(c); len(methods) > 0 {
			op.Methods = methods
			out = append(out, op)
		}
	}
	return out
}

// Identify picks the operator of a request, the one named (which must exist and be enabled for
// c) or else the one whose ranges the address is in (when enabled for c), and the number its
// proxy gave, believed only when c may use that operator's header enrichment.
func (d *Identifier) Identify(named *string, c operators.Client, r Request) (Identity, error) {
	var id Identity
	if named != nil {
		op, ok := d.ops.Get(*named)
		if !ok || !op.EnabledFor(c) {
			return Identity{}, fault.NotEnabled("operatorId", "operator %q is not available to this account", *named)
		}
		id.Operator, id.Found = op, true
	} else if op, ok := d.ops.ByAddr(r.Addr); ok && op.EnabledFor(c) {
		id.Operator, id.Found = op, true
	}
	if id.Found && id.Operator.Allows(c, operators.MethodHeaderEnrichment) {
		id.Number = d.number(id.Operator, r)
	}
	return id, nil
}

// number is the subscriber number op's proxy gave, or the zero Number: a header is believed
// only from the operator's trusted ranges, and only when it holds a valid number.
func (d *Identifier) number(op operators.Operator, r Request) phone.Number {
	if !op.Supports(operators.MethodHeaderEnrichment) || !op.Trusts(r.Addr) {
		return phone.Number{}
	}
	v := r.Headers[op.NumberHeader]
	if v == "" {
		return phone.Number{}
	}
	num, err := phone.Parse(v)
	if err != nil {
		d.log.Warn("operator sent an invalid number header", zap.String("operator", op.ID), zap.String("masked", phone.Mask(v)))
		return phone.Number{}
	}
	return num
}
