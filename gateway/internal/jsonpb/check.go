package jsonpb

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mnvhq/mnv/services/platform/apijson"
)

// slot is where a value sits: what the schema says it must be.
type slot struct {
	// msg is set for the body itself: an object of that message.
	msg protoreflect.MessageDescriptor
	// fd is the field the value belongs to; with msg nil too, nothing is checked (a key
	// protojson will refuse as unknown, or the inside of a Struct).
	fd protoreflect.FieldDescriptor
	// elem: the value is one element of fd's list, or one value of fd's map.
	elem bool
}

// form is the JSON a value must be.
type form int

const (
	anyForm     form = iota // not checked
	objectForm              // a message (fields checked when msg is set), a map, a Struct
	arrayForm               // a list
	stringForm              // a string, bytes, a Timestamp, a Duration
	boolForm                // a boolean
	numberForm              // a float or double
	integerForm             // an integer of kind
	enumForm                // a name of enum
)

// rule is what a slot's value must be.
type rule struct {
	form form
	kind protoreflect.Kind           // integerForm
	enum protoreflect.EnumDescriptor // enumForm
	// msg: an object whose members are that message's fields.
	msg protoreflect.MessageDescriptor
	// of: a list or map whose elements are of that field.
	of protoreflect.FieldDescriptor
}

func (sl slot) rule() rule {
	switch {
	case sl.fd == nil && sl.msg != nil:
		return rule{form: objectForm, msg: sl.msg}
	case sl.fd == nil:
		return rule{}
	case !sl.elem && sl.fd.IsList():
		return rule{form: arrayForm, of: sl.fd}
	case !sl.elem && sl.fd.IsMap():
		return rule{form: objectForm, of: sl.fd}
	case sl.fd.IsMap():
		return valueRule(sl.fd.MapValue())
	}
	return valueRule(sl.fd)
}

// member is the slot of the value of key in an object of this rule.
func (r rule) member(key string) slot {
	switch {
	case r.msg != nil:
		fields := r.msg.Fields()
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		return slot{fd: fd}
	case r.of != nil && r.of.IsMap():
		return slot{fd: r.of, elem: true}
	}
	return slot{}
}

// element is the slot of an element of an array of this rule.
func (r rule) element() slot {
	if r.of != nil && r.of.IsList() {
		return slot{fd: r.of, elem: true}
	}
	return slot{}
}

// valueRule is the rule of one value of fd (the field, or an element of its list or map).
func valueRule(fd protoreflect.FieldDescriptor) rule {
	switch k := fd.Kind(); k {
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return rule{}
		}
		return rule{form: enumForm, enum: fd.Enum()}
	case protoreflect.BoolKind:
		return rule{form: boolForm}
	case protoreflect.StringKind, protoreflect.BytesKind:
		return rule{form: stringForm}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return rule{form: numberForm}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageRule(fd.Message())
	default:
		if _, ok := intRanges[k]; ok {
			return rule{form: integerForm, kind: k}
		}
	}
	return rule{}
}

// messageRule is the rule of a message value: an object of its fields, or the JSON form
// protojson gives a well-known type.
func messageRule(md protoreflect.MessageDescriptor) rule {
	name := md.FullName()
	if name.Parent() != "google.protobuf" {
		return rule{form: objectForm, msg: md}
	}
	switch name.Name() {
	case "Int32Value":
		return rule{form: integerForm, kind: protoreflect.Int32Kind}
	case "UInt32Value":
		return rule{form: integerForm, kind: protoreflect.Uint32Kind}
	case "Int64Value":
		return rule{form: integerForm, kind: protoreflect.Int64Kind}
	case "UInt64Value":
		return rule{form: integerForm, kind: protoreflect.Uint64Kind}
	case "DoubleValue", "FloatValue":
		return rule{form: numberForm}
	case "BoolValue":
		return rule{form: boolForm}
	case "StringValue", "BytesValue", "Timestamp", "Duration", "FieldMask":
		return rule{form: stringForm}
	case "Struct", "Any", "Empty":
		return rule{form: objectForm}
	case "ListValue":
		return rule{form: arrayForm}
	}
	return rule{} // Value: anything
}

