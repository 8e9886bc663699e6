package grpcserver

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/requestid"
)

// TestCallLog: at the info level a successful call writes nothing, a refusal writes its line at
// info, a failure at error, each with the service, method, code and request id, and never the
// request or the answer.
func TestCallLog(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantLevel zapcore.Level
		wantLine  bool
	}{
		{"success is not logged at info", nil, zapcore.DebugLevel, false},
		{"a refusal is info", status.Error(codes.PermissionDenied, "no"), zapcore.InfoLevel, true},
		{"the service away is warn", status.Error(codes.Unavailable, "away"), zapcore.WarnLevel, true},
		{"a failure is error", status.Error(codes.Internal, "boom"), zapcore.ErrorLevel, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			c := callLog{log: zap.New(core)}
			ctx := requestid.With(context.Background(), "req-1")
			handler := func(context.Context, any) (any, error) { return "secret answer", tt.err }
			if _, err := c.unary(ctx, "secret request", &grpc.UnaryServerInfo{FullMethod: "/mnv.test.v1.Svc/Do"}, handler); err != tt.err {
				t.Fatalf("err = %v, want the handler's %v", err, tt.err)
			}
			if !tt.wantLine {
				if logs.Len() != 0 {
					t.Fatalf("lines %v, want none", logs.All())
				}
				return
			}
			if logs.Len() != 1 {
				t.Fatalf("%d lines, want 1", logs.Len())
			}
			e := logs.All()[0]
			m := e.ContextMap()
			if e.Level != tt.wantLevel || e.Message != "finished call" || m["grpc.service"] != "mnv.test.v1.Svc" || m["grpc.method"] != "Do" ||
				m["grpc.code"] != status.Code(tt.err).String() || m["request_id"] != "req-1" {
				t.Errorf("line %s %q %v", e.Level, e.Message, m)
			}
			for k, v := range m {
				if v == "secret request" || v == "secret answer" {
					t.Errorf("field %s holds the payload", k)
				}
			}
		})
	}
}
