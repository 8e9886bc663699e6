package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// profiled are the processes whose CPU profiles -pprof writes, beside the generator's own.
var profiled = []string{"gateway", "accounts", "verification", "connect"}

// profileAll is a Config.Profile that writes a CPU profile of each process serving pprof at
// debug (name → address) over the observed round, as dir/<variant>/<process>.pprof.
func profileAll(debug map[string]string, dir string, progress io.Writer) func(ctx context.Context, variant string, d time.Duration) func() {
	return func(ctx context.Context, variant string, d time.Duration) func() {
		var wg sync.WaitGroup
		sub := filepath.Join(dir, slug(variant))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			fmt.Fprintf(progress, "  profiles: %v\n", err)
			return wg.Wait
		}
		secs := max(1, int(d.Seconds()))
		wg.Go(func() {
			if err := profileSelf(ctx, filepath.Join(sub, "gen.pprof"), time.Duration(secs)*time.Second); err != nil {
				fmt.Fprintf(progress, "  profile of the generator: %v\n", err)
			}
		})
		for _, name := range profiled {
			path := filepath.Join(sub, name+".pprof")
			wg.Go(func() {
				if err := fetchProfile(ctx, debug[name], path, secs); err != nil {
					fmt.Fprintf(progress, "  profile of %s: %v\n", name, err)
				}
			})
		}
		return func() {
			wg.Wait()
			fmt.Fprintf(progress, "  CPU profiles of %s: %s/*.pprof (go tool pprof -top FILE)\n", variant, sub)
		}
	}
}

// profileSelf writes this process's CPU profile (the load generator's) over d into path, beside
// the services', so the cost of the instrument shows too.
func profileSelf(ctx context.Context, path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	pprof.StopCPUProfile()
	return f.Close()
}

// slug is a variant's name as a folder name: lower case, words joined by dashes.
func slug(name string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	}), "-")
}
