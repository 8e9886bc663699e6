package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/tests/harness"
)

// Benchmark E, webhooks: -webhook-events ping events (POST /v1/api/me/webhooks/{id}/test, the
// one event a client can make at will) over -webhook-endpoints clients, one endpoint each, sent
// by -c workers as fast as the API takes them, delivered to a receiver in this process that
// checks each Standard Webhooks signature (its own Go code, not connect's) and acknowledges.
// Delivered events/s runs from the first ping sent to the last distinct event received; the
// lag of an event runs from its createdAt (connect's clock, the same machine) to its arrival.
// The rate the pings were answered is shown beside it: when delivery keeps up with it, the lag
// is the lag at that rate, which is what the issue asks for next to Connect's delivery (D).

const webhookTimeLayout = "2006-01-02T15:04:05.000Z"

// WebhookReport is benchmark E.
type WebhookReport struct {
	Delivered Bulk
	P50, P99  time.Duration
	// PacedRate, PacedP50 and PacedP99: the lag of pings sent at half the delivered rate, open
	// loop, where no queue builds up: the lag of delivery itself.
	PacedRate          float64
	PacedP50, PacedP99 time.Duration
	PacedN, PacedGot   int
	Checks             []Check
}

// hookReceiver acknowledges deliveries after checking their signature, keeping the first
// arrival of each event id.
type hookReceiver struct {
	keys map[string][]byte // receiver path -> HMAC key of that endpoint

	mu       sync.Mutex
	arrived  map[string]time.Time // event id -> first arrival
	lag      []time.Duration
	calls    int64
	dups     int64
	badSig   int64
	firstErr string
	want     int
	done     chan struct{}
	lastAt   time.Time
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	now := time.Now()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	id := r.Header.Get("webhook-id")
	if err := verifyStandard(h.keys[r.URL.Path], id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body, now); err != nil {
		h.badSig++
		if h.firstErr == "" {
			h.firstErr = err.Error()
		}
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev struct {
		ID        string `json:"id"`
		CreatedAt string `json:"createdAt"`
	}
	err = json.Unmarshal(body, &ev)
	created, perr := time.Parse(webhookTimeLayout, ev.CreatedAt)
	if err != nil || perr != nil || ev.ID != id {
		h.badSig++
		if h.firstErr == "" {
			h.firstErr = fmt.Sprintf("body %.200s: event id %q under webhook-id %q (%v, %v)", body, ev.ID, id, err, perr)
		}
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if _, seen := h.arrived[id]; seen {
		h.dups++
	} else {
		h.arrived[id] = now
		h.lag = append(h.lag, now.Sub(created))
		h.lastAt = now
		if len(h.arrived) == h.want {
			close(h.done)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// verifyStandard checks a Standard Webhooks signature: one of the space-separated "v1,<base64>"
// is the HMAC-SHA256 with key of "id.timestamp.body", and the timestamp is within 5 minutes.
func verifyStandard(key []byte, id, ts, header string, body []byte, now time.Time) error {
	if len(key) == 0 {
		return fmt.Errorf("no key for this path")
	}
	if id == "" || ts == "" || header == "" {
		return fmt.Errorf("missing webhook-id, -timestamp or -signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s away", d)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(header) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no matching v1 signature in %q", header)
}

// benchWebhooks is benchmark E.
func benchWebhooks(ctx context.Context, s *harness.Suite, cfg Config, events, endpoints int, progress io.Writer) (WebhookReport, error) {
	var rep WebhookReport
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	admin, err := dialAdmin(s)
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	clients, err := createClients(ctx, accountsv1.NewAccountsAdminServiceClient(admin), endpoints, true)
	if err != nil {
		return rep, err
	}
	hc, closeHTTP := newHTTPClient(cfg.Workers)
	defer closeHTTP()

	rc := &hookReceiver{keys: map[string][]byte{}, arrived: map[string]time.Time{}, want: events, done: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ids := make([]string, endpoints)
	for i, c := range clients {
		path := fmt.Sprintf("/hooks/%d", i)
		body, _ := json.Marshal(map[string]any{"url": srv.URL + path, "events": []string{"*"}, "description": "bench receiver"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.GatewayURL+"/v1/api/me/webhooks", strings.NewReader(string(body)))
		if err != nil {
			return rep, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-KEY", c.APIKey)
		raw, err := doJSON(hc, req, http.StatusOK)
		if err != nil {
			return rep, fmt.Errorf("create endpoint: %w", err)
		}
		var ep struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		}
		if err := decodeData(raw, &ep); err != nil || ep.ID == "" {
			return rep, fmt.Errorf("create endpoint: no id in %.200s", raw)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ep.Secret, "whsec_"))
		if err != nil || !strings.HasPrefix(ep.Secret, "whsec_") {
			return rep, fmt.Errorf("endpoint secret is not whsec_<base64>")
		}
		rc.mu.Lock()
		rc.keys[path] = key
		rc.mu.Unlock()
		ids[i] = ep.ID
	}

	fmt.Fprintf(progress, "  %d pings over %d endpoints, %d senders\n", events, endpoints, cfg.Workers)
	cpu0, t0 := sampleCPU(), time.Now()
	var next, failed atomic.Int64
	var sentDone time.Time
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(events) || ctx.Err() != nil {
					return
				}
				k := int(i) % endpoints
				cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				_, err := restCall(cctx, hc, http.MethodPost, s.GatewayURL+"/v1/api/me/webhooks/"+ids[k]+"/test", "", "X-API-KEY", clients[k].APIKey)
				cancel()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	sentDone = time.Now()
	sentOK := int64(events) - failed.Load()
	rc.mu.Lock()
	if sentOK < int64(events) {
		// Only the answered pings can be waited for.
		rc.want = int(sentOK)
		if len(rc.arrived) >= rc.want {
			select {
			case <-rc.done:
			default:
				close(rc.done)
			}
		}
	}
	rc.mu.Unlock()
	fmt.Fprintf(progress, "  pings answered in %s (%.1f/s), %d failed; waiting for the deliveries\n",
		sentDone.Sub(t0).Round(time.Millisecond), float64(sentOK)/sentDone.Sub(t0).Seconds(), failed.Load())

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastMoved := 0, time.Now()
wait:
	for {
		select {
		case <-rc.done:
			break wait
		case <-ctx.Done():
			break wait
		case now := <-tick.C:
			rc.mu.Lock()
			n := len(rc.arrived)
			rc.mu.Unlock()
			if n != last {
				last, lastMoved = n, now
			} else if now.Sub(lastMoved) > stallTimeout {
				break wait
			}
		}
	}
	cpu := sampleCPU().sub(cpu0)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := len(rc.arrived)
	elapsed := rc.lastAt.Sub(t0)
	if got == 0 {
		elapsed = time.Since(t0)
	}
	lags := append([]time.Duration(nil), rc.lag...)
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	pct := func(p float64) time.Duration {
		if len(lags) == 0 {
			return 0
		}
		return lags[min(len(lags)-1, int(p/100*float64(len(lags))))]
	}
	rep.P50, rep.P99 = pct(50), pct(99)
	rep.Delivered = Bulk{
		Name: fmt.Sprintf("E webhooks (ping, %d endpoints)", endpoints), Unit: "events", N: int64(got), Elapsed: elapsed,
		Errors: failed.Load() + rc.badSig, CPU: cpu,
		Detail: fmt.Sprintf("lag createdAt→received p50 %s p99 %s; pings answered at %.1f/s in %s (%d failed); %d requests, %d repeated, %d refused (bad signature or body)",
			ms(rep.P50), ms(rep.P99), float64(sentOK)/sentDone.Sub(t0).Seconds(), sentDone.Sub(t0).Round(time.Millisecond),
			failed.Load(), rc.calls, rc.dups, rc.badSig),
	}
	c := Check{Name: "E webhooks delivered", OK: got == events && rc.badSig == 0 && failed.Load() == 0}
	c.Text = fmt.Sprintf("%d distinct events of %d pings received; %d failed pings; %d deliveries refused", got, events, failed.Load(), rc.badSig)
	if e, _ := firstErr.Load().(string); e != "" {
		c.Text += "; first ping error: " + e
	}
	if rc.firstErr != "" {
		c.Text += "; first refusal: " + rc.firstErr
	}
	rep.Checks = append(rep.Checks, c)
	fmt.Fprintf(progress, "  %d events in %s (%.1f events/s), lag p50 %s p99 %s\n", got, elapsed.Round(time.Millisecond), rep.Delivered.Rate(), ms(rep.P50), ms(rep.P99))
	if got == 0 {
		return rep, nil
	}

	// The lag above is mostly queueing: the pings came faster than delivery. Send pings at half
	// the delivered rate, paced, for up to 10 s, and take the lag of those alone.
	rep.PacedRate = rep.Delivered.Rate() / 2
	rep.PacedN = max(1, min(events/2, int(rep.PacedRate*10)))
	rc.lag, rc.want, rc.done = nil, len(rc.arrived)+rep.PacedN, make(chan struct{})
	rc.mu.Unlock()
	fmt.Fprintf(progress, "  %d pings paced at %.1f/s\n", rep.PacedN, rep.PacedRate)
	pace := time.NewTicker(time.Duration(float64(time.Second) / rep.PacedRate))
	var pwg sync.WaitGroup
	for i := range rep.PacedN {
		<-pace.C
		pwg.Add(1)
		go func(k int) {
			defer pwg.Done()
			cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			if _, err := restCall(cctx, hc, http.MethodPost, s.GatewayURL+"/v1/api/me/webhooks/"+ids[k]+"/test", "", "X-API-KEY", clients[k].APIKey); err != nil {
				failed.Add(1)
			}
		}(i % endpoints)
	}
	pace.Stop()
	pwg.Wait()
	select {
	case <-rc.done:
	case <-time.After(stallTimeout):
	case <-ctx.Done():
	}
	rc.mu.Lock()
	lags = append(lags[:0], rc.lag...)
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	rep.PacedGot = len(lags)
	rep.PacedP50, rep.PacedP99 = pct(50), pct(99)
	rep.Delivered.Detail += fmt.Sprintf("; paced at %.1f/s: %d of %d delivered, lag p50 %s p99 %s",
		rep.PacedRate, rep.PacedGot, rep.PacedN, ms(rep.PacedP50), ms(rep.PacedP99))
	fmt.Fprintf(progress, "  paced at %.1f/s: %d of %d delivered, lag p50 %s p99 %s\n", rep.PacedRate, rep.PacedGot, rep.PacedN, ms(rep.PacedP50), ms(rep.PacedP99))
	return rep, nil
}
