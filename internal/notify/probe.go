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
// notification through the pool, and waits up to wait for it. It returns
// ErrNotDelivered when it does not arrive; an error connecting with listen
// is returned as it is. On a session connection the probe takes a round
// trip or two once the listener is connected.
func Probe(ctx context.Context, pool *pgxpool.Pool, listen *pgx.ConnConfig, wait time.Duration) error {
	if listen == nil {
		listen = pool.Config().ConnConfig
	}
	cfg := listen.Copy()
	cfg.Tracer = nil // the probe is no work of the pool's to count
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to listen: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+probeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Simple protocol: a pooler that cannot serve the pool's prepared
	// statements must still carry the probe, so that its answer is this one.
	token := uuid.NewString()
	if _, err := pool.Exec(ctx, "SELECT pg_notify('"+probeChannel+"', $1)", pgx.QueryExecModeSimpleProtocol, token); err != nil {
		return fmt.Errorf("notify through the pool: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if parent.Err() == nil && ctx.Err() != nil {
				return fmt.Errorf("%w within %s", ErrNotDelivered, wait)
			}
			return err
		}
		if n.Channel == probeChannel && n.Payload == token {
			return nil
		}
	}
}
