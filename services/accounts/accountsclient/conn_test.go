package accountsclient_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
)

// origins answers CheckWebOrigin: the call's transport is what is under test here.
type origins struct {
	accountsv1.UnimplementedAccountsInternalServiceServer
}

func (origins) CheckWebOrigin(context.Context, *accountsv1.CheckWebOriginRequest) (*accountsv1.CheckWebOriginResponse, error) {
	return &accountsv1.CheckWebOriginResponse{Allowed: true}, nil
}

// TestAccountsComingUp: a caller that started before accounts listened answers its first
// request once accounts is up, rather than failing it until grpc-go's reconnect backoff ends;
// with accounts away a call still fails, after a bounded wait.
func TestAccountsComingUp(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := accountsclient.Dial(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	began := time.Now()
	if _, err := c.AllowsWebOrigin(ctx, "c1", "https://shop.example"); err == nil {
		t.Fatal("a call with accounts away succeeded")
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("a call with accounts away took %v: the wait must be bounded", took)
	}

	// Accounts comes up: the connection has failed and backs off.
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := grpc.NewServer()
	accountsv1.RegisterAccountsInternalServiceServer(srv, origins{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	if ok, err := c.AllowsWebOrigin(ctx, "c1", "https://shop.example"); err != nil || !ok {
		t.Fatalf("the first call once accounts is up: %v, %v", ok, err)
	}
}
