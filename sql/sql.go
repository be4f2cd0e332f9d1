// Package sql embeds the database definition: goose migrations in schema/,
// idempotent trigger and function files in triggers/, the invariant checks in
// check.sql (run by internal/check), and the sqlc query files in queries/
// (compiled into internal/dbgen, not used at run time).
package sql

import (
	"embed"
	"io/fs"
)

//go:embed schema/*.sql triggers/*.sql check.sql
var files embed.FS

// Migrations returns the goose migration files.
func Migrations() fs.FS {
	sub, err := fs.Sub(files, "schema")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}

// Triggers returns the trigger files, applied in lexical order.
func Triggers() fs.FS {
	sub, err := fs.Sub(files, "triggers")
	if err != nil {
		panic(err)
	}
	return sub
}

// Checks returns sql/check.sql: the invariant checks, one named query each.
func Checks() string {
	b, err := files.ReadFile("check.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}
