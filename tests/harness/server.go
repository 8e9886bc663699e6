package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// Server is a private PostgreSQL cluster of its own, in a temporary folder and on a loopback
// port: a server a service shares with no other (Options.ServerPerService).
type Server struct {
	// URL is the cluster's postgres database, as its superuser.
	URL    string
	dir    string
	script string
}

// StartServer creates and starts a private cluster with deploy/local/pg-private.sh (the one
// copy of the initdb logic, which pg-ensure.sh uses too): small settings, durability off, a
// second or two. Stop removes it. Should this process die before Stop (a test's timeout panics
// past every cleanup), the script's watchdog stops and removes the cluster all the same.
func StartServer(ctx context.Context) (*Server, error) {
	if pgtest.Short() {
		return nil, ErrShort
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// Under the temporary folder itself: as root the script hands the folder to the postgres
	// user, who must be able to reach it (a folder of t.TempDir's is root's alone).
	dir, err := os.MkdirTemp("", "mnv-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, script: filepath.Join(root, "deploy", "local", "pg-private.sh")}
	var errs []error
	// A port checked free may still be taken before the server binds it: try another.
	for range 3 {
		port, err := freeLowPort()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmd := exec.CommandContext(ctx, s.script, "start", dir, strconv.Itoa(port), "--while", strconv.Itoa(os.Getpid()),
			// Three of them beside the suites' shared server on a small machine: 32MB of shared
			// buffers each, and connections for one service's pools (12 here) with room to spare.
			"-c", "shared_buffers=32MB", "-c", "max_connections=60")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			s.URL = strings.TrimSpace(string(out))
			return s, nil
		}
		errs = append(errs, fmt.Errorf("pg-private.sh start on port %d: %w\n%s", port, err, stderr.String()))
		if ctx.Err() != nil {
			break
		}
	}
	s.Stop()
	return nil, errors.Join(errs...)
}

// Stop stops the cluster at once and removes its folder.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	_ = exec.Command(s.script, "stop", s.dir, "--remove").Run()
	os.RemoveAll(s.dir) // should the script have failed: the watchdog then stops the server
	s.dir = ""
}

// StartServers starts n private clusters at once (initdb takes most of a core for a second);
// on failure it stops the ones that started.
func StartServers(ctx context.Context, n int) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = StartServer(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			if s != nil {
				s.Stop()
			}
		}
		return nil, err
	}
	return servers, nil
}

// freeLowPort returns a loopback port below 32768 that was free a moment ago. Not FreeAddr's
// kind: the kernel hands out ports from 32768 up (ip_local_port_range) to every outgoing
// connection, and a suite makes many; one of them could take the port before the server binds
// it. Below that range only a listener asking for the port by number can.
func freeLowPort() (int, error) {
	for range 50 {
		port := 20000 + rand.IntN(32768-20000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port between 20000 and 32767 on 127.0.0.1")
}
