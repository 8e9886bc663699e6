package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFollowRedirects runs the device's part of an authorization against real HTTP servers: an
// "operator" that redirects, relatively and to another host, only when the line's header is on
// the request, and a "callback" host that must never be opened.
func TestFollowRedirects(t *testing.T) {
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cb" {
			t.Errorf("the callback was opened: %s", r.URL)
		}
		http.NotFound(w, r)
	}))
	defer callback.Close()
	until := callback.URL + "/cb"
	op := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Line") != "+971520000001" {
			http.Error(w, "not on the mobile network", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/start":
			http.Redirect(w, r, "/hop?n=1", http.StatusFound) // relative
		case "/hop":
			http.Redirect(w, r, until+"?code=abc&state=s", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/near":
			http.Redirect(w, r, until+"x?code=abc", http.StatusFound) // not the callback's path
		case "/moved":
			http.Redirect(w, r, until, http.StatusMovedPermanently)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer op.Close()
	device := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	tests := []struct {
		name, path string
		header     []string
		wantCode   string // "" for an error
		wantErr    string
	}{
		{"two hops, one relative", "/start", []string{"X-Line", "+971520000001"}, "abc", ""},
		{"one hop", "/hop", []string{"X-Line", "+971520000001"}, "abc", ""},
		{"the header missing", "/start", nil, "", "HTTP 403"},
		{"no redirect", "/page", []string{"X-Line", "+971520000001"}, "", "HTTP 200"},
		{"a 301 is not the flow's redirect", "/moved", []string{"X-Line", "+971520000001"}, "", "HTTP 301"},
		{"a loop", "/loop", []string{"X-Line", "+971520000001"}, "", "within 4 hops"},
		{"a path that only starts like the callback's", "/near", []string{"X-Line", "+971520000001"}, "", "HTTP 404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := followRedirects(context.Background(), device, op.URL+tt.path, until, tt.header...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("followRedirects = %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Query().Get("code") != tt.wantCode || !strings.HasPrefix(got.String(), until+"?") {
				t.Fatalf("followRedirects = %s, want %s?code=%s…", got, until, tt.wantCode)
			}
		})
	}
}

// TestRunFlows: one worker interleaves the flows one at a time with each flow's own sequence
// numbers; several workers run n of each; errors are counted apart from the latencies, which
// come out sorted, and the whole flow is never shorter than its verify.
func TestRunFlows(t *testing.T) {
	tests := []struct {
		name       string
		workers, n int
	}{
		{"sequential", 1, 5},
		{"concurrent", 4, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var order []string
			seen := map[string][]int{}
			mk := func(name string, fail func(i int) bool) flow {
				return flow{name: name, run: func(ctx context.Context, i int) (time.Duration, error) {
					mu.Lock()
					order = append(order, name)
					seen[name] = append(seen[name], i)
					mu.Unlock()
					time.Sleep(time.Duration(1+i%3) * time.Millisecond)
					if fail(i) {
						return 0, fmt.Errorf("%s %d failed", name, i)
					}
					return time.Duration(i%3) * time.Millisecond, nil
				}}
			}
			never := func(int) bool { return false }
			odd := func(i int) bool { return i%2 == 1 }
			got := runFlows(context.Background(), tt.workers, tt.n, time.Second, mk("a", never), mk("b", odd))

			if tt.workers == 1 {
				want := slices.Repeat([]string{"a", "b"}, tt.n)
				if !slices.Equal(order, want) {
					t.Fatalf("order %v, want %v", order, want)
				}
			}
			for name, is := range seen {
				slices.Sort(is)
				if want := seqTo(tt.n); !slices.Equal(is, want) {
					t.Errorf("%s ran with %v, want %v", name, is, want)
				}
			}
			wantErrs := tt.n / 2
			if got[0].Name != "a" || got[0].OK() != tt.n || got[0].Errors != 0 || got[0].FirstErr != nil {
				t.Errorf("a: %s ok %d errors %d (%v)", got[0].Name, got[0].OK(), got[0].Errors, got[0].FirstErr)
			}
			if got[1].Name != "b" || got[1].OK() != tt.n-wantErrs || got[1].Errors != wantErrs || got[1].FirstErr == nil {
				t.Errorf("b: %s ok %d errors %d (%v)", got[1].Name, got[1].OK(), got[1].Errors, got[1].FirstErr)
			}
			for _, r := range got {
				if r.Alone || r.Elapsed <= 0 {
					t.Errorf("%s: alone %v elapsed %s", r.Name, r.Alone, r.Elapsed)
				}
				if !slices.IsSorted(r.Verify) || !slices.IsSorted(r.Flow) || len(r.Verify) != len(r.Flow) {
					t.Errorf("%s: latencies not sorted or not paired", r.Name)
				}
				if r.OK() > 0 && r.Flow[len(r.Flow)-1] < r.Verify[len(r.Verify)-1] {
					t.Errorf("%s: a flow shorter than its verify", r.Name)
				}
			}
		})
	}
	t.Run("alone", func(t *testing.T) {
		got := runFlows(context.Background(), 2, 3, time.Second, flow{"x", func(context.Context, int) (time.Duration, error) { return 0, nil }})
		if len(got) != 1 || !got[0].Alone || got[0].OK() != 3 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("each flow bounded by the timeout", func(t *testing.T) {
		got := runFlows(context.Background(), 1, 2, 20*time.Millisecond, flow{"slow", func(ctx context.Context, _ int) (time.Duration, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}})
		if got[0].Errors != 2 || !errors.Is(got[0].FirstErr, context.DeadlineExceeded) {
			t.Fatalf("%+v", got[0])
		}
	})
}

func seqTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestAddedLatency(t *testing.T) {
	msList := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	base := FlowResult{Verify: msList(1, 2, 3, 4, 10), Flow: msList(2, 4, 6, 8, 20)}
	over := FlowResult{Verify: msList(2, 3, 4, 5, 30), Flow: msList(5, 7, 9, 11, 13)}
	got := addedLatency("x", base, over)
	want := AddedLatency{Name: "x", VerifyP50: time.Millisecond, VerifyP99: 20 * time.Millisecond, FlowP50: 3 * time.Millisecond, FlowP99: -7 * time.Millisecond}
	if got != want {
		t.Fatalf("addedLatency = %+v, want %+v", got, want)
	}
	if s := signedMS(want.FlowP99); s != "-7.00ms" {
		t.Errorf("signedMS = %s", s)
	}
}
