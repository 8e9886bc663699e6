// Package lifecycle releases what a process opened in the reverse order of opening. What is
// opened later may use what was opened before it (a server its pool, a relay its client
// connection), so it is closed first; a constructor that fails halfway closes what it had
// opened by the same rule, with no cleanup written on each of its error paths.
package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds Close when a Closer's Timeout is zero. A process's graceful stop
// (MNV_SHUTDOWN_TIMEOUT, 15s by default) comes before it; the two stay under Kubernetes'
// 30-second grace period.
const DefaultTimeout = 10 * time.Second

// Closer is a stack of cleanups: Close runs the last one added first. The zero value is ready;
// it is safe for concurrent use.
type Closer struct {
	// Timeout bounds Close (DefaultTimeout when zero). A cleanup still running at the deadline
	// is left to finish on its own, and those after it are not run: they may be what it still
	// uses. Close then says which.
	Timeout time.Duration

	mu    sync.Mutex
	stack []cleanup
}

type cleanup struct {
	name  string
	close func() error
}

// Add registers close, named for the errors, to run before every cleanup added earlier.
func (c *Closer) Add(name string, close func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stack = append(c.stack, cleanup{name: name, close: close})
}

// AddFunc is Add for a cleanup that cannot fail, such as pgxpool.Pool.Close.
func (c *Closer) AddFunc(name string, close func()) {
	c.Add(name, func() error { close(); return nil })
}

// Close runs the cleanups, the last added first, and returns their errors joined, each named.
// It empties the Closer: a second Close has nothing to do, and what is added meanwhile waits for
// the next one.
func (c *Closer) Close() error {
	c.mu.Lock()
	stack := c.stack
	c.stack = nil
	timeout := c.Timeout
	c.mu.Unlock()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// Each cleanup runs in its own goroutine so the deadline holds even for one that cannot be
	// interrupted (a pool's Close waits for every connection to come back).
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var errs []error
	for i := len(stack) - 1; i >= 0; i-- {
		done := make(chan error, 1)
		go func() { done <- stack[i].close() }()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", stack[i].name, err))
			}
		case <-deadline.C:
			var left []string
			for j := i - 1; j >= 0; j-- {
				left = append(left, stack[j].name)
			}
			err := fmt.Errorf("close %s: still running after %s", stack[i].name, timeout)
			if len(left) > 0 {
				err = fmt.Errorf("%w; not closed: %s", err, strings.Join(left, ", "))
			}
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}

// CloseOnError closes c when *errp holds an error, and joins what Close returns to it. It is
// for a constructor's deferred call, `defer closer.CloseOnError(&err)`: on success what it
// opened stays open for its owner to close.
func (c *Closer) CloseOnError(errp *error) {
	if *errp != nil {
		*errp = errors.Join(*errp, c.Close())
	}
}
