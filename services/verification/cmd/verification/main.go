// Command verification runs the verification service: operators, captures, verify, the browser
// flow and stuck-plus reveals.
package main

import (
	"github.com/mnvhq/mnv/services/platform/process"
	"github.com/mnvhq/mnv/services/verification/app"
)

func main() {
	process.Serve("verification", process.Build(app.LoadConfig, app.New),
		process.Migrate(app.DatabaseURL, app.Migrate))
}
