// Package apijson is the API's one JSON representation of protobuf messages, decided once for the
// whole API (docs/api-decisions.md#envelope). The gateway writes it (its jsonpb package) and mnvctl
// prints it, so an operator sees the shapes a client sees:
//
//   - 64-bit integers are JSON numbers, not the quoted strings of protojson;
//   - timestamps are ISO 8601 UTC with exactly three fractional digits;
//   - a field that can be absent (a message, a proto3 optional) is null when absent, never
//     omitted; repeated fields are [] when empty; every other field is always written;
//   - enum values are written without their type prefix (ROLE_ADMIN is "ADMIN", the
//     *_UNSPECIFIED zero value is null).
//
// Reading requests (enums with or without their prefix, unknown fields as errors) is the
// gateway's alone.
package apijson

import (
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const timestampName protoreflect.FullName = "google.protobuf.Timestamp"

// TimeLayout is the layout of every timestamp the API writes.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// AppendMessage appends the JSON of m to b.
func AppendMessage(b []byte, m protoreflect.Message) []byte {
	md := m.Descriptor()
	if md.FullName() == timestampName {
		return appendTimestamp(b, m)
	}
	if md.FullName().Parent() == "google.protobuf" {
		// Other well-known types (Struct, Value, Duration, wrappers) keep their protojson form.
		out, err := protojson.Marshal(m.Interface())
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, out...)
	}
	b = append(b, '{')
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, fd.JSONName())
		b = append(b, ':')
		b = appendField(b, m, fd)
	}
	return append(b, '}')
}

func appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) []byte {
	switch {
	case fd.IsList():
		list := m.Get(fd).List()
		b = append(b, '[')
		for i := 0; i < list.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, fd, list.Get(i))
		}
		return append(b, ']')
	case fd.IsMap():
		mp := m.Get(fd).Map()
		keys := make([]protoreflect.MapKey, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
		slices.SortFunc(keys, func(a, c protoreflect.MapKey) int { return strings.Compare(a.String(), c.String()) })
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k.String())
			b = append(b, ':')
			b = appendValue(b, fd.MapValue(), mp.Get(k))
		}
		return append(b, '}')
	case fd.HasPresence() && !m.Has(fd):
		return append(b, "null"...)
	}
	return appendValue(b, fd, m.Get(fd))
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return appendFloat(b, v.Float(), fd.Kind() == protoreflect.FloatKind)
	case protoreflect.StringKind:
		return AppendString(b, v.String())
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes())
		return append(b, '"')
	case protoreflect.EnumKind:
		return appendEnum(b, fd.Enum(), v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return AppendMessage(b, v.Message())
	}
	return append(b, "null"...)
}

func appendFloat(b []byte, f float64, is32 bool) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	bits := 64
	if is32 {
		bits = 32
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

func appendEnum(b []byte, ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) []byte {
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		// A number this build does not know: write it as protojson would.
		return strconv.AppendInt(b, int64(n), 10)
	}
	if n == 0 && strings.HasSuffix(string(vd.Name()), "_UNSPECIFIED") {
		return append(b, "null"...)
	}
	return AppendString(b, strings.TrimPrefix(string(vd.Name()), enumPrefix(ed)))
}

func appendTimestamp(b []byte, m protoreflect.Message) []byte {
	fields := m.Descriptor().Fields()
	secs := m.Get(fields.ByName("seconds")).Int()
	nanos := m.Get(fields.ByName("nanos")).Int()
	t := time.Unix(secs, nanos).UTC()
	b = append(b, '"')
	b = t.AppendFormat(b, TimeLayout)
	return append(b, '"')
}

var prefixCache sync.Map // protoreflect.FullName -> string

// enumPrefix is EnumPrefix, computed once per enum.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	if v, ok := prefixCache.Load(ed.FullName()); ok {
		return v.(string)
	}
	p := EnumPrefix(ed)
	prefixCache.Store(ed.FullName(), p)
	return p
}

// EnumPrefix is the prefix buf's ENUM_VALUE_PREFIX rule puts on the values of ed:
// ClientStatus -> "CLIENT_STATUS_".
func EnumPrefix(ed protoreflect.EnumDescriptor) string {
	name := string(ed.Name())
	var sb strings.Builder
	for i, r := range name {
		if i > 0 && 'A' <= r && r <= 'Z' {
			prev := name[i-1]
			next := byte(0)
			if i+1 < len(name) {
				next = name[i+1]
			}
			if 'a' <= prev && prev <= 'z' || '0' <= prev && prev <= '9' || ('A' <= prev && prev <= 'Z' && 'a' <= next && next <= 'z') {
				sb.WriteByte('_')
			}
		}
		sb.WriteRune(r)
	}
	return strings.ToUpper(sb.String()) + "_"
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped like encoding/json without its HTML
// escaping (U+2028 and U+2029 escaped, invalid UTF-8 replaced): the API answers JSON, never
// HTML, and a message that shows "<name>" must read <name>, not \u003cname\u003e.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
