//go:build ignore

// build writes corpus.jsonl.gz from checkouts of its public sources (see
// README.md): go run build.go -schemastore DIR -bench DIR > corpus.jsonl.gz
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

type entry struct {
	Name    string            `json:"name"`
	Source  string            `json:"source"`
	Schema  json.RawMessage   `json:"schema"`
	Valid   []json.RawMessage `json:"valid,omitempty"`
	Invalid []json.RawMessage `json:"invalid,omitempty"`
}

func main() {
	store := flag.String("schemastore", "", "a SchemaStore checkout (its src directory)")
	bench := flag.String("bench", "", "a JSONSchemaBench checkout (its data directory)")
	flag.Parse()
	var out []entry
	out = append(out, schemaStore(*store)...)
	out = append(out, benchSet(*bench, "Kubernetes", "kubernetes", 5)...)
	out = append(out, benchSet(*bench, "Snowplow", "snowplow", 1)...)
	out = append(out, benchSet(*bench, "Glaiveai2K", "glaive", 1)...)
	zw, _ := gzip.NewWriterLevel(os.Stdout, gzip.BestCompression)
	for _, e := range out {
		b, err := json.Marshal(e)
		if err != nil {
			log.Fatal(err)
		}
		zw.Write(append(b, '\n'))
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
}

// schemaStore: the catalogue's Draft-04 and Draft-06 schemas that have
// test files, with their JSON and YAML test files.
func schemaStore(dir string) []entry {
	files, _ := filepath.Glob(filepath.Join(dir, "schemas/json/*.json"))
	sort.Strings(files)
	var out []entry
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		var head struct {
			Schema string `json:"$schema"`
		}
		if json.Unmarshal(raw, &head) != nil {
			continue
		}
		if !strings.Contains(head.Schema, "draft-04") && !strings.Contains(head.Schema, "draft-06") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		e := entry{Name: "schemastore/" + name, Source: "schemastore", Schema: compact(raw)}
		e.Valid = tests(filepath.Join(dir, "test", name))
		e.Invalid = tests(filepath.Join(dir, "negative_test", name))
		if len(e.Valid)+len(e.Invalid) == 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

func tests(dir string) []json.RawMessage {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	sort.Strings(files)
	var out []json.RawMessage
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		switch filepath.Ext(f) {
		case ".json":
			if json.Valid(raw) {
				out = append(out, compact(raw))
			}
		case ".yaml", ".yml":
			var v any
			if yaml.Unmarshal(raw, &v) != nil {
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				continue // a YAML map with non-string keys
			}
			out = append(out, b)
		}
	}
	return out
}

// benchSet: every step-th schema of one JSONSchemaBench subset, in name order.
func benchSet(dir, sub, source string, step int) []entry {
	files, _ := filepath.Glob(filepath.Join(dir, sub, "*.json"))
	sort.Strings(files)
	var out []entry
	for i, f := range files {
		if i%step != 0 {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		out = append(out, entry{Name: source + "/" + name, Source: source, Schema: compact(raw)})
	}
	return out
}

func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		log.Fatal(fmt.Errorf("compact: %w", err))
	}
	return b.Bytes()
}
