package devstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mnvhq/mnv/services/platform/findup"
)

// StateDirVar names the state folder of a local setup; .mnv (in the checkout) when unset.
const StateDirVar = "MNV_STATE_DIR"

// DefaultDir is the state folder when StateDirVar is unset, relative to where make run runs.
const DefaultDir = ".mnv"

// addrsFile is where make run records the addresses it listens on.
const addrsFile = "addrs.json"

// Addrs are the addresses a local run actually listens on: whatever ports were configured or
// picked, the tools read them here instead of assuming the defaults.
type Addrs struct {
	AccountsGRPC     string `json:"accountsGrpc"`
	VerificationGRPC string `json:"verificationGrpc"`
	ConnectGRPC      string `json:"connectGrpc"`
	GatewayHTTP      string `json:"gatewayHttp"`
	// DemoHTTP is the demo site's (make run only; empty from a run before it existed).
	DemoHTTP string `json:"demoHttp,omitempty"`
	// CAMARAHTTP is verification's CAMARA facade, which the gateway proxies its OAuth2 and
	// CAMARA paths to (make run only; empty from a run before it was recorded).
	CAMARAHTTP string `json:"camaraHttp,omitempty"`
}

// WriteAddrs records a's addresses in dir, replacing the ones of an earlier run. The file is
// written whole then renamed, so a reader never sees half of it.
func WriteAddrs(dir string, a Addrs) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, addrsFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("record the addresses: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, addrsFile)); err != nil {
		return fmt.Errorf("record the addresses: %w", err)
	}
	return nil
}

// ErrNoState is returned when there is no state folder of a local setup to read.
var ErrNoState = errors.New("no local state")

// FindAddrs reads the addresses recorded by the latest local run (see FindDir); ErrNoState when
// none is recorded.
func FindAddrs() (Addrs, error) {
	p, err := find(addrsFile)
	if err != nil {
		return Addrs{}, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Addrs{}, err
	}
	var a Addrs
	if err := json.Unmarshal(b, &a); err != nil {
		return Addrs{}, fmt.Errorf("%s: %w", p, err)
	}
	return a, nil
}

// find is the path of rel in the state folder: StateDirVar's when set, else the .mnv of the
// working directory or the nearest directory above it. ErrNoState when it is not there.
func find(rel string) (string, error) {
	if dir := os.Getenv(StateDirVar); dir != "" {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s does not exist", ErrNoState, p)
		} else if err != nil {
			return "", err
		}
		return p, nil
	}
	p, err := findup.Path(filepath.Join(DefaultDir, rel))
	if errors.Is(err, findup.ErrNotFound) {
		return "", fmt.Errorf("%w: %s in the working directory or above it", ErrNoState, filepath.Join(DefaultDir, rel))
	}
	return p, err
}
