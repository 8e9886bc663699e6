package jsonpb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}

// Unmarshal decodes a JSON request body into m. Unknown fields, wrong types and malformed JSON
// are errors. Enum values may be given with or without their type prefix.
func Unmarshal(data []byte, m proto.Message) error {
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
		if full := enumPrefix(fd.Enum()) + s; values.ByName(protoreflect.Name(full)) != nil {
			return full
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if m, ok := v.(map[string]any); ok {
			fixObject(m, fd.Message())
		}
	}
	return v
}
