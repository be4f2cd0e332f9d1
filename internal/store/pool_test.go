package store_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/store"
)

// Configure gives the pool's connections a direct encoding of google/uuid
// values, and they still round-trip (NULL included).
func TestConfigureEncodesUUIDsDirectly(t *testing.T) { // not parallel: testing.AllocsPerRun refuses
	cfg := dbtest.Config(t)
	store.Configure(cfg)
	pool := dbtest.NewPool(t, cfg)
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	m := conn.Conn().TypeMap()
	id := uuid.New()
	for name, v := range map[string]any{"UUID": id, "NullUUID": uuid.NullUUID{UUID: id, Valid: true}} {
		buf := make([]byte, 0, 64)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
				t.Fatal(err)
			}
		})
		// The driver.Valuer path takes 19; the codec none.
		if allocs > 1 {
			t.Errorf("encoding a %s allocates %.0f times, want at most 1", name, allocs)
		}
	}

	var back uuid.UUID
	var null, some uuid.NullUUID
	err = conn.QueryRow(ctx, "SELECT $1::uuid, NULL::uuid, $2::uuid", id, uuid.NullUUID{UUID: id, Valid: true}).Scan(&back, &null, &some)
	if err != nil {
		t.Fatal(err)
	}
	if back != id || null.Valid || !some.Valid || some.UUID != id {
		t.Fatalf("round trip: %v %+v %+v, want %v, NULL, %v", back, null, some, id, id)
	}
}
