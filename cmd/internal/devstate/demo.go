package devstate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// DemoFile is where make run keeps its demo client's credentials (git-ignored, mode 0600).
const DemoFile = "demo-client.json"

// Demo is the demo client of a local run.
type Demo struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	APIKey       string `json:"apiKey"`
}

// ReadDemo reads the demo client kept in dir; the error wraps fs.ErrNotExist when there is none.
func ReadDemo(dir string) (Demo, error) {
	return readDemo(filepath.Join(dir, DemoFile))
}

// FindDemo reads the demo client of the latest local run (the state folder as for FindAddrs).
func FindDemo() (Demo, error) {
	p, err := find(DemoFile)
	if err != nil {
		return Demo{}, err
	}
	return readDemo(p)
}

func readDemo(path string) (Demo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Demo{}, err
	}
	var d Demo
	if err := json.Unmarshal(b, &d); err != nil {
		return Demo{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// WriteDemo keeps d in dir, readable by its owner only.
func WriteDemo(dir string, d Demo) error {
	b, err := json.MarshalIndent(d, "", "  ") //nolint:gosec // G117: the demo client's secret is kept on purpose, in an owner-only file
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, DemoFile), append(b, '\n'), 0o600)
}

// APIURL is the base of the JSON API of the run that recorded a; empty when it recorded no
// gateway.
func (a Addrs) APIURL() string {
	if a.GatewayHTTP == "" {
		return ""
	}
	return "http://" + a.GatewayHTTP + "/v1/api"
}
