package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
	"github.com/mnvhq/mnv/services/accounts/internal/server"
)

// TestWatchWaitsForTheListen: a stream opened while the replica's LISTEN is coming up (the
// services of make run start together) starts once it is up, rather than being refused; one
// opened while it stays down is still refused UNAVAILABLE.
func TestWatchWaitsForTheListen(t *testing.T) {
	tests := []struct {
		name     string
		upAfter  time.Duration // 0: never
		wantCode codes.Code
	}{
		{"up a moment after the stream opens", 100 * time.Millisecond, codes.OK},
		{"never up", 0, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub, err := principals.NewHub(nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			accountsv1.RegisterAccountsInternalServiceServer(srv, &server.Internal{Watch: server.Watch{Hub: hub, HeartbeatEvery: time.Second}})
			lis := bufconn.Listen(1 << 16)
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			conn, err := grpc.NewClient("passthrough:///bufnet",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.upAfter > 0 {
				time.AfterFunc(tt.upAfter, hub.Up)
			}
			stream, err := accountsv1.NewAccountsInternalServiceClient(conn).WatchPrincipals(ctx, &accountsv1.WatchPrincipalsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := stream.Recv()
			if status.Code(err) != tt.wantCode {
				t.Fatalf("first message %v, %v; want code %v", m, err, tt.wantCode)
			}
			if err == nil && m.GetKind() != accountsv1.WatchPrincipalsResponse_KIND_STARTED {
				t.Fatalf("first message %v, want STARTED", m)
			}
		})
	}
}