// tokenKind is the JSON kind of a value.
type tokenKind int

const (
	objectToken tokenKind = iota
	arrayToken
	stringToken
	numberToken
	boolToken
)

// token is one value as read: raw is a string with its quotes, or a number or boolean.
type token struct {
	kind    tokenKind
	raw     []byte
	escaped bool
	start   int // offset of a string in the body
}

// check refuses a value that r does not allow; an enum name without its prefix is rewritten.
func (s *scanner) check(r rule, t token) error {
	switch r.form {
	case anyForm:
		return nil
	case objectForm:
		if t.kind != objectToken {
			return s.invalid("expected an object", t)
		}
	case arrayForm:
		if t.kind != arrayToken {
			return s.invalid("expected an array", t)
		}
	case stringForm:
		if t.kind != stringToken {
			return s.invalid("expected a string", t)
		}
	case boolForm:
		if t.kind != boolToken {
			return s.invalid("expected true or false", t)
		}
	case numberForm:
		if t.kind != numberToken {
			return s.invalid("expected a number", t)
		}
	case integerForm:
		return s.checkInteger(r.kind, t)
	case enumForm:
		return s.checkEnum(r.enum, t)
	}
	return nil
}

// invalid is the error of the value being read: its path, what it must be, and a short
// description of what it is.
func (s *scanner) invalid(want string, t token) error {
	return fmt.Errorf("invalid value for field %s: %s; got %s", strconv.Quote(pathString(s.path)), want, describe(t))
}

// describe names what a token is, echoing at most a short piece of it.
func describe(t token) string {
	switch t.kind {
	case objectToken:
		return "an object"
	case arrayToken:
		return "an array"
	case stringToken:
		if v, ok := stringValue(t); ok {
			return strconv.Quote(shorten(v, maxEcho))
		}
		return "a string"
	}
	return shorten(string(t.raw), maxEcho)
}

// maxEcho bounds how much of a value an error repeats, in runes.
const maxEcho = 32

// shorten cuts s to n runes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	if i == len(s) {
		return s
	}
	return s[:i] + "…"
}

// stringValue decodes a string token. A long string with escapes is not decoded: no enum name
// is that long, and its echo is cut anyway.
func stringValue(t token) (string, bool) {
	inner := t.raw[1 : len(t.raw)-1]
	if !t.escaped {
		return string(inner), true
	}
	if len(t.raw) > 256 {
		return "", false
	}
	var v string
	if json.Unmarshal(t.raw, &v) != nil {
		return "", false
	}
	return v, true
}

// enumNames are, per enum, the names a request may give and the name protojson knows for each.
type enumNames struct {
	accept map[string]string // a name the API documents -> the full name
	list   string            // the names the API writes, for errors
}

var enumCache sync.Map // protoreflect.FullName -> *enumNames

// namesOf gives the names of ed that a request may use: each value the API writes (all but a
// *_UNSPECIFIED zero value, which it writes as null) by the name it writes, without the type's
// prefix, or by its full name, as the API reference lists them. Never by number.
func namesOf(ed protoreflect.EnumDescriptor) *enumNames {
	if v, ok := enumCache.Load(ed.FullName()); ok {
		return v.(*enumNames)
	}
	prefix := apijson.EnumPrefix(ed)
	n := &enumNames{accept: map[string]string{}}
	var list []string
	values := ed.Values()
	for i := 0; i < values.Len(); i++ {
		v := values.Get(i)
		full := string(v.Name())
		if v.Number() == 0 && strings.HasSuffix(full, "_UNSPECIFIED") {
			continue
		}
		short := strings.TrimPrefix(full, prefix)
		n.accept[short] = full
		n.accept[full] = full
		list = append(list, short)
	}
	n.list = strings.Join(list, ", ")
	enumCache.Store(ed.FullName(), n)
	return n
}

