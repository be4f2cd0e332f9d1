// Package jsonb owns the stored form of message content: the Part type and
// the only functions that turn parts into JSON for a jsonb column and back.
// Every write and read of chat_messages.content and
// chat_queued_messages.content goes through MarshalParts and ParseContent,
// and of structured_requests.schema through EncodeDocument and
// DecodeDocument (the sentinel scheme below on a whole document).
//
// PostgreSQL jsonb refuses the escape \u0000 and unpaired surrogate escapes
// (\ud800 alone), and text columns refuse invalid UTF-8. Model text, tool
// arguments, tool results and provider metadata can contain all of them, so
// MarshalParts makes every part storable and ParseContent gives back what
// was meant:
//
//   - Strings use a reversible sentinel scheme on decoded characters:
//     U+0000 is stored as U+E000 U+E001 and U+E000 as U+E000 U+E000;
//     decoding reverses both pairs and keeps any other U+E000. Working on
//     characters, not escape text, it survives jsonb's normalisation.
//   - Raw JSON fields (Args, Result, ProviderMetadata) get the same scheme
//     in keys and values. A read-only detector (scanRaw) decides whether a
//     document needs it; a clean document is stored byte for byte. One that
//     does is decoded (lone surrogates and invalid UTF-8 become U+FFFD,
//     valid surrogate pairs keep their character, numbers keep their
//     text), encoded and marshalled again.
//   - Structured-output values (Outcome.Value) are never transformed: the
//     validator admits no U+0000 and no lone surrogates into them, and
//     MarshalParts refuses one that has them rather than change it.
//
// One table in codec.go (fields) lists every field of Part with its policy
// (encode, reject or safe) and accessors; it drives encoding, decoding and
// validation. A reflection-driven test (persist_test.go) round-trips a probe
// through real PostgreSQL for every string-bearing field, so a field added
// to Part without a table row fails by name. See docs/codec.md.
//
// MarshalParts never modifies its argument: a part that needs a change is
// copied, with its nested structs, before the change.
//
// Cost (BenchmarkMarshal, BenchmarkCheck, BenchmarkParse; a five-part
// history slice of 1 432 stored bytes; medians of 10 runs on a shared 2-core
// AMD EPYC VM, Go 1.26.8; cpu-ns/op is the benchmark thread's CPU time):
//
//	                                  ns/op  cpu-ns/op   B/op  allocs/op
//	clean    json.Marshal             8 146      4 807  1 432          2
//	clean    MarshalParts (fast)      8 197      5 212  1 432          2   1.08x json.Marshal
//	clean    table walk alone           802        465      0          0
//	special  MarshalParts (slow)     22 872     13 460  6 429         59   2.9x json.Marshal
//	clean    ParseContent            25 752     14 880  6 128         29   0.99x json.Unmarshal
//	special  ParseContent            49 522     22 366  9 665         83   1.5x json.Unmarshal
//
// docs/codec.md has the full table and how it was measured.
package jsonb
