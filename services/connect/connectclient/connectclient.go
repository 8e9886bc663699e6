// Package connectclient is how the other services reach connect: the outbox's publisher over
// connect's PublishEvents, and connect's reading of what it sends. It is connect's, beside its
// contract, so that the shared outbox (platform/outbox) knows no service's protos; a module of
// its own, so that a service that publishes events builds without connect's.
package connectclient

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/outbox"
)

// Publisher publishes through connect's PublishEvents (an outbox.Publisher).
type Publisher struct {
	c connectv1.ConnectInternalServiceClient
}

var _ outbox.Publisher = (*Publisher)(nil)

// NewPublisher returns the publisher over conn, a connection to connect carrying this
// service's internal token.
func NewPublisher(conn grpc.ClientConnInterface) *Publisher {
	return &Publisher{c: connectv1.NewConnectInternalServiceClient(conn)}
}

// Publish sends evs; an INVALID_ARGUMENT answer is outbox.ErrRejected, anything else failed is
// retried.
func (p *Publisher) Publish(ctx context.Context, evs []events.Event) error {
	req := &connectv1.PublishEventsRequest{Events: make([]*connectv1.Event, 0, len(evs))}
	for _, e := range evs {
		req.Events = append(req.Events, &connectv1.Event{
			Id: e.ID, Type: e.Type, ClientId: e.ClientID, CreatedAt: timestamppb.New(e.CreatedAt), Data: e.Data,
		})
	}
	if _, err := p.c.PublishEvents(ctx, req); err != nil {
		if status.Code(err) == codes.InvalidArgument {
			return fmt.Errorf("%w: %v", outbox.ErrRejected, err) //nolint:errorlint // the gRPC status stays out of the chain: only ErrRejected is matched
		}
		return fmt.Errorf("publish events: %w", err)
	}
	return nil
}

// EventOf is the event a PublishEvents request carries (connect's side of Publisher).
func EventOf(e *connectv1.Event) events.Event {
	return events.Event{ID: e.GetId(), Type: e.GetType(), ClientID: e.GetClientId(), CreatedAt: e.GetCreatedAt().AsTime(), Data: e.GetData()}
}
