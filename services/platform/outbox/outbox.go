// Package outbox carries a service's events to connect, which owns the webhook endpoints: Emit
// writes an event's forward job in the transaction of its fact (River, in the service's own
// schema), and a worker publishes it to connect at least once. Connect accepts an event id
// once, so a repeated forward delivers nothing twice.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/groupcommit"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// Queue is the River queue of forward jobs.
const Queue = "events"

// Kind is the forward job's kind.
const Kind = "event.forward"

// Args are the events of one transaction to forward, in the order they were written: one job
// for a fact's events, so a batch of facts (verification's settles, accounts' debits) costs one
// job, not one per event.
type Args struct {
	Events []EventArgs `json:"events"`
}

// EventArgs is one event in a job's JSON, every field spelled out (Event's own JSON is the
// receiver's body, without the client).
type EventArgs struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	ClientID  string    `json:"client_id"`
	CreatedAt time.Time `json:"created_at"`
	// Data is the event's data object as a string: River keeps args as jsonb, which would
	// reorder the object's keys.
	Data string `json:"data"`
}

// UnmarshalJSON also reads the job of one event that versions before multi-event jobs wrote
// (the EventArgs fields at the top level), so that a backlog left by them is still forwarded
// after an upgrade.
func (a *Args) UnmarshalJSON(b []byte) error {
	var multi struct {
		Events []EventArgs `json:"events"`
	}
	if err := json.Unmarshal(b, &multi); err != nil {
		return err
	}
	if multi.Events != nil {
		a.Events = multi.Events
		return nil
	}
	var one EventArgs
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	a.Events = []EventArgs{one}
	return nil
}

// Kind names the job.
func (Args) Kind() string { return Kind }

// InsertOpts: the events queue, and retries for about three days (River's backoff) before a
// forward is discarded, long enough to ride out an outage of connect.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts}
}

// Event is the event a job carries.
func (a EventArgs) Event() events.Event {
	return events.Event{ID: a.ID, Type: a.Type, ClientID: a.ClientID, CreatedAt: a.CreatedAt, Data: json.RawMessage(a.Data)}
}

// Events are the events args carry, in order.
func Events(args []EventArgs) []events.Event {
	out := make([]events.Event, len(args))
	for i, e := range args {
		out[i] = e.Event()
	}
	return out
}

// Outbox writes forward jobs.
type Outbox struct{ q *jobs.Queue }

// New returns the Outbox that writes to q.
func New(q *jobs.Queue) *Outbox { return &Outbox{q: q} }

// Emit writes evs' forward jobs in db's transaction, beside the fact's own statements (a store
// inside pg.Stores.InTx calls it). db must be a transaction: an event written on its own could
// outlive a fact that rolled back, so a pool is refused (pg.ErrNoTx), as is a nil Outbox (a
// store built without one).
func (o *Outbox) Emit(ctx context.Context, db pg.DB, evs ...events.Event) error {
	if o == nil {
		return errors.New("emit events: no outbox")
	}
	if _, ok := db.(pgx.Tx); !ok {
		return fmt.Errorf("emit events: %w", pg.ErrNoTx)
	}
	params, err := Params(evs...)
	if err != nil {
		return err
	}
	return o.q.InsertMany(ctx, db, params)
}

// Params are evs' forward job (none for no event), for a store that inserts it in one
// statement beside jobs of its own (jobs.Queue.InsertMany in the fact's transaction) rather
// than through Emit.
func Params(evs ...events.Event) ([]river.InsertManyParams, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	args := Args{Events: make([]EventArgs, 0, len(evs))}
	for _, e := range evs {
		a, err := argsOf(e)
		if err != nil {
			return nil, err
		}
		args.Events = append(args.Events, a)
	}
	return []river.InsertManyParams{{Args: args}}, nil
}

func argsOf(e events.Event) (EventArgs, error) {
	if e.ID == "" || e.ClientID == "" || e.Type == "" {
		return EventArgs{}, fmt.Errorf("emit: event without id, client or type")
	}
	return EventArgs{ID: e.ID, Type: e.Type, ClientID: e.ClientID, CreatedAt: e.CreatedAt, Data: string(e.Data)}, nil
}

