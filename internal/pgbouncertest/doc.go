// Package pgbouncertest runs chatd behind PgBouncer 1.18 (Debian's
// pgbouncer) in transaction pooling mode, in front of a throwaway
// PostgreSQL: two `chatd server` replicas with --direct-database-url run
// structured turns and a stream through it, and a server without the direct
// URL refuses to start, saying why (docs/operations.md#pgbouncer). It has no
// code of its own outside its tests. PgBouncer is installed by make test;
// without it the tests skip, except under CI=true, where they fail.
package pgbouncertest
