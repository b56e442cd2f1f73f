// Package static embeds Limbo's front-end assets.
package static

import "embed"

// FS holds the assets served under /static/.
//
//go:embed *.css *.js *.svg
var FS embed.FS
