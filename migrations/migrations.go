// Package migrations holds Limbo's numbered SQL migrations, embedded in the
// binary. A file applies to both engines unless its name ends in -postgres
// or -sqlite; such twins exist only where the dialects differ.
//
// A migration that only adds indexes to a table that may be large begins
// with the line
//
//	-- limbo: indexes, built concurrently on a large PostgreSQL table
//
// and holds nothing but "CREATE [UNIQUE] INDEX name ON table …;"
// statements, each ending its line: on a PostgreSQL table of many rows the
// store builds them with CREATE INDEX CONCURRENTLY, so that the instances
// still serving during a rolling upgrade go on writing (store/migrate.go).
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
