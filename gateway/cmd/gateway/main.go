// Command gateway runs the HTTP edge of mnv: /v1/api as JSON over the services' gRPC APIs.
package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/app"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/process"
)

func main() {
	process.Serve("gateway", build)
}

// build is process.Build's work with one difference: the gateway's /metrics serves the
// registry it registers on, the process's own.
func build(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) (process.Service, error) {
	cfg, err := app.LoadConfig(env)
	if err != nil {
		return nil, err
	}
	g, err := app.New(ctx, cfg, log, reg, reg)
	if err != nil {
		return nil, err
	}
	return g, nil
}
