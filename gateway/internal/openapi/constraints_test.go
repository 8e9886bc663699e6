package openapi

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
)

// TestCheckFieldRuleRefuses: a constraint the document could not say, or would say wrong,
// stops make generate.
func TestCheckFieldRuleRefuses(t *testing.T) {
	name := (&accountsv1.CreateApiKeyRequest{}).ProtoReflect().Descriptor().Fields().ByName("name")
	grace := (&accountsv1.RotateApiKeyRequest{}).ProtoReflect().Descriptor().Fields().ByName("old_key_grace_seconds")
	tests := []struct {
		name    string
		field   protoreflect.FieldDescriptor
		rule    *optionsv1.Field
		wantErr string
	}{
		{"bounds on a string", name, &optionsv1.Field{Minimum: proto.Int64(1)}, "bound integers"},
		{"a length on an integer", grace, &optionsv1.Field{MaxLength: proto.Uint32(3)}, "lengths bound"},
		{"a pattern on an integer", grace, &optionsv1.Field{Pattern: "^1$"}, "are for strings"},
		{"a pattern and a text rule", name, &optionsv1.Field{Pattern: "^a$", Text: optionsv1.Text_TEXT_LINE}, "not both"},
		{"a minimum above the maximum", grace, &optionsv1.Field{Minimum: proto.Int64(5), Maximum: proto.Int64(4)}, "above the maximum"},
		{"a pattern that does not compile", name, &optionsv1.Field{Pattern: "^(a$"}, "pattern"},
		{"an example the pattern refuses", name, &optionsv1.Field{Pattern: "^a+$", Example: "b"}, "does not match"},
		{"entries on a string", name, &optionsv1.Field{Entries: &optionsv1.Field{MaxLength: proto.Uint32(1)}}, "a map's"},
		{"keys on a string", name, &optionsv1.Field{Keys: &optionsv1.Field{MaxLength: proto.Uint32(1)}}, "a map's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkFieldRule(tt.field, tt.rule); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkFieldRule = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := checkFieldRule(grace, fieldRule(grace)); err != nil {
		t.Errorf("the declared rule of %s: %v", grace.FullName(), err)
	}
}
