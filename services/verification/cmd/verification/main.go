// Command verification runs the verification service: operators, captures, verify, the browser
// flow and stuck-plus reveals.
package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/process"
	"github.com/mnvhq/mnv/services/verification/app"
)

func main() {
	process.Main("verification", func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error {
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
			a.Close()
			return err
		}
		log.Info("serving gRPC", zap.String("addr", lis.Addr().String()))
		return a.Run(ctx, lis)
	})
}
