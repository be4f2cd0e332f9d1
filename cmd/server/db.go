package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/pglocal"
	"github.com/chatd/chatd/internal/store"
)

// database is an open pool plus, for a local cluster, the means to stop it.
type database struct {
	pool    *pgxpool.Pool
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
	store.Configure(cfg)
	d.txs = store.Trace(cfg)
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
	return d, nil
}
