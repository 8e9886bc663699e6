// Package logging builds the zap loggers of every mnv process.
//
// Logs never carry a key, a secret or a full mobile number: callers log ids, hints and masked
// numbers only, and the gRPC and HTTP request logs record methods, codes and durations, never
// payloads or metadata values.
package logging

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mnvhq/mnv/services/platform/requestid"
)

// New returns a JSON logger at level ("debug", "info", "warn", "error"). format "console" gives a
// human-readable logger for local development.
func New(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	var cfg zap.Config
	switch format {
	case "", "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.TimeKey = "time"
		cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("log format %q: want json or console", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	// Sampling would drop the one error line an on-call needs.
	cfg.Sampling = nil
	return cfg.Build()
}

// Request is the fields that tie a log line to its request: request_id, and trace_id and
// span_id when a span is active, so an operator can go from the line to the trace.
func Request(ctx context.Context) zap.Field { return zap.Inline(requestFields{ctx}) }

type requestFields struct{ ctx context.Context }

func (r requestFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if id := requestid.From(r.ctx); id != "" {
		enc.AddString("request_id", id)
	}
	if sc := trace.SpanContextFromContext(r.ctx); sc.IsValid() {
		enc.AddString("trace_id", sc.TraceID().String())
		enc.AddString("span_id", sc.SpanID().String())
	}
	return nil
}
