package jsonpb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mnvhq/mnv/services/platform/apijson"
)

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}

// Unmarshal decodes a JSON request body into m. Unknown fields, wrong types, keys given twice
// and malformed JSON are errors. Enum values may be given with or without their type prefix.
func Unmarshal(data []byte, m proto.Message) error {
	if err := rejectDuplicates(data); err != nil {
		return err
	}
	if hasEnums(m.ProtoReflect().Descriptor()) {
		var err error
		if data, err = prefixEnums(data, m.ProtoReflect().Descriptor()); err != nil {
			return err
		}
	}
	return unmarshal.Unmarshal(data, m)
}

var enumCache sync.Map // protoreflect.FullName -> bool

// hasEnums reports whether a message has an enum field at any depth, so that bodies of the
// (many) messages without one skip the rewrite.
func hasEnums(md protoreflect.MessageDescriptor) bool {
	if v, ok := enumCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := scanEnums(md, map[protoreflect.FullName]bool{})
	enumCache.Store(md.FullName(), v)
	return v
}

func scanEnums(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		switch fd.Kind() {
		case protoreflect.EnumKind:
			return true
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if scanEnums(fd.Message(), seen) {
				return true
			}
		}
	}
	return false
}

// prefixEnums rewrites enum values written without their prefix ("ADMIN") to the names protojson
// knows ("ROLE_ADMIN"). Anything it does not understand is left for protojson to reject.
func prefixEnums(data []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("malformed JSON: more than one value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return data, nil
	}
	fixObject(obj, md)
	return json.Marshal(obj)
}

func fixObject(obj map[string]any, md protoreflect.MessageDescriptor) {
	if md.FullName().Parent() == "google.protobuf" {
		return
	}
	fields := md.Fields()
	for key, val := range obj {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := val.(map[string]any); ok {
				for k, mv := range m {
					m[k] = fixValue(mv, fd.MapValue())
				}
			}
		case fd.IsList():
			if l, ok := val.([]any); ok {
				for i, lv := range l {
					l[i] = fixValue(lv, fd)
				}
			}
		default:
			obj[key] = fixValue(val, fd)
		}
	}
}

func fixValue(v any, fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		s, ok := v.(string)
		if !ok || fd.Enum().FullName() == "google.protobuf.NullValue" {
			return v
		}
		values := fd.Enum().Values()
		if values.ByName(protoreflect.Name(s)) != nil {
			return v
		}
		if full := apijson.EnumPrefix(fd.Enum()) + s; values.ByName(protoreflect.Name(full)) != nil {
			return full
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if m, ok := v.(map[string]any); ok {
			fixObject(m, fd.Message())
		}
	}
	return v
}

// maxDepth bounds the nesting rejectDuplicates follows, as protojson bounds its own.
const maxDepth = 10000

// rejectDuplicates refuses a body in which an object names a key twice, at any depth. The
// enum rewrite (like encoding/json) keeps the last value, so {"role":"MEMBER","role":"ADMIN"}
// created an ADMIN key, while whatever checked the first value saw MEMBER: a request that says
// two things is refused rather than read as either. Malformed JSON is left to the decoding
// that follows, which reports it. It is a small scanner rather than json.Decoder.Token, which
// cost twice what the rest of the decoding does, on every request.
func rejectDuplicates(data []byte) error {
	s := dupScanner{data: data}
	if err := s.value(0); !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// errMalformed stops the scan: the decoder that follows says what is wrong.
var errMalformed = errors.New("malformed JSON")

// pathElem is a key, or the index of an array element.
type pathElem struct {
	key   string
	index int // -1 for a key
}

type dupScanner struct {
	data []byte
	i    int
	path []pathElem // of the value being read
}

func (s *dupScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips spaces and reports whether the next byte is c, consuming it if so.
func (s *dupScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *dupScanner) value(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("malformed JSON: nested deeper than %d", maxDepth)
	}
	s.space()
	if s.i >= len(s.data) {
		return errMalformed
	}
	switch s.data[s.i] {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, _, err := s.str()
		return err
	}
	// A number or a literal: its end is all that matters here.
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return nil
		}
		s.i++
	}
	return nil
}

func (s *dupScanner) object(depth int) error {
	s.i++ // {
	if s.next('}') {
		return nil
	}
	// Few keys are compared in a slice; many in a map, so that no body costs quadratic time.
	var (
		few  []string
		many map[string]struct{}
	)
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return errMalformed
		}
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		key := string(raw[1 : len(raw)-1])
		if escaped {
			if json.Unmarshal(raw, &key) != nil {
				return errMalformed
			}
		}
		dup := false
		switch {
		case many != nil:
			_, dup = many[key]
			many[key] = struct{}{}
		case len(few) < 16:
			dup = slices.Contains(few, key)
			few = append(few, key)
		default:
			many = make(map[string]struct{}, 2*len(few))
			for _, k := range few {
				many[k] = struct{}{}
			}
			_, dup = many[key]
			many[key] = struct{}{}
		}
		if dup {
			return fmt.Errorf("duplicate field %s", strconv.Quote(s.pathTo(key)))
		}
		if !s.next(':') {
			return errMalformed
		}
		s.path = append(s.path, pathElem{key: key, index: -1})
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		switch {
		case s.next(','):
		case s.next('}'):
			return nil
		default:
			return errMalformed
		}
	}
}

func (s *dupScanner) array(depth int) error {
	s.i++ // [
	if s.next(']') {
		return nil
	}
	s.path = append(s.path, pathElem{})
	for n := 0; ; n++ {
		s.path[len(s.path)-1].index = n
		if err := s.value(depth); err != nil {
			return err
		}
		switch {
		case s.next(','):
		case s.next(']'):
			s.path = s.path[:len(s.path)-1]
			return nil
		default:
			return errMalformed
		}
	}
}

// str reads the string at s.i, quotes included, and whether it has escapes.
func (s *dupScanner) str() (raw []byte, escaped bool, err error) {
	start := s.i
	for j := start + 1; j < len(s.data); j++ {
		switch s.data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			return s.data[start:s.i], escaped, nil
		}
	}
	return nil, false, errMalformed
}

// pathTo names key in the value being read, e.g. fieldMappings.email or items[2].name.
func (s *dupScanner) pathTo(key string) string {
	var b strings.Builder
	for _, e := range append(s.path, pathElem{key: key, index: -1}) {
		switch {
		case e.index >= 0:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case b.Len() > 0:
			b.WriteString("." + e.key)
		default:
			b.WriteString(e.key)
		}
	}
	return b.String()
}
