package lifecycle_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/lifecycle"
)

func TestCloserRunsLastFirst(t *testing.T) {
	var (
		mu  sync.Mutex
		ran []string
	)
	record := func(name string) func() {
		return func() { mu.Lock(); defer mu.Unlock(); ran = append(ran, name) }
	}
	var c lifecycle.Closer
	c.AddFunc("pool", record("pool"))
	c.Add("client", func() error { record("client")(); return nil })
	c.AddFunc("server", record("server"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, " "); got != "server client pool" {
		t.Fatalf("ran %q, want the reverse of the order of adding", got)
	}
	ran = nil
	if err := c.Close(); err != nil || len(ran) != 0 {
		t.Fatalf("second Close ran %q (err %v), want nothing", ran, err)
	}
	c.AddFunc("later", record("later"))
	if err := c.Close(); err != nil || strings.Join(ran, " ") != "later" {
		t.Fatalf("Close after a new Add ran %q (err %v), want the new cleanup", ran, err)
	}
}

func TestCloserJoinsErrors(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	var c lifecycle.Closer
	c.Add("a", func() error { return errA })
	ranAfterFailure := false
	c.AddFunc("between", func() { ranAfterFailure = true })
	c.Add("b", func() error { return errB })
	err := c.Close()
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Fatalf("Close = %v, want both errors", err)
	}
	if !strings.Contains(err.Error(), "close a: a failed") || !strings.Contains(err.Error(), "close b: b failed") {
		t.Errorf("Close = %q, want each error named by its cleanup", err)
	}
	if !ranAfterFailure {
		t.Error("a failed cleanup stopped the ones after it")
	}
}

func TestCloserTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := lifecycle.Closer{Timeout: 50 * time.Millisecond}
	earlierRan := false
	c.AddFunc("pool", func() { earlierRan = true })
	c.AddFunc("client", func() {})
	c.AddFunc("stuck server", func() { <-release })
	start := time.Now()
	err := c.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s with a 50ms timeout", took)
	}
	if err == nil || !strings.Contains(err.Error(), "close stuck server: still running after 50ms; not closed: client, pool") {
		t.Fatalf("Close = %v, want the stuck cleanup and the ones left named", err)
	}
	if earlierRan {
		t.Error("a cleanup ran while a later one was still running")
	}
}

func TestCloseOnError(t *testing.T) {
	closeErr := errors.New("close failed")
	tests := []struct {
		name       string
		err        error
		wantClosed bool
	}{
		{"success keeps what was opened", nil, false},
		{"failure closes it", errors.New("listen failed"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := false
			build := func() (err error) {
				var c lifecycle.Closer
				defer c.CloseOnError(&err)
				c.Add("pool", func() error { closed = true; return closeErr })
				return tt.err
			}
			err := build()
			if closed != tt.wantClosed {
				t.Fatalf("closed = %v, want %v", closed, tt.wantClosed)
			}
			if tt.err == nil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.err) || !errors.Is(err, closeErr) {
				t.Fatalf("err = %v, want the failure joined with the close error", err)
			}
		})
	}
}
