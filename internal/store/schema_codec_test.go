package store_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatd/chatd/internal/dbtest"
	"github.com/chatd/chatd/internal/jsonb"
	"github.com/chatd/chatd/internal/migrate"
	"github.com/chatd/chatd/internal/store"
	"github.com/chatd/chatd/internal/validate"
)

// nulSchema holds U+0000 in a pattern, a literal and a key, and the
// codec's sentinel U+E000, alone and paired.
const nulSchema = `{"type":"object","properties":{"name":{"type":"string","pattern":"^[^\u0000]*$"},` +
	`"k\u0000":{"const":"a\u0000b"},"icon":{"enum":["\ue000","\ue000\ue001","\ue000\ue000"]}}}`

// TestSchemaWithNULRoundTrips: a structured request's schema holding
// U+0000 (which PostgreSQL jsonb cannot hold) is admitted, stored, and
// read back by the store exactly as written: every key and string, U+0000
// and U+E000 included, and it compiles and validates alike. Before, the
// validator refused it ("contains U+0000 ... which PostgreSQL jsonb cannot
// store").
func TestSchemaWithNULRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := store.New(dbtest.New(t))
	user := newUser(t, st, "nul")
	f, fe := validate.ParseResponseFormat([]byte(`{"type":"json_schema","json_schema":{"name":"r","schema":` + nulSchema + `}}`))
	if fe != nil {
		t.Fatalf("admission: %v", fe)
	}
	chat, input, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")},
		Request: &store.RequestSpec{Name: f.Name, Schema: f.Schema}})
	if err != nil {
		t.Fatal(err)
	}
	state, err := st.GetRequest(ctx, user.ID, input.StructuredRequestID.UUID)
	if err != nil {
		t.Fatal(err)
	}
	sameDocument(t, state.Request.Schema, nulSchema)
	turn, err := st.LoadTurn(ctx, chat.ID)
	if err != nil || turn.Request == nil {
		t.Fatalf("turn: %+v %v", turn.Request, err)
	}
	sameDocument(t, turn.Request.Schema, nulSchema)
	s, err := validate.Compile(turn.Request.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Validate([]byte(`{"name":"x","icon":"\ue000\ue001"}`)); !r.Valid() {
		t.Error(r.Summary())
	}
	if r := s.Validate([]byte(`{"icon":"\ue001"}`)); r.Valid() {
		t.Error("an icon outside the enum is valid")
	}
}

// sameDocument fails unless got is the JSON document want, key for key and
// string for string.
func sameDocument(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("read back %q, want %q", got, want)
	}
}

// TestSchemaCodecMigration: migration 00017 doubles the U+E000 of the
// schemas stored before the codec, so that they read back unchanged, and
// its down step halves them again.
func TestSchemaCodecMigration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := migrate.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st := store.New(pool)
	user := newUser(t, st, "old")
	chat, _, err := st.CreateChat(ctx, store.NewChat{OwnerID: user.ID, Model: "m", Content: []jsonb.Part{jsonb.Text("go")}})
	if err != nil {
		t.Fatal(err)
	}
	downThrough(ctx, t, m, 17)
	// A schema as the release before stored it: as written.
	const old = `{"enum":["\ue000","\ue000\ue001","\ue000\ue000x"]}`
	id := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO structured_requests (request_id, chat_id, name, description, schema)
		VALUES ($1, $2, 'r', '', $3)`, id, chat.ID, old); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	state, err := st.GetRequest(ctx, user.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	sameDocument(t, state.Request.Schema, old)
	downThrough(ctx, t, m, 17)
	var raw string
	if err := pool.QueryRow(ctx, `SELECT schema::text FROM structured_requests WHERE request_id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	sameDocument(t, json.RawMessage(raw), old)
}

// downThrough rolls back one migration at a time until version has been
// undone, so that later migrations do not change what the test reaches.
func downThrough(ctx context.Context, t *testing.T, m *migrate.Migrator, version int64) {
	t.Helper()
	for {
		res, err := m.Down(ctx)
		if err != nil || res == nil {
			t.Fatalf("down: %+v %v", res, err)
		}
		if res.Version == version {
			return
		}
		if res.Version < version {
			t.Fatalf("down went past %d to %d", version, res.Version)
		}
	}
}
