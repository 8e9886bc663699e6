// Command accounts runs the accounts service: clients, credentials and money.
package main

import (
	"github.com/mnvhq/mnv/services/accounts/app"
	"github.com/mnvhq/mnv/services/platform/process"
)

func main() {
	process.Serve("accounts", process.Build(app.LoadConfig, app.New),
		process.Migrate(app.DatabaseURL, app.Migrate))
}
