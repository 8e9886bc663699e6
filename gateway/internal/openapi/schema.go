package openapi

import (
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	"github.com/mnvhq/mnv/services/platform/apijson"
)

// obj is a JSON object of the document; encoding/json writes its keys sorted, so the same
// input always gives the same bytes.
type obj = map[string]any

// direction is which way a message travels: the gateway writes answers with jsonpb and reads
// requests with protojson after accepting enum values without their prefix.
type direction int

const (
	answer direction = iota
	request
)

const timestampName protoreflect.FullName = "google.protobuf.Timestamp"

// timestampPattern is apijson.TimeLayout as a pattern: UTC, exactly three fractional digits.
const timestampPattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`

// schemas collects the component schemas the operations refer to.
type schemas struct {
	messages map[protoreflect.FullName]*protogen.Message
	enums    map[protoreflect.FullName]*protogen.Enum
	// names are the component names given so far, by (full name, direction).
	names map[schemaKey]string
	out   obj
	// taken are the component names in use, to keep two types apart.
	taken map[string]protoreflect.FullName
}

type schemaKey struct {
	name protoreflect.FullName
	dir  direction
}

func newSchemas(files []*protogen.File) *schemas {
	s := &schemas{
		messages: map[protoreflect.FullName]*protogen.Message{},
		enums:    map[protoreflect.FullName]*protogen.Enum{},
		names:    map[schemaKey]string{},
		out:      obj{},
		taken:    map[string]protoreflect.FullName{},
	}
	var walk func([]*protogen.Message)
	walk = func(ms []*protogen.Message) {
		for _, m := range ms {
			s.messages[m.Desc.FullName()] = m
			for _, e := range m.Enums {
				s.enums[e.Desc.FullName()] = e
			}
			walk(m.Messages)
		}
	}
	for _, f := range files {
		walk(f.Messages)
		for _, e := range f.Enums {
			s.enums[e.Desc.FullName()] = e
		}
	}
	return s
}

// ref returns a reference to the component schema of a message or enum, making it on first use.
func (s *schemas) ref(name protoreflect.FullName, dir direction) obj {
	if _, isEnum := s.enums[name]; isEnum {
		dir = answer // an enum's component lists its names; requests add the prefixed ones inline
	}
	key := schemaKey{name, dir}
	if n, ok := s.names[key]; ok {
		return obj{"$ref": "#/components/schemas/" + n}
	}
	n := s.componentName(name, dir)
	s.names[key] = n
	s.out[n] = obj{} // taken before it is built: messages may refer to themselves
	if e, ok := s.enums[name]; ok {
		s.out[n] = enumSchema(e)
	} else {
		s.out[n] = s.messageSchema(s.messages[name], dir)
	}
	return obj{"$ref": "#/components/schemas/" + n}
}

// componentName is the message's own name where that is unique, else its full name without
// "mnv."; a request message that also travels in answers is "<name>Input".
func (s *schemas) componentName(name protoreflect.FullName, dir direction) string {
	n := string(name.Name())
	if owner, ok := s.taken[n]; ok && owner != name {
		n = strings.TrimPrefix(string(name), "mnv.")
	}
	if dir == request {
		if _, ok := s.names[schemaKey{name, answer}]; ok {
			n += "Input"
		}
	}
	s.taken[n] = name
	return n
}

func enumSchema(e *protogen.Enum) obj {
	prefix := apijson.EnumPrefix(e.Desc)
	var names []any
	for _, v := range e.Values {
		if v.Desc.Number() == 0 && strings.HasSuffix(string(v.Desc.Name()), "_UNSPECIFIED") {
			continue
		}
		names = append(names, strings.TrimPrefix(string(v.Desc.Name()), prefix))
	}
	o := obj{"type": "string", "enum": names}
	desc := comment(e.Comments.Leading)
	var values []string
	for _, v := range e.Values {
		if c := comment(v.Comments.Leading); c != "" && v.Desc.Number() != 0 {
			values = append(values, "- `"+strings.TrimPrefix(string(v.Desc.Name()), prefix)+"`: "+c)
		}
	}
	if len(values) > 0 {
		desc = strings.TrimSpace(desc + "\n\n" + strings.Join(values, "\n"))
	}
	if desc != "" {
		o["description"] = desc
	}
	return o
}

func (s *schemas) messageSchema(m *protogen.Message, dir direction) obj {
	props := obj{}
	var all, needed []any
	for _, f := range m.Fields {
		props[f.Desc.JSONName()] = s.fieldSchema(f, dir)
		all = append(all, f.Desc.JSONName())
		if required(f.Desc) {
			needed = append(needed, f.Desc.JSONName())
		}
	}
	o := obj{"type": "object", "properties": props}
	if dir == answer {
		// jsonpb writes every field: absent values are null, empty lists [].
		o["required"] = all
	} else {
		// protojson refuses unknown fields (400).
		o["additionalProperties"] = false
		if len(needed) > 0 {
			o["required"] = needed
		}
	}
	if d := comment(m.Comments.Leading); d != "" {
		o["description"] = d
	}
	return o
}

// fieldSchema describes one field as jsonpb writes it (answers) or protojson reads it.
func (s *schemas) fieldSchema(f *protogen.Field, dir direction) obj {
	var o obj
	// A request's constraints are the field's declaration (mnv.options.v1.field); answers carry
	// none: they describe what the server writes, not what it accepts.
	var rule *optionsv1.Field
	if dir == request {
		rule = fieldRule(f.Desc)
	}
	switch {
	case f.Desc.IsMap():
		o = obj{"type": "object", "additionalProperties": s.valueSchema(f.Desc.MapValue(), dir, false)}
		o = constrainCollection(o, f.Desc, rule)
	case f.Desc.IsList():
		o = obj{"type": "array", "items": s.valueSchema(f.Desc, dir, false)}
		o = constrainCollection(o, f.Desc, rule)
	default:
		// A request field may be null (protojson takes it as unset), unless it is required.
		nullable := f.Desc.HasPresence() || (dir == request && !rule.GetRequired())
		o = constrainValue(s.valueSchema(f.Desc, dir, nullable), rule, nullable)
	}
	if d := comment(f.Comments.Leading); d != "" {
		o = withDescription(o, d)
	}
	return o
}

// valueSchema is the schema of one value of fd. nullable: the value may be null (a message or
// proto3 optional when absent; any field of a request, which protojson takes as unset).
func (s *schemas) valueSchema(fd protoreflect.FieldDescriptor, dir direction, nullable bool) obj {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return typed("boolean", nullable)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		o := typed("integer", nullable)
		o["format"] = "int32"
		return o
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		o := typed("integer", nullable)
		o["format"] = "int64"
		return o
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return typed("number", nullable)
	case protoreflect.StringKind:
		return typed("string", nullable)
	case protoreflect.BytesKind:
		o := typed("string", nullable)
		o["contentEncoding"] = "base64"
		return o
	case protoreflect.EnumKind:
		ref := s.ref(fd.Enum().FullName(), dir)
		if dir == request {
			// Also accepted with the type's prefix, as protojson names them.
			e := s.enums[fd.Enum().FullName()]
			var prefixed []any
			for _, v := range e.Values {
				if v.Desc.Number() != 0 {
					prefixed = append(prefixed, string(v.Desc.Name()))
				}
			}
			if !nullable {
				return obj{"anyOf": []any{ref, obj{"type": "string", "enum": prefixed}}}
			}
			return obj{"anyOf": []any{ref, obj{"type": "string", "enum": prefixed}, obj{"type": "null"}}}
		}
		// The *_UNSPECIFIED zero value is written as null.
		return obj{"anyOf": []any{ref, obj{"type": "null"}}}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().FullName() == timestampName {
			o := typed("string", nullable)
			o["format"] = "date-time"
			if dir == answer {
				o["pattern"] = timestampPattern
			}
			return o
		}
		ref := s.ref(fd.Message().FullName(), dir)
		if nullable {
			return obj{"anyOf": []any{ref, obj{"type": "null"}}}
		}
		return ref
	}
	return obj{}
}

func typed(t string, nullable bool) obj {
	if nullable {
		return obj{"type": []any{t, "null"}}
	}
	return obj{"type": t}
}

// withDescription describes a schema; a bare reference gets the description beside it, which
// OpenAPI 3.1 lets override the referenced one's.
func withDescription(o obj, d string) obj {
	if prev, ok := o["description"].(string); ok && prev != "" {
		d = prev + "\n\n" + d
	}
	o["description"] = d
	return o
}

// comment turns a proto comment into a description: the text, each line without the one space
// after the comment marker.
func comment(c protogen.Comments) string {
	lines := strings.Split(strings.TrimRight(string(c), "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
