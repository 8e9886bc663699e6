// Package smsc is mnv's side of an operator's SMS centre: the workflows' SMS provider over one
// SMPP transceiver bind (services/platform/smpp), its delivery receipts handed to the
// workflows, and its counters per bind. What it guarantees across a crash is
// docs/architecture.md#sms-over-smpp.
package smsc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// Config is the bind and the sender.
type Config struct {
	// Name labels the bind's metrics (several SMSCs may one day be bound at once).
	Name string
	smpp.Config
	// Source is the sender the phone shows: a number or an alphanumeric name.
	Source string
}

// Receipts is where delivery receipts go (workflows.Service): by the message id the submit
// answered, and, for an id that stays unknown, matched to a step in doubt.
type Receipts interface {
	Receipt(ctx context.Context, providerID, status string) error
	ReceiptInDoubt(ctx context.Context, r workflows.DeliveryReceipt) error
}

// receiptQueue is how many receipts may wait for the database, unacknowledged: the SMSC's
// reading goroutine only enqueues, so a slow database never holds up submits' answers, and a
// receipt that finds the queue full is answered with a temporary error at once (the SMSC sends
// it again later).
const receiptQueue = 4096

// receiptWorkers record receipts in parallel; receiptAttempts is how many times each is tried
// (about 4.5 s of pauses in all).
const (
	receiptWorkers  = 4
	receiptAttempts = 10
)

// Provider sends the workflows' SMS over one bind. Until the first bind succeeds, Send answers
// workflows.ErrNotSent and the job retries; from then on the smpp client keeps the session.
type Provider struct {
	cfg      Config
	receipts Receipts
	metrics  *Metrics
	log      *zap.Logger

	client atomic.Pointer[smpp.Client]
	queue  chan receipt
	// retryPause is the first pause between a receipt's attempts, growing by as much each time
	// (tests shorten it).
	retryPause time.Duration
	stop       chan struct{}
	binding    sync.WaitGroup // the first bind
	workers    sync.WaitGroup // the receipts' recorders
	stopOnce   sync.Once
}

// New makes a provider; Start binds it.
func New(cfg Config, receipts Receipts, m *Metrics, log *zap.Logger) *Provider {
	return &Provider{cfg: cfg, receipts: receipts, metrics: m, log: log, queue: make(chan receipt, receiptQueue),
		retryPause: 100 * time.Millisecond, stop: make(chan struct{})}
}

// receipt is a delivery receipt waiting to be recorded, and the Ack that answers the SMSC once
// it is.
type receipt struct {
	smpp.Receipt
	ack smpp.Ack
}

