package logging_test

import (
	"context"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/requestid"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		level   string
		format  string
		wantErr bool
		enabled zapcore.Level // lowest level the logger writes
	}{
		{"info json", "info", "json", false, zapcore.InfoLevel},
		{"default format is json", "warn", "", false, zapcore.WarnLevel},
		{"debug console", "debug", "console", false, zapcore.DebugLevel},
		{"error", "error", "json", false, zapcore.ErrorLevel},
		{"upper-case level", "INFO", "json", false, zapcore.InfoLevel},
		{"unknown level", "verbose", "json", true, 0},
		{"empty level is info", "", "json", false, zapcore.InfoLevel},
		{"unknown format", "info", "xml", true, 0},
		{"format is case-sensitive", "info", "JSON", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, err := logging.New(tt.level, tt.format)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New(%q, %q) error = %v, wantErr %v", tt.level, tt.format, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			core := log.Core()
			if !core.Enabled(tt.enabled) {
				t.Errorf("level %v is not enabled", tt.enabled)
			}
			if tt.enabled > zapcore.DebugLevel && core.Enabled(tt.enabled-1) {
				t.Errorf("level %v is enabled below %v", tt.enabled-1, tt.enabled)
			}
		})
	}
}

func TestRequest(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	spanID, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled,
	}))
	tests := []struct {
		name string
		ctx  context.Context
		want map[string]any
	}{
		{"nothing", context.Background(), map[string]any{}},
		{"request id only", requestid.With(context.Background(), "r-1"), map[string]any{"request_id": "r-1"}},
		{"span only", traced, map[string]any{"trace_id": traceID.String(), "span_id": spanID.String()}},
		{"both", requestid.With(traced, "r-2"), map[string]any{"request_id": "r-2", "trace_id": traceID.String(), "span_id": spanID.String()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			zap.New(core).Info("line", logging.Request(tt.ctx))
			got := logs.All()[0].ContextMap()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fields = %v, want %v", got, tt.want)
			}
		})
	}
}
