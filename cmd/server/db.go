package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/notify"
	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/store"
)

// database is an open pool plus, for a local cluster, the means to stop it.
type database struct {
	pool *pgxpool.Pool
	// listen makes the notification listener's session: the pool's
	// configuration, or --direct-database-url's.
	listen *pgx.ConnConfig
	// direct is --direct-database-url: the pool goes through a transaction
	// pooler, and what needs a session (migrations) connects here.
	direct  string
	cluster *pglocal.Cluster
	local   bool
	// txs counts the pool's transactions by purpose (for /metrics).
	txs *store.TxCounter
}

func (d *database) Close() {
	if d.pool != nil { // nil when the URL did not parse
		d.pool.Close()
	}
	if d.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.cluster.Stop(ctx)
	}
}

// openDatabase connects to url, or starts (or reuses) the local cluster for
// dataDir and its "chatd" database.
func openDatabase(ctx context.Context, df databaseFlags, maxConns int32, logger *slog.Logger) (*database, error) {
	if err := df.validate(); err != nil {
		return nil, err
	}
	d := &database{}
	url := *df.url
	if url == "" {
		dir, err := pglocal.ClusterDir(*df.dataDir)
		if err != nil {
			return nil, err
		}
		if df.announce != nil {
			// A tool run from another directory would otherwise quietly
			// use (or make) a cluster the server does not.
			if !*df.createCluster && !pglocal.Exists(dir) {
				return nil, fmt.Errorf("no local PostgreSQL cluster at %s (for --data-dir %s): run this where the server runs, "+
					"or pass its --data-dir or --database-url; --create-cluster creates one here", dir, *df.dataDir)
			}
			fmt.Fprintf(df.announce, "chatd: using the local PostgreSQL cluster at %s\n", dir)
		}
		c, err := pglocal.Start(ctx, pglocal.Options{Dir: dir, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("local PostgreSQL: %w", err)
		}
		d.cluster, d.local = c, true
		if err := c.EnsureDatabase(ctx, "chatd"); err != nil {
			d.Close()
			return nil, fmt.Errorf("local PostgreSQL: %w", err)
		}
		url = c.URL("chatd")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	warnHosts("--database-url", &cfg.ConnConfig.Config, logger)
	d.direct = *df.direct
	if d.direct != "" && !strings.Contains(url, "default_query_exec_mode") {
		// A transaction pooler runs each transaction on any server
		// connection, and PgBouncer 1.18 keeps no prepared statements:
		// pgx's default named ones fail there. Here every query is parsed
		// as the unnamed statement in the round trip that runs it (only
		// its description is cached). A URL that names a mode keeps it.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	store.Configure(cfg)
	d.txs = store.Trace(cfg)
	d.txs.OnServerChange(func(from, to string) {
		logger.Warn("database connections reach another server", slog.String("from", from), slog.String("to", to))
	})
	d.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		if d.cluster != nil {
			_ = d.cluster.Stop(context.Background())
		}
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.pool.Ping(pingCtx); err != nil {
		d.Close()
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	start := time.Now()
	if err := d.probe(ctx, logger); err != nil {
		d.Close()
		return nil, err
	}
	logger.Debug("notification probe answered", slog.Duration("took", time.Since(start)), slog.Bool("direct", d.direct != ""))
	return d, nil
}

// probeWait bounds the notification probe: on a session it answers in a
// round trip or two, behind a transaction pooler never.
const probeWait = 5 * time.Second

// probe sets the listener's configuration and checks that a notification
// sent through the pool reaches it, so that a server behind a transaction
// pooler without a direct URL (whose streams, long polls and wake-ups
// would hear nothing) refuses to start, saying why.
func (d *database) probe(ctx context.Context, logger *slog.Logger) error {
	d.listen = d.pool.Config().ConnConfig
	if d.direct != "" {
		cfg, err := pgx.ParseConfig(d.direct)
		if err != nil {
			return fmt.Errorf("--direct-database-url: %w", err)
		}
		cfg.Tracer = d.listen.Tracer // the listener is counted as before
		warnHosts("--direct-database-url", &cfg.Config, logger)
		d.listen = cfg
	}
	err := notify.Probe(ctx, d.pool, d.listen, probeWait)
	switch {
	case errors.Is(err, notify.ErrNotDelivered) && d.direct != "":
		return fmt.Errorf("%w: --direct-database-url must reach the database of --database-url directly, not through a pooler", err)
	case errors.Is(err, notify.ErrNotDelivered):
		return errors.New("notifications sent through --database-url do not reach the listening connection: behind a transaction pooler " +
			"(PgBouncer pool_mode=transaction), set --direct-database-url to a session connection to PostgreSQL itself (docs/operations.md#pgbouncer)")
	case err != nil && d.direct != "":
		return fmt.Errorf("notification listener on --direct-database-url: %w", err)
	case err != nil:
		return fmt.Errorf("notification listener: %w", err)
	}
	return nil
}

// sessions runs f on a pool whose connections are sessions: the pool, or
// with a direct URL a small pool on it, closed after f. Migrations need
// one: goose holds a session advisory lock across its transactions, which
// a transaction pooler would take on one server connection and release on
// another.
func (d *database) sessions(ctx context.Context, f func(*pgxpool.Pool) error) error {
	if d.direct == "" {
		return f(d.pool)
	}
	cfg, err := pgxpool.ParseConfig(d.direct)
	if err != nil {
		return fmt.Errorf("--direct-database-url: %w", err)
	}
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--direct-database-url: %w", err)
	}
	defer p.Close()
	return f(p)
}

// warnHosts warns when a URL names several hosts but accepts any of them:
// without target_session_attrs=read-write a connection may land on a
// standby, where every write fails, or on an old primary.
func warnHosts(flag string, cfg *pgconn.Config, logger *slog.Logger) {
	if cfg.ValidateConnect != nil {
		return
	}
	hosts := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, f := range cfg.Fallbacks { // sslmode=prefer repeats a host without TLS
		if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) > 1 {
		logger.Warn(flag+" names several hosts but not target_session_attrs=read-write: a connection may land on a standby "+
			"(docs/operations.md#database-failover)", slog.Any("hosts", hosts))
	}
}
