package app

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// connectReceiver is the relay worker's Connect over gRPC.
type connectReceiver struct {
	client connectv1.ConnectInternalServiceClient
}

func (c connectReceiver) RecordVerifiedNumbers(ctx context.Context, numbers []domain.VerifiedNumber) error {
	req := &connectv1.RecordVerifiedNumbersRequest{Items: make([]*connectv1.VerifiedNumber, len(numbers))}
	for i, f := range numbers {
		req.Items[i] = &connectv1.VerifiedNumber{
			ClientId: f.ClientID, VerificationId: f.VerificationID, NumberHash: f.NumberHash, VerifiedAt: timestamppb.New(f.VerifiedAt),
		}
	}
	_, err := c.client.RecordVerifiedNumbers(ctx, req)
	return err
}
