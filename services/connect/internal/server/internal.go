package server

import (
	"context"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/connectclient"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
)

// EventIntake accepts events for webhook delivery; *delivery.Service (eventhooks/delivery) is one.
type EventIntake interface {
	// PublishCount accepts evs once each (by id) and says how many were new.
	PublishCount(ctx context.Context, evs []events.Event) (int, error)
}

// PublishEvents takes other services' events (forwarded by their outboxes) into the delivery
// engine. A malformed event is INVALID_ARGUMENT, which the outbox cancels rather than retries.
func (s *Internal) PublishEvents(ctx context.Context, req *connectv1.PublishEventsRequest) (*connectv1.PublishEventsResponse, error) {
	evs := make([]events.Event, 0, len(req.GetEvents()))
	for _, e := range req.GetEvents() {
		evs = append(evs, connectclient.EventOf(e))
	}
	n, err := s.Events.PublishCount(ctx, evs)
	if err != nil {
		return nil, grpcserver.Status(ctx, s.Log, err)
	}
	return &connectv1.PublishEventsResponse{Accepted: int64(n)}, nil
}
