package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is CPU time (user+system) by who spent it, so a result can say where a request's cost
// went on a machine the load generator shares with everything it measures.
type CPU struct {
	Gen          time.Duration // this process, the load generator
	Gateway      time.Duration // the gateway, a child of this process
	Accounts     time.Duration // accounts, a child of this process
	Verification time.Duration // verification, a child of this process
	Connect      time.Duration // connect, a child of this process
	Machine      time.Duration // every CPU of the machine (from /proc/stat)

	// Segments (TCP segments sent, loopback included: HTTP, gRPC and PostgreSQL alike) and
	// Switches (context switches) are counted over the whole machine. Unlike CPU time they do
	// not move with the speed of a shared machine, so they tell whether a change removed
	// messages and wake-ups, which is what a request costs most when the load is thin.
	Segments float64
	Switches float64
}

// Other is what the rest of the machine spent: PostgreSQL, and any other tenant.
func (c CPU) Other() time.Duration {
	return max(0, c.Machine-c.Gen-c.Gateway-c.Accounts-c.Verification-c.Connect)
}

func (c CPU) sub(o CPU) CPU {
	return CPU{c.Gen - o.Gen, c.Gateway - o.Gateway, c.Accounts - o.Accounts, c.Verification - o.Verification,
		c.Connect - o.Connect, c.Machine - o.Machine, c.Segments - o.Segments, c.Switches - o.Switches}
}

func (c CPU) add(o CPU) CPU {
	return CPU{c.Gen + o.Gen, c.Gateway + o.Gateway, c.Accounts + o.Accounts, c.Verification + o.Verification,
		c.Connect + o.Connect, c.Machine + o.Machine, c.Segments + o.Segments, c.Switches + o.Switches}
}

func (c CPU) per(n int) CPU {
	if n <= 0 {
		return CPU{}
	}
	d := time.Duration(n)
	return CPU{c.Gen / d, c.Gateway / d, c.Accounts / d, c.Verification / d, c.Connect / d, c.Machine / d,
		c.Segments / float64(n), c.Switches / float64(n)}
}

// userHZ is the unit of the times in /proc (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

func ticks(t uint64) time.Duration { return time.Duration(t) * time.Second / userHZ }

// sampleCPU reads the CPU counters now. Where /proc is missing the services and the machine
// read as zero.
func sampleCPU() CPU {
	var c CPU
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.Gen = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		c.Switches = procCounter(rest, "ctxt", "ctxt")
		f := strings.Fields(string(line))
		// cpu user nice system idle iowait irq softirq steal ...: busy is all but idle,
		// iowait and steal.
		for i, v := range f {
			if i == 0 || i == 4 || i == 5 || i >= 8 {
				continue
			}
			n, _ := strconv.ParseUint(v, 10, 64)
			c.Machine += ticks(n)
		}
	}
	if b, err := os.ReadFile("/proc/net/snmp"); err == nil {
		c.Segments = procCounter(b, "Tcp:", "OutSegs")
	}
	children(func(_ int, comm string, stat []string) {
		// After the command: state ppid ... utime (12th) stime (13th).
		if len(stat) < 13 {
			return
		}
		u, _ := strconv.ParseUint(stat[11], 10, 64)
		s, _ := strconv.ParseUint(stat[12], 10, 64)
		switch comm {
		case "gateway":
			c.Gateway += ticks(u + s)
		case "accounts":
			c.Accounts += ticks(u + s)
		case "verification":
			c.Verification += ticks(u + s)
		case "connect":
			c.Connect += ticks(u + s)
		}
	})
	return c
}

// procCounter reads one counter of a /proc text file: the line starting with prefix whose
// field is named name, either by the line itself (/proc/stat: "ctxt 123") or by the header line
// with the same prefix just before it (/proc/net/snmp: "Tcp: ... OutSegs ..." then the values).
// A counter it cannot find is 0.
func procCounter(b []byte, prefix, name string) float64 {
	var header []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != prefix {
			continue
		}
		if f[0] == name {
			n, _ := strconv.ParseFloat(f[1], 64)
			return n
		}
		if header == nil {
			header = f
			continue
		}
		for i, h := range header {
			if h == name && i < len(f) {
				n, _ := strconv.ParseFloat(f[i], 64)
				return n
			}
		}
		return 0
	}
	return 0
}

// children calls f with the pid, command name and the fields of /proc/<pid>/stat after the
// command (state, ppid, ...) of every child of this process: the services of the suite.
func children(f func(pid int, comm string, stat []string)) {
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(b[end+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		f(pid, string(b[open+1:end]), fields)
	}
}
