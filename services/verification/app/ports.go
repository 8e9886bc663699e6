package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/pumping"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
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

// pumpingGuard builds the pumping controls every SMS of a workflow passes
// (docs/architecture.md, "Pumping controls"): the blocked prefixes and the day's spend from the
// service's tables, the client's allow-list and cap from its workflow policy, the velocity
// budgets in a rate-limit store of their own and the conversion counts in Redis
// (MNV_REDIS_URL), or in this process without it.
func (a *App) pumpingGuard(cfg Config, st *store.Store, hasher *phone.Hasher, reg prometheus.Registerer, log *zap.Logger) (workflows.PumpingGuard, error) {
	// Its own store, not the server's: the refusals are counted in mnv_pumping_refused_total,
	// not as API limits (no registerer), and its keys are apart (…:verification:pumping-…).
	limits, err := ratelimit.Open(ratelimit.Options{Service: "verification", RedisURL: cfg.RedisURL, Log: log})
	if err != nil {
		return nil, fmt.Errorf("MNV_REDIS_URL: %w", err)
	}
	a.Add("pumping budgets", limits.Close)
	var counters pumping.Counters = pumping.NewLocalCounters(cfg.Pumping.Window)
	if cfg.RedisURL != "" {
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("MNV_REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opts)
		a.Add("pumping counts", rdb.Close)
		counters = pumping.NewRedisCounters(rdb, "mnv:verification:pumping:", cfg.Pumping.Window)
	}
	g, err := pumping.New(cfg.Pumping, pumping.Ports{
		Blocks: st, Spend: st, Counters: counters,
		PrefixLimiter:  limits.Limiter("pumping-prefix", ratelimit.Limit(cfg.Pumping.PrefixLimit)),
		NumberLimiter:  limits.Limiter("pumping-number", ratelimit.Limit(cfg.Pumping.NumberLimit)),
		AddressLimiter: limits.Limiter("pumping-address", ratelimit.Limit(cfg.Pumping.AddressLimit)),
		NumberKey:      hasher.Sum,
	}, log, reg)
	if err != nil {
		return nil, fmt.Errorf("MNV_PUMPING_*: %w", err)
	}
	return workflowGuard{pumping.ByID{Guard: g, Clients: st}}, nil
}

// workflowGuard is the pumping controls as a workflow asks them (workflows.PumpingGuard).
type workflowGuard struct{ by pumping.ByID }

func (g workflowGuard) Allow(ctx context.Context, r workflows.SMSRequest) error {
	return g.by.Check(ctx, pumping.Request{ClientID: r.ClientID, Number: r.Number, Country: r.Country, Sandbox: r.Sandbox, Addr: r.Address,
		SpentToday: r.SpentToday})
}

func (g workflowGuard) Verified(ctx context.Context, number string) { g.by.Verified(ctx, number) }
