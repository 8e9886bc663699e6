package accountsclient

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
)

// principalStreams refuses the first refusals streams, as accounts does until it LISTENs, then
// starts each stream and beats until it has sent beats heartbeats (0: until the call ends).
type principalStreams struct {
	accountsv1.UnimplementedAccountsInternalServiceServer
	refusals int32
	beats    int
	calls    atomic.Int32
}

func (s *principalStreams) WatchPrincipals(_ *accountsv1.WatchPrincipalsRequest, stream grpc.ServerStreamingServer[accountsv1.WatchPrincipalsResponse]) error {
	if s.calls.Add(1) <= s.refusals {
		return status.Error(codes.Unavailable, "principal changes are not being received from the database")
	}
	beat := 20 * time.Millisecond
	if err := stream.Send(&accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_STARTED, HeartbeatEvery: durationpb.New(beat)}); err != nil {
		return err
	}
	for i := 0; s.beats == 0 || i < s.beats; i++ {
		select {
		case <-stream.Context().Done():
			return nil
		case <-time.After(beat):
		}
		if err := stream.Send(&accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_HEARTBEAT}); err != nil {
			return err
		}
	}
	return nil // the stream ends: as if accounts lost its LISTEN
}

type watcher struct{ started atomic.Int32 }

func (w *watcher) Started(time.Duration)     { w.started.Add(1) }
func (w *watcher) Heard()                    {}
func (w *watcher) Invalidate(string)         {}
func (w *watcher) Stopped()                  {}
func (w *watcher) StaleAfter() time.Duration { return time.Second }

// TestWatchPrincipalsLogging: a start where accounts refuses the first streams (it is not
// listening yet) logs no warning, as nothing is wrong; a stream lost after it was up, or one
// that does not come up within the grace, is a warning.
func TestWatchPrincipalsLogging(t *testing.T) {
	tests := []struct {
		name      string
		refusals  int32
		beats     int
		grace     time.Duration
		wantWarns bool
	}{
		{name: "normal start: refused twice, then up", refusals: 2, grace: 20 * time.Second},
		{name: "up, then lost", refusals: 0, beats: 3, grace: 20 * time.Second, wantWarns: true},
		{name: "not up within the grace", refusals: 1 << 20, grace: 0, wantWarns: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func(g time.Duration) { startGrace = g }(startGrace)
			startGrace = tt.grace
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer()
			streams := &principalStreams{refusals: tt.refusals, beats: tt.beats}
			accountsv1.RegisterAccountsInternalServiceServer(srv, streams)
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			c, err := Dial(lis.Addr().String(), grpcclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })

			core, logs := observer.New(zapcore.DebugLevel)
			w := &watcher{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.WatchPrincipals(ctx, w, zap.New(core)) }()
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) && streams.calls.Load() < 3 {
				time.Sleep(10 * time.Millisecond)
			}
			if tt.beats == 0 && tt.refusals < 3 {
				// A normal start: wait for the stream to be up, and a little beyond.
				for time.Now().Before(deadline) && w.started.Load() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
				if w.started.Load() == 0 {
					t.Fatal("the stream never started")
				}
				time.Sleep(100 * time.Millisecond)
			}
			cancel()
			<-done

			warns := logs.FilterLevelExact(zapcore.WarnLevel).Len() + logs.FilterLevelExact(zapcore.ErrorLevel).Len()
			if got := warns > 0; got != tt.wantWarns {
				t.Errorf("warnings logged = %v, want %v; log: %v", got, tt.wantWarns, logs.All())
			}
		})
	}
}
