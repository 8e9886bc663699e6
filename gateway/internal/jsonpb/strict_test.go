package jsonpb_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	_ "google.golang.org/protobuf/types/known/wrapperspb" // registers wrappers.proto for the test file

	"github.com/mnvhq/mnv/gateway/internal/jsonpb"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/apijson"
)

// TestStrictValues: an enum takes only the names the API documents, an integer field only a
// JSON number that is an integer in its range. What is refused names the field and what it
// takes, and echoes at most a short piece of what was sent.
func TestStrictValues(t *testing.T) {
	tests := []struct {
		name string
		body string
		msg  proto.Message
		want proto.Message // nil: refused
		// wantErr are pieces the error must contain.
		wantErr []string
	}{
		{name: "enum as a number", body: `{"name":"x","role":1}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER", "got 1"}},
		{name: "enum as a number zero", body: `{"name":"x","role":0}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER"}},
		{name: "enum as a numeric string", body: `{"name":"x","role":"1"}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER", `got "1"`}},
		{name: "enum name in lower case", body: `{"name":"x","role":"admin"}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER"}},
		{name: "enum zero value by its short name", body: `{"name":"x","role":"UNSPECIFIED"}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER"}},
		{name: "enum zero value by its full name", body: `{"name":"x","role":"ROLE_UNSPECIFIED"}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER"}},
		{name: "enum as a boolean", body: `{"name":"x","role":true}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER", "got true"}},
		{name: "enum as an object", body: `{"name":"x","role":{"a":1}}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER", "got an object"}},
		{name: "enum as a negative number", body: `{"name":"x","role":-1}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "got -1"}},
		{name: "long enum value is not echoed whole", body: `{"name":"x","role":"` + strings.Repeat("A", 5000) + `"}`, msg: &accountsv1.CreateApiKeyRequest{},
			wantErr: []string{`field "role"`, "ADMIN, MEMBER", "…"}},
		{name: "short name", body: `{"name":"x","role":"ADMIN"}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "x", Role: accountsv1.Role_ROLE_ADMIN}},
		{name: "full name, as the document also lists", body: `{"name":"x","role":"ROLE_MEMBER"}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "x", Role: accountsv1.Role_ROLE_MEMBER}},
		{name: "escaped short name", body: `{"name":"x","role":"ADM\u0049N"}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "x", Role: accountsv1.Role_ROLE_ADMIN}},
		{name: "enum null is unset", body: `{"name":"x","role":null}`, msg: &accountsv1.CreateApiKeyRequest{},
			want: &accountsv1.CreateApiKeyRequest{Name: "x"}},

		{name: "int64 as a string", body: `{"label":"x","ttlSeconds":"3600"}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "expected an integer", `got "3600"`}},
		{name: "int32 as a string", body: `{"secretKey":"s","oldKeyGraceSeconds":"60"}`, msg: &accountsv1.RotateApiKeyRequest{},
			wantErr: []string{`field "oldKeyGraceSeconds"`, "expected an integer", `got "60"`}},
		{name: "int64 by its proto name, as a string", body: `{"label":"x","ttl_seconds":"3600"}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttl_seconds"`, "expected an integer"}},
		{name: "int as a boolean", body: `{"label":"x","ttlSeconds":true}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "expected an integer", "got true"}},
		{name: "int as an array", body: `{"label":"x","ttlSeconds":[1]}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "expected an integer", "got an array"}},
		{name: "fraction", body: `{"label":"x","ttlSeconds":1.5}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "expected an integer", "got 1.5"}},
		{name: "tiny fraction", body: `{"label":"x","ttlSeconds":1e-400}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "expected an integer"}},
		{name: "int64 above its range", body: `{"label":"x","ttlSeconds":9223372036854775808}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "from -9223372036854775808 to 9223372036854775807"}},
		{name: "int64 far above its range", body: `{"label":"x","ttlSeconds":1e400}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "from -9223372036854775808 to 9223372036854775807", "got 1e400"}},
		{name: "huge exponent", body: `{"label":"x","ttlSeconds":1e99999999999999999999}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "from -9223372036854775808"}},
		{name: "int32 above its range", body: `{"secretKey":"s","oldKeyGraceSeconds":2147483648}`, msg: &accountsv1.RotateApiKeyRequest{},
			wantErr: []string{`field "oldKeyGraceSeconds"`, "from -2147483648 to 2147483647"}},
		{name: "int32 below its range", body: `{"secretKey":"s","oldKeyGraceSeconds":-2147483649}`, msg: &accountsv1.RotateApiKeyRequest{},
			wantErr: []string{`field "oldKeyGraceSeconds"`, "from -2147483648 to 2147483647"}},
		{name: "long number is not echoed whole", body: `{"label":"x","ttlSeconds":` + strings.Repeat("9", 5000) + `}`, msg: &accountsv1.CreateSdkTokenRequest{},
			wantErr: []string{`field "ttlSeconds"`, "…"}},
		{name: "nested int as a string", body: `{"endpointUrl":"https://x","batchSize":"5"}`, msg: &connectv1.IntegrationPatch{},
			wantErr: []string{`field "batchSize"`, "expected an integer"}},

		{name: "int64 extremes", body: `{"label":"x","ttlSeconds":-9223372036854775808}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(-9223372036854775808)}},
		{name: "int64 beyond float precision", body: `{"label":"x","ttlSeconds":9007199254740993}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(9007199254740993)}},
		// JSON has one number type; an integer is a number with no fractional part, as JSON
		// Schema's "integer" (the document's type) reads it.
		{name: "exponent that makes an integer", body: `{"label":"x","ttlSeconds":36e2}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(3600)}},
		{name: "zero fraction", body: `{"label":"x","ttlSeconds":3600.0}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(3600)}},
		{name: "negative exponent that makes an integer", body: `{"label":"x","ttlSeconds":360000e-2}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x", TtlSeconds: proto.Int64(3600)}},
		{name: "int null is unset", body: `{"label":"x","ttlSeconds":null}`, msg: &accountsv1.CreateSdkTokenRequest{},
			want: &accountsv1.CreateSdkTokenRequest{Label: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonpb.Unmarshal([]byte(tt.body), tt.msg)
			if tt.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(tt.msg, tt.want) {
					t.Fatalf("got %v, want %v", tt.msg, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, decoded %v", tt.msg)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// testMessage builds, without generated code, a message with every shape an enum or integer
// can take: repeated, map values, nested, inside a list of messages, and in wrappers.
func testMessage(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	s := proto.String
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	typ := func(k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type {
		return k.Enum()
	}
	field := func(name string, n int32, label *descriptorpb.FieldDescriptorProto_Label, k descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: s(name), Number: proto.Int32(n), Label: label, Type: typ(k)}
		if typeName != "" {
			f.TypeName = s(typeName)
		}
		return f
	}
	const (
		tEnum = descriptorpb.FieldDescriptorProto_TYPE_ENUM
		tMsg  = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
		tStr  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	)
	entry := func(name string, k descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{
			Name:    s(name),
			Field:   []*descriptorpb.FieldDescriptorProto{field("key", 1, opt, tStr, ""), field("value", 2, opt, k, typeName)},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name: s("jsonpbtest/strict.proto"), Package: s("jsonpbtest"), Syntax: s("proto3"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: s("Color"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: s("COLOR_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: s("COLOR_RED"), Number: proto.Int32(1)},
				{Name: s("COLOR_DARK_BLUE"), Number: proto.Int32(2)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: s("Outer"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("color", 1, opt, tEnum, ".jsonpbtest.Color"),
				field("colors", 2, rep, tEnum, ".jsonpbtest.Color"),
				field("color_by_name", 3, rep, tMsg, ".jsonpbtest.Outer.ColorByNameEntry"),
				field("i32", 4, opt, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
				field("u32", 5, opt, descriptorpb.FieldDescriptorProto_TYPE_UINT32, ""),
				field("s32", 6, opt, descriptorpb.FieldDescriptorProto_TYPE_SINT32, ""),
				field("f32", 7, opt, descriptorpb.FieldDescriptorProto_TYPE_SFIXED32, ""),
				field("i64", 8, opt, descriptorpb.FieldDescriptorProto_TYPE_INT64, ""),
				field("u64", 9, opt, descriptorpb.FieldDescriptorProto_TYPE_UINT64, ""),
				field("fx64", 10, opt, descriptorpb.FieldDescriptorProto_TYPE_FIXED64, ""),
				field("counts", 11, rep, descriptorpb.FieldDescriptorProto_TYPE_INT64, ""),
				field("count_by_name", 12, rep, tMsg, ".jsonpbtest.Outer.CountByNameEntry"),
				field("inner", 13, opt, tMsg, ".jsonpbtest.Outer"),
				field("inners", 14, rep, tMsg, ".jsonpbtest.Outer"),
				field("w64", 15, opt, tMsg, ".google.protobuf.Int64Value"),
				field("wu32", 16, opt, tMsg, ".google.protobuf.UInt32Value"),
				field("label", 17, opt, tStr, ""),
			},
			NestedType: []*descriptorpb.DescriptorProto{
				entry("ColorByNameEntry", tEnum, ".jsonpbtest.Color"),
				entry("CountByNameEntry", descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Outer")
}

// TestStrictValuesEverywhere: the rules hold at any depth and in any shape of field.
func TestStrictValuesEverywhere(t *testing.T) {
	md := testMessage(t)
	tests := []struct {
		name    string
		body    string
		wantErr []string // nil: accepted
	}{
		{"every shape, well formed", `{"color":"RED","colors":["DARK_BLUE","COLOR_RED"],"colorByName":{"a":"RED"},"i32":-1,"u32":4294967295,"s32":-2147483648,"f32":7,` +
			`"i64":-9223372036854775808,"u64":18446744073709551615,"fx64":1e19,"counts":[1,2e0],"countByName":{"a":3},"inner":{"color":"RED","inner":{"i64":5}},` +
			`"inners":[{"colors":["RED"]}],"w64":9007199254740993,"wu32":1,"label":"x"}`, nil},
		{"nulls", `{"color":null,"colors":null,"colorByName":null,"i64":null,"inner":null,"w64":null}`, nil},
		{"repeated enum as a number", `{"colors":["RED",2]}`, []string{`field "colors[1]"`, "RED, DARK_BLUE", "got 2"}},
		{"map enum as a number", `{"colorByName":{"a":1}}`, []string{`field "colorByName.a"`, "RED, DARK_BLUE"}},
		{"map enum under a long key", `{"colorByName":{"` + strings.Repeat("k", 5000) + `":1}}`, []string{`field "colorByName.kkkk`, "…"}},
		{"nested enum", `{"inner":{"inner":{"color":"BLUE"}}}`, []string{`field "inner.inner.color"`, `got "BLUE"`}},
		{"enum in a list of messages", `{"inners":[{},{"color":"UNSPECIFIED"}]}`, []string{`field "inners[1].color"`}},
		{"repeated enum not a list", `{"colors":"RED"}`, []string{`field "colors"`, "expected an array"}},
		{"map not an object", `{"colorByName":["RED"]}`, []string{`field "colorByName"`, "expected an object"}},
		{"message not an object", `{"inner":5}`, []string{`field "inner"`, "expected an object"}},
		{"uint32 negative", `{"u32":-1}`, []string{`field "u32"`, "from 0 to 4294967295"}},
		{"uint32 too big", `{"u32":4294967296}`, []string{`field "u32"`, "from 0 to 4294967295"}},
		{"sint32 too small", `{"s32":-2147483649}`, []string{`field "s32"`, "from -2147483648 to 2147483647"}},
		{"sfixed32 as a string", `{"f32":"7"}`, []string{`field "f32"`, "expected an integer"}},
		{"uint64 too big", `{"u64":18446744073709551616}`, []string{`field "u64"`, "from 0 to 18446744073709551615"}},
		{"fixed64 as a string", `{"fx64":"1"}`, []string{`field "fx64"`, "expected an integer"}},
		{"repeated int64 as a string", `{"counts":[1,"2"]}`, []string{`field "counts[1]"`, "expected an integer"}},
		{"map int32 as a string", `{"countByName":{"a":"3"}}`, []string{`field "countByName.a"`, "expected an integer"}},
		{"nested int64 as a string", `{"inner":{"inner":{"i64":"5"}}}`, []string{`field "inner.inner.i64"`, "expected an integer"}},
		{"Int64Value as a string", `{"w64":"5"}`, []string{`field "w64"`, "expected an integer"}},
		{"UInt32Value negative", `{"wu32":-1}`, []string{`field "wu32"`, "from 0 to 4294967295"}},
		{"string field as a number", `{"label":5}`, []string{`field "label"`, "expected a string", "got 5"}},
		{"negative zero", `{"u64":-0}`, nil},
		{"deep path is cut at its start", strings.Repeat(`{"inner":`, 500) + `{"color":1}` + strings.Repeat("}", 500), []string{`field "…`, `.inner.inner.color": expected one of RED, DARK_BLUE`}},
		// null unsets a field; it is no element of a list or value of a map (protojson says so).
		{"null in a list", `{"colors":[null]}`, []string{"colors", "null"}},
		{"null in a map", `{"countByName":{"a":null}}`, []string{"null"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := dynamicpb.NewMessage(md)
			err := jsonpb.Unmarshal([]byte(tt.body), m)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, decoded %v", m)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestEveryEnumAndIntegerOfEveryMessage walks every message of the API, to any depth, and sends
// each enum field a number and each integer field a string: every one must be refused naming
// its path, and the documented form accepted. No route can miss the rules.
func TestEveryEnumAndIntegerOfEveryMessage(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "mnv.") {
			return true
		}
		for i := 0; i < fd.Messages().Len(); i++ {
			md := fd.Messages().Get(i)
			walkFields(md, 3, func(path []protoreflect.FieldDescriptor) {
				n++
				leaf := path[len(path)-1]
				var bad, good, want string
				switch {
				case leaf.Kind() == protoreflect.EnumKind:
					bad, good, want = `1`, `"`+shortName(leaf.Enum())+`"`, "expected one of"
				default:
					bad, good, want = `"1"`, `1`, "expected an integer"
				}
				badBody, name := nest(path, bad)
				m := dynamicpb.NewMessage(md)
				err := jsonpb.Unmarshal([]byte(badBody), m)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("field %q", name)) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s %s: err = %v", md.FullName(), badBody, err)
				}
				goodBody, _ := nest(path, good)
				if err := jsonpb.Unmarshal([]byte(goodBody), dynamicpb.NewMessage(md)); err != nil {
					t.Errorf("%s %s: %v", md.FullName(), goodBody, err)
				}
			})
		}
		return true
	})
	if n < 20 {
		t.Fatalf("only %d enum and integer fields found: is the generated code linked in?", n)
	}
}

// walkFields calls f with the path to every enum or integer field of md, up to depth messages
// deep.
func walkFields(md protoreflect.MessageDescriptor, depth int, f func([]protoreflect.FieldDescriptor)) {
	if depth == 0 || md.FullName().Parent() == "google.protobuf" {
		return
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		vd := fd
		if fd.IsMap() {
			vd = fd.MapValue()
		}
		switch vd.Kind() {
		case protoreflect.EnumKind:
			if vd.Enum().FullName() != "google.protobuf.NullValue" {
				f([]protoreflect.FieldDescriptor{fd})
			}
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
			protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			f([]protoreflect.FieldDescriptor{fd})
		case protoreflect.MessageKind:
			walkFields(vd.Message(), depth-1, func(p []protoreflect.FieldDescriptor) {
				f(append([]protoreflect.FieldDescriptor{fd}, p...))
			})
		}
	}
}

// nest is the body that sets the field at path to value (the first element of a list, the
// value of key "k" of a map), and the path's name in errors.
func nest(path []protoreflect.FieldDescriptor, value string) (body, name string) {
	body = value
	for i := len(path) - 1; i >= 0; i-- {
		fd := path[i]
		switch {
		case fd.IsList():
			body = "[" + body + "]"
		case fd.IsMap():
			body = `{"k":` + body + "}"
		}
		body = fmt.Sprintf(`{%q:%s}`, fd.JSONName(), body)
	}
	for i, fd := range path {
		if i > 0 {
			name += "."
		}
		name += fd.JSONName()
		switch {
		case fd.IsList():
			name += "[0]"
		case fd.IsMap():
			name += ".k"
		}
	}
	return body, name
}

// shortName is the first name the API writes for ed.
func shortName(ed protoreflect.EnumDescriptor) string {
	for i := 0; i < ed.Values().Len(); i++ {
		if v := ed.Values().Get(i); v.Number() != 0 {
			return strings.TrimPrefix(string(v.Name()), apijson.EnumPrefix(ed))
		}
	}
	return ""
}

// TestEnumNamesAreTheDocuments: the names an enum field takes without their prefix are the
// names the API reference lists for that enum, no more, no fewer.
func TestEnumNamesAreTheDocuments(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `json:"enum"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapigen.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	// The API's enums, by name; a name two of them share is not the reference's to resolve here.
	byName := map[protoreflect.Name][]protoreflect.EnumDescriptor{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(string(fd.Package()), "mnv.") && fd.Package() != "mnv.options.v1" {
			for i := 0; i < fd.Enums().Len(); i++ {
				ed := fd.Enums().Get(i)
				byName[ed.Name()] = append(byName[ed.Name()], ed)
			}
		}
		return true
	})
	n := 0
	for name, eds := range byName {
		if len(eds) != 1 {
			continue
		}
		ed := eds[0]
		s, ok := doc.Components.Schemas[string(name)]
		if !ok || len(s.Enum) == 0 {
			continue // not in the reference (no route uses it), or named otherwise
		}
		n++
		// Each listed name is taken, and a refusal lists exactly the reference's names.
		md := enumHolder(t, ed)
		for _, name := range s.Enum {
			if err := jsonpb.Unmarshal([]byte(`{"v":"`+name+`"}`), dynamicpb.NewMessage(md)); err != nil {
				t.Errorf("%s: documented %s refused: %v", ed.FullName(), name, err)
			}
		}
		err := jsonpb.Unmarshal([]byte(`{"v":0}`), dynamicpb.NewMessage(md))
		if err == nil || !strings.Contains(err.Error(), "expected one of "+strings.Join(s.Enum, ", ")+";") {
			t.Errorf("%s: the error does not list exactly the documented %v: %v", ed.FullName(), s.Enum, err)
		}
	}
	if n < 3 {
		t.Fatalf("only %d enums found in the reference", n)
	}
}

// enumHolder is a message with one field, v, of enum ed.
func enumHolder(t *testing.T, ed protoreflect.EnumDescriptor) protoreflect.MessageDescriptor {
	t.Helper()
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("jsonpbtest/holder_" + strings.ReplaceAll(string(ed.FullName()), ".", "_") + ".proto"), Package: proto.String("jsonpbtest"),
		Syntax: proto.String("proto3"), Dependency: []string{ed.ParentFile().Path()},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Holder"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("v"), Number: proto.Int32(1), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type: descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(), TypeName: proto.String("." + string(ed.FullName())),
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().Get(0)
}
