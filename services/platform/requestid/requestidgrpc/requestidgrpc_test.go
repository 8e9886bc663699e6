package requestidgrpc_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/services/platform/requestid"
	"github.com/mnvhq/mnv/services/platform/requestid/requestidgrpc"
)

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
	icpt := requestidgrpc.UnaryServerInterceptor()
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
	icpt := requestidgrpc.UnaryClientInterceptor()
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
