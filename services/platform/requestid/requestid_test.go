package requestid_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/requestid"
)

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"empty", "", false},
		{"one character", "a", true},
		{"hex id", requestid.New(), true},
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"punctuation", "req:1/2_3.4-5~!", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"129 characters", strings.Repeat("a", 129), false},
		{"space", "abc def", false},
		{"leading space", " abc", false},
		{"tab", "abc\tdef", false},
		{"newline (log forging)", "abc\nlevel=error", false},
		{"carriage return (header splitting)", "abc\r\nSet-Cookie: x", false},
		{"NUL", "abc\x00", false},
		{"escape", "abc\x1b[31m", false},
		{"DEL", "abc\x7f", false},
		{"non-ASCII letter", "abcé", false},
		{"non-ASCII only", "日本", false},
		{"invalid UTF-8", "abc\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := requestid.Valid(tt.id); got != tt.want {
				t.Errorf("Valid(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := requestid.New()
		if len(id) != 32 {
			t.Fatalf("New() = %q: %d characters, want 32", id, len(id))
		}
		if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
			t.Fatalf("New() = %q: not lower-case hex", id)
		}
		if seen[id] {
			t.Fatalf("New() returned %q twice", id)
		}
		seen[id] = true
	}
}

func TestWithFrom(t *testing.T) {
	if got := requestid.From(context.Background()); got != "" {
		t.Errorf("From(empty context) = %q, want \"\"", got)
	}
	ctx := requestid.With(context.Background(), "abc")
	if got := requestid.From(ctx); got != "abc" {
		t.Errorf("From = %q, want abc", got)
	}
	if got := requestid.From(requestid.With(ctx, "def")); got != "def" {
		t.Errorf("From after a second With = %q, want def", got)
	}
}
