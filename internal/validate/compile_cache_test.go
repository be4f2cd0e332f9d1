package validate

import "testing"

func TestCompileCached(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"type":"object","properties":{"cache_test_probe":{"type":"integer"}}}`)
	a, err := CompileCached(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CompileCached(append([]byte(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same bytes compiled twice")
	}
	if res := b.Validate([]byte(`{"cache_test_probe":"x"}`)); res.Valid() {
		t.Fatal("the cached schema accepted an invalid value")
	}
	if _, err := CompileCached([]byte(`{"type":7}`)); err == nil {
		t.Fatal("an invalid schema compiled")
	}
}

func TestSchemaCacheBounds(t *testing.T) {
	t.Parallel()
	c := newSchemaCache(3, 100)
	key := func(i int) [32]byte { var k [32]byte; k[0] = byte(i); return k }
	for i := range 5 {
		c.put(key(i), &Schema{}, 10)
	}
	if n, b := c.len(); n != 3 || b != 30 {
		t.Fatalf("%d entries, %d bytes; want 3, 30", n, b)
	}
	if c.get(key(0)) != nil || c.get(key(4)) == nil {
		t.Fatal("not least recently used first")
	}
	c.get(key(2))                // now the most recent
	c.put(key(9), &Schema{}, 85) // evicts 3 and 4, keeps 2
	if n, b := c.len(); n != 2 || b != 95 || c.get(key(9)) == nil || c.get(key(2)) == nil {
		t.Fatalf("byte bound: %d entries, %d bytes", n, b)
	}
	c.put(key(10), &Schema{}, 101) // larger than the whole cache: not kept
	if c.get(key(10)) != nil {
		t.Fatal("an oversized entry was kept")
	}
}
