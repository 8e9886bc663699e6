// Command connect runs the connect service: profiles, imports, integrations with delivery,
// enrichment and the overview.
package main

import (
	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/platform/process"
)

func main() {
	process.Serve("connect", process.Build(app.LoadConfig, app.New),
		process.Migrate(app.DatabaseURL, app.Migrate),
		// An import allocates for every row it reads; at the default 400% the heap grew to five
		// times its live size (a peak RSS of 245 MB importing a 1M-row file in make bench).
		process.GCPercent(100))
}
