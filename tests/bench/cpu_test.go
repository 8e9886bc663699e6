package main

import (
	"io"
	"math"
	"net"
	"runtime"
	"testing"
	"time"
)

func TestProcCounter(t *testing.T) {
	const snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm ActiveOpens OutSegs RetransSegs\nTcp: 1 42 123456 7\nUdp: InDatagrams OutSegs\nUdp: 5 9\n"
	const stat = "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 99 1 2\nctxt 314159\nbtime 1700000000\n"
	for _, tc := range []struct {
		name, text, prefix, counter string
		want                        float64
	}{
		{"a header line then its values", snmp, "Tcp:", "OutSegs", 123456},
		{"the same name under another prefix is not read", snmp, "Udp:", "OutSegs", 9},
		{"a counter named by its own line", stat, "ctxt", "ctxt", 314159},
		{"no such counter", snmp, "Tcp:", "InSegs", 0},
		{"no such line", stat, "processes", "processes", 0},
		{"nothing to read", "", "Tcp:", "OutSegs", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := procCounter([]byte(tc.text), tc.prefix, tc.counter); got != tc.want {
				t.Errorf("procCounter(%q, %q) = %v, want %v", tc.prefix, tc.counter, got, tc.want)
			}
		})
	}
}

func TestSampleCPUCountsMessages(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	before := sampleCPU()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	for range 10 {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	d := sampleCPU().sub(before)
	// 10 round trips send at least 20 segments. The process's context switches move too, but
	// not once per round trip: Go's scheduler may find the answer ready without sleeping (9 of
	// 10 once in .ci/run), so only that they are counted is held.
	if d.Segments < 20 || d.Switches < 1 {
		t.Fatalf("over 10 loopback round trips sampleCPU counted %v segments and %v context switches", d.Segments, d.Switches)
	}
}

func TestBusy(t *testing.T) {
	cpus := float64(runtime.NumCPU())
	for _, tc := range []struct {
		name string
		r    Result
		want float64
	}{
		{"every CPU busy", Result{Elapsed: time.Second, CPU: CPU{Machine: time.Duration(cpus) * time.Second}}, 1},
		{"half of them", Result{Elapsed: 2 * time.Second, CPU: CPU{Machine: time.Duration(cpus) * time.Second}}, 0.5},
		{"a run that took no time", Result{CPU: CPU{Machine: time.Second}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Busy(); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Busy() = %v, want %v", got, tc.want)
			}
		})
	}
}
