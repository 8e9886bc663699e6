package harness

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mnvhq/mnv/services/platform/findup"
)

// eventSchema is docs/events.schema.json compiled: every event the tests see must match what
// the documentation promises.
var eventSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	path, err := findup.Path("docs/events.schema.json")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("events.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("events.schema.json")
})

// ValidateEvent checks an event's body (as a receiver gets it) against docs/events.schema.json.
func ValidateEvent(body string) error {
	sch, err := eventSchema()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}
