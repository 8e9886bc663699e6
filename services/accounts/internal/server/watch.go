package server

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
)

// Watch serves WatchPrincipals from the replica's hub.
type Watch struct {
	Hub *principals.Hub
	// HeartbeatEvery is the hub's listener beat, told to the caller in STARTED.
	HeartbeatEvery time.Duration
}

// listenWait bounds how long a stream waits for the replica's LISTEN before it is refused.
const listenWait = 3 * time.Second

var errWatchEnded = status.Error(codes.Unavailable, "principal changes are no longer received; drop cached principals and watch again")

// WatchPrincipals streams the changes of principals: STARTED once subscribed, then heartbeats
// and changes until the replica's LISTEN is lost (UNAVAILABLE) or the caller leaves.
func (s *Internal) WatchPrincipals(_ *accountsv1.WatchPrincipalsRequest, stream accountsv1.AccountsInternalService_WatchPrincipalsServer) error {
	if s.Watch.Hub == nil {
		return status.Error(codes.Unavailable, principals.ErrNotListening.Error())
	}
	// At start-up the LISTEN comes up a moment after the server serves: wait for it rather
	// than refuse the services that started beside this one. Less than the caller's wait for
	// STARTED (accountsclient: 5 s of silence ends a stream).
	s.Watch.Hub.WaitListening(stream.Context(), listenWait)
	sub, err := s.Watch.Hub.Subscribe()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer s.Watch.Hub.Unsubscribe(sub)
	if err := stream.Send(&accountsv1.WatchPrincipalsResponse{
		Kind: accountsv1.WatchPrincipalsResponse_KIND_STARTED, HeartbeatEvery: durationpb.New(s.Watch.HeartbeatEvery),
	}); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, ok := <-sub.C:
			if !ok {
				return errWatchEnded
			}
			if err := stream.Send(changeToProto(c)); err != nil {
				return err
			}
		}
	}
}

func changeToProto(c principals.Change) *accountsv1.WatchPrincipalsResponse {
	out := &accountsv1.WatchPrincipalsResponse{ClientId: c.ClientID, CredentialId: c.CredentialID}
	switch c.Kind {
	case principals.Heartbeat:
		out.Kind = accountsv1.WatchPrincipalsResponse_KIND_HEARTBEAT
	case principals.ClientChanged:
		out.Kind = accountsv1.WatchPrincipalsResponse_KIND_CLIENT
	case principals.APIKeyChanged:
		out.Kind = accountsv1.WatchPrincipalsResponse_KIND_API_KEY
	case principals.SDKTokenChanged:
		out.Kind = accountsv1.WatchPrincipalsResponse_KIND_SDK_TOKEN
	}
	return out
}