// Start records receipts and binds, retrying the first bind in the background until it
// succeeds or Close: an SMSC away at start-up delays the SMS, it does not stop the service.
func (p *Provider) Start() {
	for range receiptWorkers {
		p.workers.Add(1)
		go p.recordReceipts()
	}
	cfg := p.cfg.Config
	cfg.OnReceipt = p.onReceipt
	cfg.Observer = p.metrics.observer(p.cfg.Name)
	p.binding.Add(1)
	go func() {
		defer p.binding.Done()
		pause := time.Second
		for {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-p.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			c, err := smpp.Dial(ctx, cfg)
			cancel()
			if err == nil {
				p.client.Store(c)
				p.log.Info("smsc bound", zap.String("smsc", p.cfg.Name), zap.String("addr", p.cfg.Addr))
				return
			}
			p.metrics.bindFailed(p.cfg.Name)
			p.log.Warn("smsc bind failed; retrying", zap.String("smsc", p.cfg.Name), zap.String("addr", p.cfg.Addr), zap.Error(err))
			select {
			case <-p.stop:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
		}
	}()
}

// Close stops recording receipts and unbinds (submits in flight get their answers first).
// Receipts still queued are left unacknowledged, and one being recorded when Close came is
// answered with the temporary error if its session is still up: the SMSC sends them again to
// the next bind, this process's or another's.
func (p *Provider) Close() error {
	p.stopOnce.Do(func() {
		close(p.stop)
		p.workers.Wait()
		p.binding.Wait() // no client appears after this
		if c := p.client.Load(); c != nil {
			_ = c.Close()
		}
	})
	return nil
}

// Send submits m with a delivery receipt asked for and m.Reference as user_message_reference,
// which the SMSC echoes in the receipt. A refusal for good is workflows.ErrRefused; a failure
// the SMSC never saw is workflows.ErrNotSent; any other failure (the outcome unknown) is a
// plain error, and the job's retry is then in doubt (held for the receipt first).
func (p *Provider) Send(ctx context.Context, m workflows.Message) ([]string, error) {
	c := p.client.Load()
	if c == nil {
		return nil, fmt.Errorf("smsc %s not bound yet: %w", p.cfg.Name, workflows.ErrNotSent)
	}
	ids, err := c.Submit(ctx, smpp.Message{From: p.cfg.Source, To: m.To, Text: m.Text, RegisteredDelivery: true,
		Reference: m.Reference, HasReference: true})
	if err == nil {
		return ids, nil
	}
	return ids, classify(err, len(ids) > 0)
}

// classify maps a submit's error to the provider port's: refused for good, surely not sent, or
// unknown. Parts already taken (partial) make any failure unknown but a refusal.
func classify(err error, partial bool) error {
	var st smpp.Status
	switch {
	case errors.As(err, &st) && !st.Transient():
		return fmt.Errorf("%w: %w", workflows.ErrRefused, err)
	case partial || smpp.Uncertain(err):
		return err
	case errors.Is(err, smpp.ErrClosed) || errors.As(err, &st) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// Closed before a byte left, throttled past the retries, or waited too long for the
		// window or a session: the SMSC took nothing.
		return fmt.Errorf("%w: %w", workflows.ErrNotSent, err)
	default:
		return err // the text could not be encoded, or something unforeseen: treated as unknown
	}
}

// onReceipt runs on the session's reading goroutine: it only enqueues, and the receipt is
// acknowledged once recorded. A full queue answers the temporary error at once (counted): the
// SMSC keeps the receipt and sends it again later, when the queue has room.
func (p *Provider) onReceipt(r smpp.Receipt, ack smpp.Ack) {
	select {
	case p.queue <- receipt{r, ack}:
	default:
		ack(false)
		p.metrics.receiptDeferred(p.cfg.Name, deferredQueueFull)
	}
}

// recordReceipts hands final receipts to the workflows and acknowledges each once it is
// recorded, or known to be no step of ours; intermediate states (ENROUTE, ACCEPTD) change
// nothing and are acknowledged at once. A receipt that could not be recorded (the database
// away) is answered with the temporary error, so the SMSC sends it again later. Once Close
// began, what is left in the queue is neither recorded nor answered.
func (p *Provider) recordReceipts() {
	defer p.workers.Done()
	for {
		var r receipt
		select {
		case <-p.stop:
			return
		case r = <-p.queue:
		}
		select {
		case <-p.stop:
			return // taken as Close came: left for the SMSC to send again, like the rest
		default:
		}
		p.metrics.receipt(p.cfg.Name, r.State)
		status, final := receiptStatus(r.State)
		if !final {
			r.ack(true)
			continue
		}
		err := p.record(r.Receipt, status)
		select {
		case <-p.stop:
			// The retries were cut short: whether it is ours is not known, so the SMSC keeps it.
			if err != nil {
				r.ack(false)
				return
			}
		default:
		}
		if err != nil && !errors.Is(err, fault.ErrNotFound) {
			r.ack(false)
			p.metrics.receiptDeferred(p.cfg.Name, deferredNotRecorded)
			continue
		}
		r.ack(true)
	}
}

// record hands one final receipt to the workflows. A receipt may overtake the record of its
// message id (an SMSC that delivers at once answers the submit and sends the receipt
// together): an unknown id is asked again for a few seconds. One still unknown then is
// matched against the steps in doubt of its number (a submit whose answer was lost, or whose
// record a crash prevented: workflows.Service.ReceiptInDoubt); only one that matches none is
// taken for another system's message or a purged workflow (fault.ErrNotFound: acknowledged,
// since nothing will ever match it). Any other error is a receipt not recorded, which the SMSC
// is asked to send again.
func (p *Provider) record(r smpp.Receipt, status string) error {
	err := p.retry(func(ctx context.Context) error { return p.receipts.Receipt(ctx, r.MessageID, status) }, true)
	if errors.Is(err, fault.ErrNotFound) {
		err = p.retry(func(ctx context.Context) error {
			return p.receipts.ReceiptInDoubt(ctx, workflows.DeliveryReceipt{ProviderID: r.MessageID, Status: status, To: r.Dest,
				Reference: r.Reference, HasReference: r.HasReference, Text: r.Text})
		}, false)
	}
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		p.log.Warn("delivery receipt not recorded; the SMSC is asked to send it again", zap.String("smsc", p.cfg.Name), zap.String("message_id", r.MessageID), zap.Error(err))
	}
	return err
}

// retry calls f until it succeeds, up to receiptAttempts times with growing pauses (none once
// the provider is closing); fault.ErrNotFound is retried only when notFound says so.
func (p *Provider) retry(f func(ctx context.Context) error, notFound bool) error {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || (!notFound && errors.Is(err, fault.ErrNotFound)) || attempt == receiptAttempts-1 {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt+1) * p.retryPause):
		case <-p.stop:
			return err
		}
	}
}

// receiptStatus maps a receipt's final state to the workflows' receipt status.
func receiptStatus(s smpp.MessageState) (status string, final bool) {
	switch s {
	case smpp.StateDelivered:
		return workflows.ReceiptDelivered, true
	case smpp.StateUndeliverable, smpp.StateExpired, smpp.StateDeleted, smpp.StateRejected:
		return workflows.ReceiptUndeliverable, true
	}
	return "", false
}

// LateReceipts is a Receipts that is made before the workflows' service it hands receipts to
// (the service needs the provider first): *Service is set before Start binds.
type LateReceipts struct{ Service **workflows.Service }

// Receipt calls the service's Receipt.
func (l LateReceipts) Receipt(ctx context.Context, providerID, status string) error {
	return (*l.Service).Receipt(ctx, providerID, status)
}

// ReceiptInDoubt calls the service's ReceiptInDoubt.
func (l LateReceipts) ReceiptInDoubt(ctx context.Context, r workflows.DeliveryReceipt) error {
	return (*l.Service).ReceiptInDoubt(ctx, r)
}
