package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Listener holds one dedicated connection (outside the pool) that LISTENs on a channel, and
// tells its handler what arrives. It proves the connection every Beat with a round trip; a
// connection that fails or does not answer in time is dropped and opened again with
// exponential backoff. Notifications sent while it was down are lost: Down tells the handler,
// which must treat everything it knew from the channel as unknown until the next Up.
type Listener struct {
	// Channel is the LISTEN channel (an identifier: lower-case letters, digits, _).
	Channel string
	// ApplicationName shows the connection in pg_stat_activity.
	ApplicationName string
	// Beat is how often the connection is proved (default 250 ms); Handler.Beat follows each proof.
	Beat time.Duration
	// Handler receives what happens, from the Listener's one goroutine, in order.
	Handler ListenHandler
	Log     *zap.Logger
}

// ListenHandler receives a Listener's notifications and its state.
type ListenHandler interface {
	// Up: the LISTEN is in place; every notification committed from now on will be delivered.
	Up()
	// Notify delivers one notification's payload.
	Notify(payload string)
	// Beat: the connection answered a round trip just now, after delivering every
	// notification that arrived before it.
	Beat()
	// Down: the connection is lost; what was sent meanwhile will never arrive.
	Down()
}

// Listen runs l over a connection configured as pool's until ctx ends.
func (l *Listener) Listen(ctx context.Context, pool *pgxpool.Pool) {
	if l.Beat <= 0 {
		l.Beat = 250 * time.Millisecond
	}
	cfg := pool.Config().ConnConfig.Copy()
	if l.ApplicationName != "" {
		cfg.RuntimeParams["application_name"] = l.ApplicationName
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 5*time.Second
	for ctx.Err() == nil {
		started := time.Now()
		err := l.session(ctx, cfg)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			b.Reset()
		}
		wait := b.NextBackOff()
		l.Log.Warn("database listen connection lost; reconnecting", zap.String("channel", l.Channel), zap.Error(err), zap.Duration("in", wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// session opens a connection, LISTENs and delivers until the connection fails or ctx ends.
func (l *Listener) session(ctx context.Context, cfg *pgx.ConnConfig) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.Channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	l.Handler.Up()
	defer l.Handler.Down()
	next := time.Now().Add(l.Beat)
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.Handler.Notify(n.Payload)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case conn.PgConn().IsClosed() || !(errors.Is(err, context.DeadlineExceeded) || timeout(err)):
			return fmt.Errorf("wait for notification: %w", err)
		}
		// The round trip proves the connection; notifications it carries back are buffered by
		// pgx and returned by the next WaitForNotification, before the next Beat.
		pctx, cancel := context.WithTimeout(ctx, 2*l.Beat)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		for {
			// Deliver what the ping brought back before saying all is delivered.
			dctx, cancel := context.WithTimeout(ctx, 0)
			n, err := conn.WaitForNotification(dctx)
			cancel()
			if err != nil {
				break
			}
			l.Handler.Notify(n.Payload)
		}
		if conn.PgConn().IsClosed() {
			return errors.New("connection closed")
		}
		l.Handler.Beat()
		next = time.Now().Add(l.Beat)
	}
}

func timeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
