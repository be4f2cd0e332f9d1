package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotDelivered says a notification sent through the pool did not reach
// a connection listening on listen's database. Behind a transaction pooler
// (PgBouncer's pool_mode=transaction) that is what happens to every
// notification: a LISTEN made through the pooler is registered on whichever
// server connection ran it, which then serves other clients, so the
// listener is told nothing. The same happens when the two URLs name
// different databases.
var ErrNotDelivered = errors.New("a notification sent through the pool did not reach the listening connection")

// probeChannel carries probes only; no trigger writes to it.
const probeChannel = "chatd_probe"

// Probe checks that the hub can work on this pool and listen configuration
// (nil: the pool's): it LISTENs on a connection made with listen, sends a
// notification through the pool, and waits up to wait for it to arrive.
// It returns ErrNotDelivered when it does not; an error connecting with
// listen is returned as it is. The wait starts once the notification is
// sent, so a slow connect on a loaded machine is not taken for a pooler.
func Probe(ctx context.Context, pool *pgxpool.Pool, listen *pgx.ConnConfig, wait time.Duration) error {
	if listen == nil {
		listen = pool.Config().ConnConfig
	}
	cfg := listen.Copy()
	cfg.Tracer = nil // the probe is no work of the pool's to count
	conn, err := listenProbe(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// Simple protocol: a pooler that cannot serve the pool's prepared
	// statements must still carry the probe, so that its answer is this one.
	// The pool's query runs under ctx alone: a cancelled query costs the
	// pool its connection.
	token := uuid.NewString()
	if _, err := pool.Exec(ctx, "SELECT pg_notify('"+probeChannel+"', $1)", pgx.QueryExecModeSimpleProtocol, token); err != nil {
		return fmt.Errorf("notify through the pool: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(waitCtx)
		if err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				return fmt.Errorf("%w within %s", ErrNotDelivered, wait)
			}
			return err
		}
		if n.Channel == probeChannel && n.Payload == token {
			return nil
		}
	}
}

// probeConnectTimeout bounds the probe's own connection when its
// configuration sets no connect timeout.
const probeConnectTimeout = 30 * time.Second

// listenProbe connects with cfg and LISTENs on the probe channel.
func listenProbe(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = probeConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+probeChannel); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}
