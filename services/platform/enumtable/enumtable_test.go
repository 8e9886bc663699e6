package enumtable_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/mnvhq/mnv/services/platform/enumtable"
)

func TestTable(t *testing.T) {
	type role string
	type wire int32
	tbl := enumtable.New(map[role]wire{"ADMIN": 1, "MEMBER": 2})
	tests := []struct {
		name string
		d    role
		want wire
	}{
		{"known", "ADMIN", 1},
		{"another", "MEMBER", 2},
		{"unknown: UNSPECIFIED", "OWNER", 0},
		{"empty: UNSPECIFIED", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tbl.Enum(tt.d); got != tt.want {
				t.Fatalf("Enum(%q) = %d, want %d", tt.d, got, tt.want)
			}
			if tt.want == 0 {
				return
			}
			if back, ok := tbl.Domain(tt.want); !ok || back != tt.d {
				t.Fatalf("Domain(%d) = %q, %v", tt.want, back, ok)
			}
		})
	}
	for _, e := range []wire{0, 3, -1} {
		if d, ok := tbl.Domain(e); ok {
			t.Errorf("Domain(%d) = %q, want not found", e, d)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	type role string
	type wire int32
	for name, pairs := range map[string]map[role]wire{
		"UNSPECIFIED as a value": {"ADMIN": 0},
		"two values on one":      {"ADMIN": 1, "OWNER": 1},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			enumtable.New(pairs)
		})
	}
}

func TestCheckFindsBothSides(t *testing.T) {
	// FieldDescriptorProto.Label has three values (1, 2, 3) and no zero: the check sees every
	// one of them; a table missing one, holding a stray or missing a constant is refused.
	type label string
	enum := labelEnum()
	full := map[label]int32{"OPTIONAL": 1, "REQUIRED": 2, "REPEATED": 3}
	values := []label{"OPTIONAL", "REQUIRED", "REPEATED"}
	if err := enumtable.Check(enumtable.New(full), values, enum); err != nil {
		t.Fatalf("a complete table: %v", err)
	}
	missing := map[label]int32{"OPTIONAL": 1, "REQUIRED": 2}
	err := enumtable.Check(enumtable.New(missing), values, enum)
	if err == nil || !strings.Contains(err.Error(), "REPEATED has no API value") || !strings.Contains(err.Error(), "no value reads as LABEL_REPEATED") {
		t.Fatalf("a table missing a value: %v", err)
	}
	if err := enumtable.Check(enumtable.New(full), values[:2], enum); err == nil || !strings.Contains(err.Error(), "not one of the type's values") {
		t.Fatalf("a table holding a value the type lacks: %v", err)
	}
}

func labelEnum() protoreflect.EnumDescriptor {
	return descriptorpb.FieldDescriptorProto_Label(1).Descriptor()
}
