// Package migrations holds Limbo's numbered SQL migrations, embedded in the
// binary. A file applies to both engines unless its name ends in -postgres
// or -sqlite; such twins exist only where the dialects differ.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
