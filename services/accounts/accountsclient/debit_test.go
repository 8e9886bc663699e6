package accountsclient_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/money"
)

// beforeDebitMany answers as an accounts of the version before DebitMany: Debit only. The
// behaviour of the current accounts is tested against the real one (services/accounts/app).
type beforeDebitMany struct {
	accountsv1.UnimplementedAccountsInternalServiceServer
	calls atomic.Int32
}

func (s *beforeDebitMany) Debit(_ context.Context, req *accountsv1.DebitRequest) (*accountsv1.DebitResponse, error) {
	s.calls.Add(1)
	if req.GetReference() == "refused" {
		return nil, apierr.New(codes.FailedPrecondition, fault.InsufficientBalance, "the balance is too low")
	}
	return &accountsv1.DebitResponse{EntryId: "entry-" + req.GetReference(), Charged: 2, BalanceAfter: 8}, nil
}

// TestDebitDuringRollingUpgrade: a caller upgraded before accounts still charges, one Debit
// call per debit, with the same answers.
func TestDebitDuringRollingUpgrade(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	old := &beforeDebitMany{}
	accountsv1.RegisterAccountsInternalServiceServer(srv, old)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := accountsclient.Dial(lis.Addr().String(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	refs := []string{"a", "refused", "b", "c"}
	got := make([]money.Charged, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			got[i], errs[i] = c.Debit(ctx, money.Charge{ClientID: "client", Kind: money.KindVerification, Reference: ref})
		})
	}
	wg.Wait()
	for i, ref := range refs {
		if ref == "refused" {
			if !errors.Is(errs[i], money.ErrInsufficientBalance) {
				t.Errorf("debit %q: %v, want ErrInsufficientBalance", ref, errs[i])
			}
			continue
		}
		if errs[i] != nil || got[i].EntryID != "entry-"+ref || got[i].Amount != 2 || got[i].BalanceAfter != 8 {
			t.Errorf("debit %q: %+v, %v; want its entry, 2 charged, 8 left", ref, got[i], errs[i])
		}
	}
	if n := old.calls.Load(); n != int32(len(refs)) {
		t.Errorf("%d Debit calls, want %d", n, len(refs))
	}
}
