package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// procMem reads the resident set (VmRSS) and its high-water mark since the process started
// (VmHWM) of pid from /proc/<pid>/status, in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "VmRSS:	   12345 kB"
		name, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		*dst = kb << 10
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS or VmHWM", pid)
	}
	return rss, hwm, nil
}

// rssWatch samples a process's VmRSS at a fixed interval and keeps the largest sample.
type rssWatch struct {
	pid     int
	stop    chan struct{}
	done    sync.WaitGroup
	stopped sync.Once

	mu      sync.Mutex
	peak    int64
	last    int64
	samples int
	err     error
}

// watchRSS starts sampling pid every interval (and once at once).
func watchRSS(pid int, every time.Duration) *rssWatch {
	w := &rssWatch{pid: pid, stop: make(chan struct{})}
	w.sample()
	w.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample()
			}
		}
	})
	return w
}

func (w *rssWatch) sample() {
	rss, _, err := procMem(w.pid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	w.peak, w.last = max(w.peak, rss), rss
	w.samples++
}

// Current is the latest sample, in bytes.
func (w *rssWatch) Current() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Stop ends the sampling (after one last sample, the first time it is called) and returns the
// largest sample, in bytes, and how many there were; an error when a sample could not be read.
func (w *rssWatch) Stop() (peak int64, samples int, err error) {
	w.stopped.Do(func() {
		close(w.stop)
		w.done.Wait()
		w.sample()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak, w.samples, w.err
}

// mb is bytes in MB (10^6 bytes).
func mb(b int64) float64 { return float64(b) / 1e6 }