func (s *scanner) checkEnum(ed protoreflect.EnumDescriptor, t token) error {
	names := namesOf(ed)
	if t.kind == stringToken {
		if v, ok := stringValue(t); ok {
			if full, ok := names.accept[v]; ok {
				if full != v || t.escaped {
					s.edits = append(s.edits, edit{start: t.start, end: t.start + len(t.raw), repl: `"` + full + `"`})
				}
				return nil
			}
		}
	}
	return s.invalid("expected one of "+names.list, t)
}

// intRange is the range of an integer kind.
type intRange struct {
	min int64
	max uint64
}

var intRanges = map[protoreflect.Kind]intRange{
	protoreflect.Int32Kind:    {math.MinInt32, math.MaxInt32},
	protoreflect.Sint32Kind:   {math.MinInt32, math.MaxInt32},
	protoreflect.Sfixed32Kind: {math.MinInt32, math.MaxInt32},
	protoreflect.Uint32Kind:   {0, math.MaxUint32},
	protoreflect.Fixed32Kind:  {0, math.MaxUint32},
	protoreflect.Int64Kind:    {math.MinInt64, math.MaxInt64},
	protoreflect.Sint64Kind:   {math.MinInt64, math.MaxInt64},
	protoreflect.Sfixed64Kind: {math.MinInt64, math.MaxInt64},
	protoreflect.Uint64Kind:   {0, math.MaxUint64},
	protoreflect.Fixed64Kind:  {0, math.MaxUint64},
}

// checkInteger takes a JSON number whose value is an integer within the kind's range, however
// it is written: JSON has one number type, and 3.0 or 36e2 are integers as JSON Schema's
// "integer" (the API reference's type) reads them. protojson reads them alike. A string is
// refused, though protojson would take "3600": the API writes integers, 64-bit ones too, as
// numbers.
func (s *scanner) checkInteger(k protoreflect.Kind, t token) error {
	if t.kind != numberToken {
		return s.invalid("expected an integer (a JSON number)", t)
	}
	r := intRanges[k]
	neg, digits, exp := decimal(t.raw)
	inRange := false
	switch {
	case digits == "":
		return nil // zero
	case exp < 0:
		return s.invalid("expected an integer", t)
	case int64(len(digits))+exp <= 20: // uint64 has 20 digits; longer is out of every range
		v := digits + strings.Repeat("0", int(exp))
		if neg {
			n, err := strconv.ParseInt("-"+v, 10, 64)
			inRange = err == nil && n >= r.min
		} else {
			n, err := strconv.ParseUint(v, 10, 64)
			inRange = err == nil && n <= r.max
		}
	}
	if !inRange {
		return s.invalid(fmt.Sprintf("expected an integer from %d to %d", r.min, r.max), t)
	}
	return nil
}

// decimal reads a JSON number as sign × digits × 10^exp, digits without leading or trailing
// zeros ("" for zero). An exponent too large to matter is clamped: the work is bounded by the
// literal's length, never by the value it spells.
func decimal(lit []byte) (neg bool, digits string, exp int64) {
	s := string(lit)
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mantissa, expPart, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mantissa, ".")
	if expPart != "" {
		sign := int64(1)
		switch expPart[0] {
		case '-':
			sign, expPart = -1, expPart[1:]
		case '+':
			expPart = expPart[1:]
		}
		expPart = strings.TrimLeft(expPart, "0")
		if len(expPart) > 12 {
			exp = sign * 1e12 // beyond any body's digits
		} else if expPart != "" {
			n, _ := strconv.ParseInt(expPart, 10, 64)
			exp = sign * n
		}
	}
	digits = strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp
}

// isNumber reports whether lit is a JSON number.
func isNumber(lit []byte) bool {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			i++
		}
		return i - start
	}
	switch n := digits(); {
	case n == 0:
		return false
	case n > 1 && lit[i-n] == '0':
		return false // a leading zero
	}
	if i < len(lit) && lit[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(lit)
}
