package server

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/endpoints"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/paging"
)

// Webhooks implements WebhookService: a client's event endpoints. Its rules name no product,
// so every client reaches it.
type Webhooks struct {
	connectv1.UnimplementedWebhookServiceServer
	Webhooks *endpoints.Service
	Log      *zap.Logger
}

func (s *Webhooks) fail(ctx context.Context, err error) error {
	return grpcserver.Status(ctx, s.Log, err)
}

// CreateWebhook stores an endpoint; its secret is shown this once.
func (s *Webhooks) CreateWebhook(ctx context.Context, req *connectv1.CreateWebhookRequest) (*connectv1.CreateWebhookResponse, error) {
	c, err := s.Webhooks.Create(ctx, client(ctx), endpoints.CreateRequest{
		URL: req.GetUrl(), Events: req.GetEvents(), Description: req.GetDescription(), Enabled: req.Enabled,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.CreateWebhookResponse{Webhook: withSecretToProto(c)}, nil
}

// ListWebhooks lists the client's endpoints.
func (s *Webhooks) ListWebhooks(ctx context.Context, req *connectv1.ListWebhooksRequest) (*connectv1.ListWebhooksResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Webhooks.List(ctx, client(ctx), pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListWebhooksResponse{
		Items: mapItems(page.Items, webhookToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// GetWebhook reads an endpoint.
func (s *Webhooks) GetWebhook(ctx context.Context, req *connectv1.GetWebhookRequest) (*connectv1.GetWebhookResponse, error) {
	e, err := s.Webhooks.Get(ctx, client(ctx), req.GetWebhookId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.GetWebhookResponse{Webhook: webhookToProto(e)}, nil
}

// UpdateWebhook applies a patch.
func (s *Webhooks) UpdateWebhook(ctx context.Context, req *connectv1.UpdateWebhookRequest) (*connectv1.UpdateWebhookResponse, error) {
	p := req.GetPatch()
	e, err := s.Webhooks.Update(ctx, client(ctx), req.GetWebhookId(), endpoints.Patch{
		URL: p.Url, Description: p.Description, Events: p.GetEvents(), Enabled: p.Enabled,
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.UpdateWebhookResponse{Webhook: webhookToProto(e)}, nil
}

// DeleteWebhook removes an endpoint.
func (s *Webhooks) DeleteWebhook(ctx context.Context, req *connectv1.DeleteWebhookRequest) (*connectv1.DeleteWebhookResponse, error) {
	if err := s.Webhooks.Delete(ctx, client(ctx), req.GetWebhookId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.DeleteWebhookResponse{Id: req.GetWebhookId()}, nil
}

// RotateWebhookSecret gives the endpoint a new secret, shown this once.
func (s *Webhooks) RotateWebhookSecret(ctx context.Context, req *connectv1.RotateWebhookSecretRequest) (*connectv1.RotateWebhookSecretResponse, error) {
	var overlap *time.Duration
	if req.OverlapSeconds != nil {
		d := time.Duration(*req.OverlapSeconds) * time.Second
		overlap = &d
	}
	c, err := s.Webhooks.RotateSecret(ctx, client(ctx), req.GetWebhookId(), overlap)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.RotateWebhookSecretResponse{Webhook: withSecretToProto(c)}, nil
}

// TestWebhook sends a ping to the endpoint.
func (s *Webhooks) TestWebhook(ctx context.Context, req *connectv1.TestWebhookRequest) (*connectv1.TestWebhookResponse, error) {
	id, err := s.Webhooks.Test(ctx, client(ctx), req.GetWebhookId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.TestWebhookResponse{WebhookId: req.GetWebhookId(), EventId: id}, nil
}

// ListWebhookDeliveries reads a page of the endpoint's delivery log.
func (s *Webhooks) ListWebhookDeliveries(ctx context.Context, req *connectv1.ListWebhookDeliveriesRequest) (*connectv1.ListWebhookDeliveriesResponse, error) {
	pg, err := paging.Parse(req.Page, req.Size)
	if err != nil {
		return nil, err
	}
	page, err := s.Webhooks.Deliveries(ctx, client(ctx), req.GetWebhookId(), (*domain.DeliveryStatus)(req.Status), pg.Limit(), pg.Offset())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.ListWebhookDeliveriesResponse{
		Items: mapItems(page.Items, deliveryToProto), Page: pg.Number, Size: pg.Size, TotalItems: page.Total, TotalPages: pg.TotalPages(page.Total),
	}, nil
}

// RedeliverWebhookDelivery queues the delivery's event to its endpoint again.
func (s *Webhooks) RedeliverWebhookDelivery(ctx context.Context, req *connectv1.RedeliverWebhookDeliveryRequest) (*connectv1.RedeliverWebhookDeliveryResponse, error) {
	if err := s.Webhooks.Redeliver(ctx, client(ctx), req.GetDeliveryId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &connectv1.RedeliverWebhookDeliveryResponse{DeliveryId: req.GetDeliveryId()}, nil
}

// WebhookAdmin implements WebhookAdminService: the operator's view (mnvctl).
type WebhookAdmin struct {
	connectv1.UnimplementedWebhookAdminServiceServer
	Webhooks *endpoints.Service
	Log      *zap.Logger
}

// ListClientWebhooks lists every endpoint of a client.
func (s *WebhookAdmin) ListClientWebhooks(ctx context.Context, req *connectv1.ListClientWebhooksRequest) (*connectv1.ListClientWebhooksResponse, error) {
	es, err := s.Webhooks.ClientEndpoints(ctx, req.GetClientId())
	if err != nil {
		return nil, grpcserver.Status(ctx, s.Log, err)
	}
	return &connectv1.ListClientWebhooksResponse{Items: mapItems(es, webhookToProto)}, nil
}

// DisableClientWebhook disables a client's endpoint for the operator.
func (s *WebhookAdmin) DisableClientWebhook(ctx context.Context, req *connectv1.DisableClientWebhookRequest) (*connectv1.DisableClientWebhookResponse, error) {
	e, err := s.Webhooks.DisableByOperator(ctx, req.GetClientId(), req.GetWebhookId())
	if err != nil {
		return nil, grpcserver.Status(ctx, s.Log, err)
	}
	return &connectv1.DisableClientWebhookResponse{Webhook: webhookToProto(e)}, nil
}

// EnableClientWebhook enables a client's endpoint for the operator, whoever disabled it.
func (s *WebhookAdmin) EnableClientWebhook(ctx context.Context, req *connectv1.EnableClientWebhookRequest) (*connectv1.EnableClientWebhookResponse, error) {
	e, err := s.Webhooks.EnableByOperator(ctx, req.GetClientId(), req.GetWebhookId())
	if err != nil {
		return nil, grpcserver.Status(ctx, s.Log, err)
	}
	return &connectv1.EnableClientWebhookResponse{Webhook: webhookToProto(e)}, nil
}

func webhookToProto(e domain.WebhookEndpoint) *connectv1.WebhookEndpoint {
	return &connectv1.WebhookEndpoint{
		Id: e.ID, Url: e.URL, Events: endpoints.EventsOf(e), Description: e.Description, Enabled: e.Enabled,
		DisabledReason: disabledReasons.Enum(e.DisabledReason),
		FailingSince:   tsOrNil(e.FailingSince), CreatedAt: timestamppb.New(e.CreatedAt), UpdatedAt: timestamppb.New(e.UpdatedAt),
	}
}

func withSecretToProto(c endpoints.WithSecret) *connectv1.WebhookEndpoint {
	out := webhookToProto(c.Endpoint)
	out.Secret = &c.Secret
	out.PreviousSecretExpiresAt = tsOrNil(c.PreviousExpiresAt)
	return out
}

func deliveryToProto(d domain.WebhookDeliveryLog) *connectv1.WebhookDelivery {
	out := &connectv1.WebhookDelivery{
		Id: d.ID, EventId: d.EventID, EventType: d.EventType,
		Status:   deliveryStatuses.Enum(d.Status),
		Attempts: int32(d.Attempts), LastHttpStatus: int32Ptr(d.LastStatus), LastError: d.LastError,
		CreatedAt: timestamppb.New(d.CreatedAt), UpdatedAt: timestamppb.New(d.UpdatedAt), DeliveredAt: tsOrNil(d.DeliveredAt),
		AttemptLog: make([]*connectv1.WebhookAttempt, 0, len(d.AttemptLog)),
	}
	for _, a := range d.AttemptLog {
		out.AttemptLog = append(out.AttemptLog, &connectv1.WebhookAttempt{
			Attempt: int32(a.Attempt), HttpStatus: int32Ptr(a.HTTPStatus), DurationMs: int32(a.Duration.Milliseconds()),
			Error: a.Error, StartedAt: timestamppb.New(a.StartedAt),
		})
	}
	return out
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(*v)
	return &n
}
