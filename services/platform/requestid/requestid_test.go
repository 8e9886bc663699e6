package requestid_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

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

func TestUnaryServerInterceptor(t *testing.T) {
	valid := "gateway-req-0001"
	tests := []struct {
		name string
		md   metadata.MD // nil: no incoming metadata at all
		keep string      // the id that must be kept; "" when a fresh one must be made
	}{
		{"valid id is kept", metadata.Pairs(requestid.MD, valid), valid},
		{"128-character id is kept", metadata.Pairs(requestid.MD, strings.Repeat("x", 128)), strings.Repeat("x", 128)},
		{"header name is case-insensitive", metadata.Pairs("X-Request-Id", valid), valid},
		{"no metadata", nil, ""},
		{"metadata without id", metadata.Pairs("other", "x"), ""},
		{"empty id", metadata.Pairs(requestid.MD, ""), ""},
		{"id with newline", metadata.Pairs(requestid.MD, "abc\ndef"), ""},
		{"id with space", metadata.Pairs(requestid.MD, "abc def"), ""},
		{"129-character id", metadata.Pairs(requestid.MD, strings.Repeat("x", 129)), ""},
		{"non-ASCII id", metadata.Pairs(requestid.MD, "abcé"), ""},
		{"repeated id", metadata.Pairs(requestid.MD, "one", requestid.MD, "two"), ""},
	}
	icpt := requestid.UnaryServerInterceptor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}
			var got string
			calls := 0
			resp, err := icpt(ctx, "req", &grpc.UnaryServerInfo{FullMethod: "/test.Svc/M"}, func(ctx context.Context, req any) (any, error) {
				calls++
				got = requestid.From(ctx)
				if req != "req" {
					t.Errorf("handler got req %v", req)
				}
				return "resp", nil
			})
			if err != nil || resp != "resp" {
				t.Fatalf("interceptor = %v, %v; want the handler's answer", resp, err)
			}
			if calls != 1 {
				t.Fatalf("handler ran %d times, want 1", calls)
			}
			if tt.keep != "" {
				if got != tt.keep {
					t.Errorf("request id = %q, want %q kept", got, tt.keep)
				}
				return
			}
			if !requestid.Valid(got) || len(got) != 32 {
				t.Errorf("request id = %q, want a fresh 32-character id", got)
			}
			for _, v := range tt.md.Get(requestid.MD) {
				if got == v {
					t.Errorf("invalid incoming id %q was kept", v)
				}
			}
		})
	}
}

func TestUnaryClientInterceptor(t *testing.T) {
	tests := []struct {
		name string
		id   string
		md   metadata.MD // outgoing metadata already set (grpc-gateway forwards headers)
		want []string
	}{
		{"id passed on", "abc", nil, []string{"abc"}},
		{"no id, nothing sent", "", nil, nil},
		{"forwarded header replaced, not doubled", "abc", metadata.Pairs(requestid.MD, "abc", "x-api-key", "k"), []string{"abc"}},
		{"stale id replaced by the context's", "abc", metadata.Pairs(requestid.MD, "other"), []string{"abc"}},
		{"forwarded id kept without one in the context", "", metadata.Pairs(requestid.MD, "other"), []string{"other"}},
	}
	icpt := requestid.UnaryClientInterceptor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewOutgoingContext(ctx, tt.md)
			}
			if tt.id != "" {
				ctx = requestid.With(ctx, tt.id)
			}
			var sent []string
			err := icpt(ctx, "/test.Svc/M", nil, nil, nil, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
				md, _ := metadata.FromOutgoingContext(ctx)
				sent = md.Get(requestid.MD)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(sent, ",") != strings.Join(tt.want, ",") {
				t.Errorf("sent %q, want %q", sent, tt.want)
			}
		})
	}
}
