package logging_test

import (
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/mnvhq/mnv/services/platform/logging"
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

func TestRequestIDField(t *testing.T) {
	f := logging.RequestID("abc")
	if f.Key != "request_id" || f.String != "abc" || f.Type != zapcore.StringType {
		t.Errorf("RequestID = %+v", f)
	}
}
