package tracing_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// received is what a fake collector was sent: the service names of the resources and the span
// names.
type received struct {
	services []string
	spans    []string
}

func (r *received) add(req *coltracepb.ExportTraceServiceRequest) {
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.services = append(r.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
}

// httpCollector is an OTLP/HTTP receiver on loopback.
func httpCollector(t *testing.T) (endpoint string, got chan *coltracepb.ExportTraceServiceRequest) {
	got = make(chan *coltracepb.ExportTraceServiceRequest, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	got chan *coltracepb.ExportTraceServiceRequest
}

func (g *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.got <- req
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// grpcCollector is an OTLP/gRPC receiver on loopback.
func grpcCollector(t *testing.T) (endpoint string, got chan *coltracepb.ExportTraceServiceRequest) {
	got = make(chan *coltracepb.ExportTraceServiceRequest, 10)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, &grpcReceiver{got: got})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "http://" + lis.Addr().String(), got
}

// TestSetup turns tracing on through the standard variables and checks that a span reaches a
// real collector over each protocol, flushed by the shutdown; without an endpoint it stays off.
func TestSetup(t *testing.T) {
	tests := []struct {
		name      string
		collector func(*testing.T) (string, chan *coltracepb.ExportTraceServiceRequest)
		env       map[string]string
		wantOn    bool
		wantName  string
		wantErr   string
	}{
		{name: "no endpoint: off", env: map[string]string{}},
		{name: "disabled SDK: off", collector: httpCollector, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none: off", collector: httpCollector, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "http/protobuf by default", collector: httpCollector, env: map[string]string{}, wantOn: true, wantName: "svc"},
		{name: "grpc", collector: grpcCollector, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantOn: true, wantName: "svc"},
		{name: "service name from the environment", collector: httpCollector, env: map[string]string{"OTEL_SERVICE_NAME": "mnv-gateway-eu"}, wantOn: true, wantName: "mnv-gateway-eu"},
		{name: "unknown protocol", collector: httpCollector, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
				t.Setenv(k, "")
			}
			var got chan *coltracepb.ExportTraceServiceRequest
			if tt.collector != nil {
				var endpoint string
				endpoint, got = tt.collector(t)
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shutdown, err := tracing.Setup(ctx, config.FromOS(), "svc", zap.NewNop())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup error = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tracing.Enabled() != tt.wantOn {
				t.Fatalf("Enabled = %v, want %v", tracing.Enabled(), tt.wantOn)
			}
			if on := tracing.ServerOptions() != nil || tracing.DialOptions() != nil; on != tt.wantOn {
				t.Errorf("instrumentation offered = %v, want %v", on, tt.wantOn)
			}
			if tt.wantOn {
				sctx, span := otel.Tracer("tracing_test").Start(ctx, "unit-of-work")
				if !trace.SpanContextFromContext(sctx).IsValid() {
					t.Error("a started span has no trace id")
				}
				span.End()
			}
			if err := shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if tracing.Enabled() {
				t.Error("tracing still on after shutdown")
			}
			if !tt.wantOn {
				return
			}
			var r received
			for len(r.spans) == 0 {
				select {
				case req := <-got:
					r.add(req)
				case <-ctx.Done():
					t.Fatal("the collector received no span")
				}
			}
			if len(r.spans) != 1 || r.spans[0] != "unit-of-work" || len(r.services) == 0 || r.services[0] != tt.wantName {
				t.Errorf("collector got spans %v of services %v, want [unit-of-work] of %s", r.spans, r.services, tt.wantName)
			}
		})
	}
}
