// Package web holds Limbo's templ components. A component is a page region
// and, for htmx, the fragment that replaces it.
package web

//go:generate go tool templ generate
