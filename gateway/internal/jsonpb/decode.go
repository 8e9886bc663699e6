package jsonpb

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}

// Unmarshal decodes a JSON request body into m. Unknown fields, keys given twice, malformed
// JSON and values the API does not document are errors: an enum takes its names (with or
// without the type's prefix, never its *_UNSPECIFIED zero value, never a number), an integer
// field a JSON number that is an integer within the field's range (never a string). Both
// rules hold at any depth, in lists and map values, so no route can miss them.
func Unmarshal(data []byte, m proto.Message) error {
	s := scanner{data: data}
	switch err := s.value(0, slot{msg: m.ProtoReflect().Descriptor()}); {
	case err == nil:
		data = s.rewritten()
	case errors.Is(err, errMalformed):
		// protojson says what is wrong.
	default:
		return err
	}
	return unmarshal.Unmarshal(data, m)
}

// maxDepth bounds the nesting the scanner follows, as protojson bounds its own.
const maxDepth = 10000

// rejectDuplicates refuses a body in which an object names a key twice, at any depth, without
// looking at what the values are. Unmarshal does the same in the scan that checks the values.
func rejectDuplicates(data []byte) error {
	s := scanner{data: data}
	if err := s.value(0, slot{}); !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// errMalformed stops the scan: the decoding that follows says what is wrong.
var errMalformed = errors.New("malformed JSON")

// pathElem is a key, or the index of an array element.
type pathElem struct {
	key   string
	index int // -1 for a key
}

// scanner reads a body once, before protojson, for what protojson does not refuse:
//
//   - a key given twice, at any depth. protojson (like encoding/json) would keep the last value,
//     so {"role":"MEMBER","role":"ADMIN"} created an ADMIN key while whatever checked the first
//     value saw MEMBER: a request that says two things is refused rather than read as either.
//   - a value the API does not document for its field (see check.go), driven by the message's
//     descriptor; protojson takes enum numbers and quoted integers.
//
// Enum names without their prefix are rewritten to the names protojson knows, in place.
// Malformed JSON is left to protojson, which reports it. It is a small scanner rather than
// json.Decoder.Token, which cost twice what the rest of the decoding does, on every request.
type scanner struct {
	data  []byte
	i     int
	path  []pathElem // of the value being read
	edits []edit
}

// edit replaces data[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// rewritten is the body with the edits made.
func (s *scanner) rewritten() []byte {
	if len(s.edits) == 0 {
		return s.data
	}
	out := make([]byte, 0, len(s.data)+16*len(s.edits))
	last := 0
	for _, e := range s.edits {
		out = append(out, s.data[last:e.start]...)
		out = append(out, e.repl...)
		last = e.end
	}
	return append(out, s.data[last:]...)
}

func (s *scanner) space() {
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
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// value reads one value, which sl says what it must be.
func (s *scanner) value(depth int, sl slot) error {
	if depth > maxDepth {
		return fmt.Errorf("malformed JSON: nested deeper than %d", maxDepth)
	}
	s.space()
	if s.i >= len(s.data) {
		return errMalformed
	}
	r := sl.rule()
	switch s.data[s.i] {
	case '{':
		if err := s.check(r, token{kind: objectToken}); err != nil {
			return err
		}
		return s.object(depth+1, r)
	case '[':
		if err := s.check(r, token{kind: arrayToken}); err != nil {
			return err
		}
		return s.array(depth+1, r)
	case '"':
		start := s.i
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		return s.check(r, token{kind: stringToken, raw: raw, escaped: escaped, start: start})
	}
	// A number or a literal: it ends where a delimiter starts.
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.literal(r, s.data[start:s.i])
		}
		s.i++
	}
	return s.literal(r, s.data[start:s.i])
}

func (s *scanner) literal(r rule, lit []byte) error {
	switch string(lit) {
	case "null":
		return nil // unset, whatever the field; protojson refuses it where it cannot be
	case "true", "false":
		return s.check(r, token{kind: boolToken, raw: lit})
	}
	if !isNumber(lit) {
		return errMalformed
	}
	return s.check(r, token{kind: numberToken, raw: lit})
}

func (s *scanner) object(depth int, r rule) error {
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
		if err := s.value(depth, r.member(key)); err != nil {
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

func (s *scanner) array(depth int, r rule) error {
	s.i++ // [
	if s.next(']') {
		return nil
	}
	s.path = append(s.path, pathElem{})
	for n := 0; ; n++ {
		s.path[len(s.path)-1].index = n
		if err := s.value(depth, r.element()); err != nil {
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
func (s *scanner) str() (raw []byte, escaped bool, err error) {
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

// maxKeyInPath bounds each key of a path in an error, and maxPath the whole path (its end,
// which names the field, is kept): keys of a map are the client's, and so is the nesting, and
// an error never echoes a long one whole.
const (
	maxKeyInPath = 64
	maxPath      = 128
)

// pathTo names key in the value being read, e.g. fieldMappings.email or items[2].name.
func (s *scanner) pathTo(key string) string {
	return pathString(append(s.path, pathElem{key: key, index: -1}))
}

func pathString(path []pathElem) string {
	var b strings.Builder
	for _, e := range path {
		switch {
		case e.index >= 0:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case b.Len() > 0:
			b.WriteString("." + shorten(e.key, maxKeyInPath))
		default:
			b.WriteString(shorten(e.key, maxKeyInPath))
		}
	}
	p := b.String()
	if len(p) > maxPath {
		cut := len(p) - maxPath
		for cut < len(p) && !utf8.RuneStart(p[cut]) {
			cut++
		}
		p = "…" + p[cut:]
	}
	return p
}