// EventJSON is e as one element of a forward job's events, for a store that builds the job in
// a statement of its own (jobs.Table): {"events": [EventJSON...]} in Kind's row on Queue with
// MaxAttempts is the job Params makes of the same events.
func EventJSON(e events.Event) ([]byte, error) {
	a, err := argsOf(e)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// MaxAttempts is how many times a forward is tried (InsertOpts).
const MaxAttempts = 25

// Publisher takes events to their endpoints: connect's PublishEvents over gRPC
// (NewGRPCPublisher), or connect's own intake in connect.
type Publisher interface {
	Publish(ctx context.Context, evs []events.Event) error
}

// ErrRejected marks a publish the receiver refused for good (a malformed event): retrying
// cannot help, so the job is cancelled rather than retried for days.
var ErrRejected = errors.New("outbox: event rejected")

// Worker forwards the events of a job.
type Worker struct {
	river.WorkerDefaults[Args]
	Publisher Publisher
}

// Work publishes the job's events (Forward).
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return Forward(ctx, w.Publisher, Events(job.Args.Events))
}

// ForwardJSON forwards events in the JSON of a forward job's events (EventJSON), as a job of
// another kind carries them: an event that does not read cancels the job, which retrying
// cannot mend.
func ForwardJSON(ctx context.Context, p Publisher, raw []json.RawMessage) error {
	args := make([]EventArgs, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &args[i]); err != nil {
			return river.JobCancel(fmt.Errorf("event %d of the job: %w", i, err))
		}
	}
	return Forward(ctx, p, Events(args))
}

// Forward publishes the events of a job through p. When p rejects them, they are published one
// by one, so that a malformed event does not take its siblings down with it, and the job is
// cancelled for the rejected ones.
func Forward(ctx context.Context, p Publisher, evs []events.Event) error {
	err := p.Publish(ctx, evs)
	if !errors.Is(err, ErrRejected) {
		return err
	}
	if len(evs) > 1 {
		var rejected []error
		for _, e := range evs {
			switch err := p.Publish(ctx, []events.Event{e}); {
			case errors.Is(err, ErrRejected):
				rejected = append(rejected, err)
			case err != nil:
				return err
			}
		}
		if len(rejected) == 0 {
			return nil // each published on its own
		}
		err = errors.Join(rejected...)
	}
	return river.JobCancel(err)
}

// AttemptTimeout bounds one publish.
const AttemptTimeout = 10 * time.Second

// Timeout bounds one publish.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return AttemptTimeout }

// Register adds the forward worker to workers, and returns the publisher it publishes through,
// for the workers of other jobs that carry events (Forward). The events of the jobs worked at
// the same time reach p in one call (groupcommit.Merge): with n workers a backlog drains up to n
// events a call, not one. A call p rejects is made again job by job, so a malformed event
// cancels its own job only.
func Register(workers *river.Workers, p Publisher) Publisher {
	calls := groupcommit.Merge(groupcommit.Config{Timeout: AttemptTimeout}, p.Publish,
		func(err error) bool { return errors.Is(err, ErrRejected) })
	m := merged{calls}
	river.AddWorker(workers, &Worker{Publisher: m})
	return m
}

// merged is a Publisher whose concurrent calls are merged.
type merged struct {
	calls *groupcommit.Calls[events.Event]
}

func (m merged) Publish(ctx context.Context, evs []events.Event) error { return m.calls.Do(ctx, evs) }

// GRPCPublisher publishes through connect's PublishEvents.
type GRPCPublisher struct {
	c connectv1.ConnectInternalServiceClient
}

// NewGRPCPublisher returns the publisher over conn, a connection to connect carrying this
// service's internal token.
func NewGRPCPublisher(conn grpc.ClientConnInterface) *GRPCPublisher {
	return &GRPCPublisher{c: connectv1.NewConnectInternalServiceClient(conn)}
}

// Publish sends evs; an INVALID_ARGUMENT answer is ErrRejected, anything else failed is retried.
func (p *GRPCPublisher) Publish(ctx context.Context, evs []events.Event) error {
	req := &connectv1.PublishEventsRequest{Events: make([]*connectv1.Event, 0, len(evs))}
	for _, e := range evs {
		req.Events = append(req.Events, &connectv1.Event{
			Id: e.ID, Type: e.Type, ClientId: e.ClientID, CreatedAt: timestamppb.New(e.CreatedAt), Data: e.Data,
		})
	}
	if _, err := p.c.PublishEvents(ctx, req); err != nil {
		if status.Code(err) == codes.InvalidArgument {
			return fmt.Errorf("%w: %v", ErrRejected, err) //nolint:errorlint // the gRPC status stays out of the chain: only ErrRejected is matched
		}
		return fmt.Errorf("publish events: %w", err)
	}
	return nil
}

// FromProto is the event a PublishEvents request carries (connect's side of GRPCPublisher).
func FromProto(e *connectv1.Event) events.Event {
	return events.Event{ID: e.GetId(), Type: e.GetType(), ClientID: e.GetClientId(), CreatedAt: e.GetCreatedAt().AsTime(), Data: e.GetData()}
}
