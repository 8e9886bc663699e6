// Command connect runs the connect service: profiles, imports, integrations with delivery,
// enrichment and the overview.
package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/process"
)

func main() {
	process.Main("connect", func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error {
		switch cmd := process.Command(); cmd {
		case "migrate":
			url, err := app.DatabaseURL(env)
			if err != nil {
				return err
			}
			return app.Migrate(ctx, url, log)
		case "":
		default:
			return fmt.Errorf("unknown command %q: run with no argument to serve, or with migrate", cmd)
		}
		cfg, err := app.LoadConfig(env)
		if err != nil {
			return err
		}
		a, err := app.New(ctx, cfg, log, reg)
		if err != nil {
			return err
		}
		lis, err := a.Listen()
		if err != nil {
			return err
		}
		log.Info("serving gRPC", zap.String("addr", lis.Addr().String()))
		return a.Run(ctx, lis)
	},
		// An import allocates for every row it reads; at the default 400% the heap grew to five
		// times its live size (a peak RSS of 245 MB importing a 1M-row file in make bench).
		process.GCPercent(100))
}
