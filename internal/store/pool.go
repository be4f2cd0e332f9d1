package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// Configure prepares a pool's configuration for the store: every connection
// encodes and scans google/uuid values (uuid.UUID, uuid.NullUUID) with pgx's
// binary uuid codec. Without it pgx takes its driver.Valuer path for each
// uuid argument: the value is formatted as text, the binary encoding of that
// text fails, the failure is formatted with %#v, and the text is parsed back
// — 19 allocations per argument, and a turn sends dozens of them.
func Configure(cfg *pgxpool.Config) {
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if prev != nil {
			return prev(ctx, conn)
		}
		return nil
	}
}
