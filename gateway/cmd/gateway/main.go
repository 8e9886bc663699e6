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
	process.Main("gateway", func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error {
		cfg, err := app.LoadConfig(env)
		if err != nil {
			return err
		}
		g, err := app.New(ctx, cfg, log, reg, reg)
		if err != nil {
			return err
		}
		lis, err := g.Listen()
		if err != nil {
			return err
		}
		log.Info("serving HTTP", zap.String("addr", lis.Addr().String()))
		return g.Run(ctx, lis)
	})
}
