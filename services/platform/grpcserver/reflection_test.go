package grpcserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
)

// TestReflection: with Transport.Reflection a caller without any credential lists the services
// (both reflection versions, as grpcurl and buf curl ask either); without it, reflection is
// unknown to the server. Either way the services' own methods still need their credential.
func TestReflection(t *testing.T) {
	tests := []struct {
		name string
		on   bool
	}{
		{"on", true},
		{"off", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := grpcserver.New(grpcserver.Options{
				Logger:    zap.NewNop(),
				Guard:     auth.NewGuard(policy, nil, auth.NewServiceTokens(callers, "")),
				Transport: grpcserver.Transport{Reflection: tt.on},
			})
			if err != nil {
				t.Fatal(err)
			}
			s.RegisterService(testService(), struct{}{})
			lis := bufconn.Listen(1 << 20)
			ctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- s.Serve(ctx, lis) }()
			t.Cleanup(func() { stop(); <-served })
			conn, err := grpc.NewClient("passthrough:///bufnet",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			listV1 := func() ([]string, error) {
				stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(callCtx)
				if err != nil {
					return nil, err
				}
				// A Send the server already ended says io.EOF; Recv tells its status (grpc-go's
				// SendMsg contract): an unknown service may answer before the request is sent.
				if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
					return nil, err
				}
				resp, err := stream.Recv()
				if err != nil {
					return nil, err
				}
				var names []string
				for _, sv := range resp.GetListServicesResponse().GetService() {
					names = append(names, sv.GetName())
				}
				return names, nil
			}
			// v1alpha is deprecated, but older grpcurl and Postman versions ask only for it: the
			// test holds the server to answering it.
			listV1alpha := func() ([]string, error) {
				stream, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(callCtx)
				if err != nil {
					return nil, err
				}
				if err := stream.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) { //nolint:staticcheck // v1alpha on purpose, see above
					return nil, err
				}
				resp, err := stream.Recv()
				if err != nil {
					return nil, err
				}
				var names []string
				for _, sv := range resp.GetListServicesResponse().GetService() { //nolint:staticcheck // v1alpha on purpose
					names = append(names, sv.GetName()) //nolint:staticcheck // v1alpha on purpose
				}
				return names, nil
			}
			for version, list := range map[string]func() ([]string, error){"v1": listV1, "v1alpha": listV1alpha} {
				names, err := list()
				if !tt.on {
					if status.Code(err) != codes.Unimplemented {
						t.Errorf("%s: reflection off answered %v, %v; want UNIMPLEMENTED", version, names, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", version, err)
				}
				for _, want := range []string{"test.Svc", "grpc.health.v1.Health"} {
					if !slices.Contains(names, want) {
						t.Errorf("%s: services %v lack %s", version, names, want)
					}
				}
			}
			// Reflection opens no method: the internal one still needs its token.
			err = conn.Invoke(callCtx, "/test.Svc/Secret", wrapperspb.String(""), new(wrapperspb.StringValue))
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("Secret without a credential: %v, want UNAUTHENTICATED", err)
			}
		})
	}
}
