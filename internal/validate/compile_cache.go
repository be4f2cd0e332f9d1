package validate

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Compiled schemas are kept by the SHA-256 of their bytes: a schema sent
// again (every turn of a client that asks for the same shape) and the same
// schema read back from the ledger are compiled once per process, not once
// per use. Compilation is deterministic, so a cached Schema is exactly what
// Compile would return.
var cache = newSchemaCache(256, 16<<20)

// CompileCached is Compile with a bounded, least-recently-used cache of the
// schemas that compiled. Errors are not cached.
func CompileCached(raw []byte) (*Schema, error) {
	key := sha256.Sum256(raw)
	if s := cache.get(key); s != nil {
		return s, nil
	}
	s, err := Compile(raw)
	if err != nil {
		return nil, err
	}
	cache.put(key, s, len(raw))
	return s, nil
}

// schemaCache is an LRU bounded by entries and by the schemas' source
// bytes (a rough proxy for what the compiled form holds).
type schemaCache struct {
	maxEntries, maxBytes int

	mu    sync.Mutex
	order *list.List // front: most recently used; values are *cacheEntry
	byKey map[[32]byte]*list.Element
	bytes int
}

type cacheEntry struct {
	key    [32]byte
	schema *Schema
	size   int
}

func newSchemaCache(maxEntries, maxBytes int) *schemaCache {
	return &schemaCache{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), byKey: map[[32]byte]*list.Element{}}
}

func (c *schemaCache) get(key [32]byte) *Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).schema
}

func (c *schemaCache) put(key [32]byte, s *Schema, size int) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return // compiled concurrently: keep the first
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, schema: s, size: size})
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		old := c.order.Remove(c.order.Back()).(*cacheEntry)
		delete(c.byKey, old.key)
		c.bytes -= old.size
	}
}

// cacheLen reports the cache's entries and bytes (tests).
func (c *schemaCache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}
