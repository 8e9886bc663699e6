// Package principals fans the changes that make cached principals stale out to the
// WatchPrincipals streams of this replica. The changes come from the database (a NOTIFY in the
// transaction of each change, pg.Listener), so a change committed through any replica reaches
// the streams of all. A stream is only as good as the LISTEN behind it: when that is lost, every
// stream ends, and none starts until it is back.
package principals

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind of a change.
type Kind int

// Kinds. Started and Heartbeat are the stream's own; the others name what changed.
const (
	Started Kind = iota + 1
	Heartbeat
	ClientChanged
	APIKeyChanged
	SDKTokenChanged
)

// Change is one message of a stream.
type Change struct {
	Kind         Kind
	ClientID     string
	CredentialID string
}

// Channel is the database channel the changes are notified on: the store sends a notice
// (pg_notify) in the transaction of each change, so it is delivered when, and only if, the
// change commits.
const Channel = "mnv_accounts_principals"

// ClientNotice, APIKeyNotice and SDKTokenNotice are the payloads of the notices on Channel,
// "<kind>:<client>[:<credential>]", the form parse reads (and the triggers of migration 006
// sent, so replicas of either version understand each other).
func ClientNotice(clientID string) string { return "client:" + clientID }

// APIKeyNotice is the payload of a change of an API key.
func APIKeyNotice(clientID, keyID string) string { return "api_key:" + clientID + ":" + keyID }

// SDKTokenNotice is the payload of a change of an SDK token.
func SDKTokenNotice(clientID, tokenID string) string {
	return "sdk_token:" + clientID + ":" + tokenID
}

// ErrNotListening refuses a stream while the replica does not listen to the database.
var ErrNotListening = errors.New("principal changes are not being received from the database")

// queueDepth bounds what a stream may fall behind; one that falls further is ended, and its
// caller starts again with an empty cache.
const queueDepth = 256

// Hub is the replica's fan-out. It implements pg.ListenHandler.
type Hub struct {
	mu        sync.Mutex
	listening bool
	// up is closed while the replica listens, and replaced by an open one when it stops.
	up   chan struct{}
	subs map[*Sub]struct{}

	watchers  prometheus.Gauge
	listenUp  prometheus.Gauge
	delivered prometheus.Counter
}

// Sub is one stream's subscription.
type Sub struct {
	// C carries the changes; it is closed when the stream must end (the LISTEN was lost, the
	// stream fell behind, or the hub stopped).
	C chan Change
}

// NewHub returns a Hub whose metrics go to reg (nil for none).
func NewHub(reg prometheus.Registerer) (*Hub, error) {
	h := &Hub{
		up:   make(chan struct{}),
		subs: map[*Sub]struct{}{},
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mnv_accounts_principal_watchers", Help: "WatchPrincipals streams open on this replica.",
		}),
		listenUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mnv_accounts_principal_listen_up", Help: "1 while this replica LISTENs for principal changes (streams may start), else 0.",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mnv_accounts_principal_changes_total", Help: "Principal changes received from the database.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{h.watchers, h.listenUp, h.delivered} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

// Subscribe opens a stream's subscription; every change delivered after it returns is in C.
// It is refused while the replica does not listen.
func (h *Hub) Subscribe() (*Sub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.listening {
		return nil, ErrNotListening
	}
	s := &Sub{C: make(chan Change, queueDepth)}
	h.subs[s] = struct{}{}
	h.watchers.Set(float64(len(h.subs)))
	return s, nil
}

// Unsubscribe ends s (idempotent).
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(s)
}

func (h *Hub) drop(s *Sub) {
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.C)
		h.watchers.Set(float64(len(h.subs)))
	}
}

// WaitListening waits up to d, or until ctx ends, for the replica to listen, and tells whether
// it does. A replica serves a moment before its LISTEN is up, and the services that start beside
// it open their streams at once: a stream that waits that moment starts, where a refusal would
// have been logged as a fault on both sides.
func (h *Hub) WaitListening(ctx context.Context, d time.Duration) bool {
	h.mu.Lock()
	up := h.up
	h.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-up:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Up implements pg.ListenHandler: streams may start.
func (h *Hub) Up() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.listening {
		close(h.up)
	}
	h.listening = true
	h.listenUp.Set(1)
}

// Down implements pg.ListenHandler: every stream ends, since what is committed from now on
// until the next Up will never be told.
func (h *Hub) Down() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listening {
		h.up = make(chan struct{})
	}
	h.listening = false
	h.listenUp.Set(0)
	for s := range h.subs {
		h.drop(s)
	}
}

// Beat implements pg.ListenHandler.
func (h *Hub) Beat() { h.send(Change{Kind: Heartbeat}) }

// Notify implements pg.ListenHandler. A payload it cannot read stales every principal: the
// streams end, and their callers start over.
func (h *Hub) Notify(payload string) {
	h.delivered.Inc()
	c, ok := parse(payload)
	if !ok {
		h.mu.Lock()
		for s := range h.subs {
			h.drop(s)
		}
		h.mu.Unlock()
		return
	}
	h.send(c)
}

func (h *Hub) send(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.C <- c:
		default:
			// Fallen behind: ending it is the only way its caller learns it missed changes.
			h.drop(s)
		}
	}
}

// parse reads "<kind>:<client>[:<credential>]" (ClientNotice, APIKeyNotice, SDKTokenNotice).
func parse(payload string) (Change, bool) {
	parts := strings.Split(payload, ":")
	if len(parts) < 2 || parts[1] == "" {
		return Change{}, false
	}
	c := Change{ClientID: parts[1]}
	switch {
	case parts[0] == "client" && len(parts) == 2:
		c.Kind = ClientChanged
	case parts[0] == "api_key" && len(parts) == 3:
		c.Kind, c.CredentialID = APIKeyChanged, parts[2]
	case parts[0] == "sdk_token" && len(parts) == 3:
		c.Kind, c.CredentialID = SDKTokenChanged, parts[2]
	default:
		return Change{}, false
	}
	return c, true
}
