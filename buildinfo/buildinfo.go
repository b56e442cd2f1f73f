// Package buildinfo says which Limbo this is: the module version, the VCS
// revision and time it was built from, and the Go version, as the Go
// toolchain recorded them in the binary (`limbo version`, /healthz and the
// limbo_build_info gauge all read it here).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Info is what the binary knows of its build.
type Info struct {
	// Version is the module version ("v1.2.3"), or "(devel)" for a build
	// from a checkout.
	Version string `json:"version"`
	// Revision and Time are the VCS commit and its time ("" when the
	// build had no VCS information, as with `go run` or `go test`);
	// Modified says the work tree had uncommitted changes.
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
	// GoVersion is the toolchain that built it.
	GoVersion string `json:"go"`
}

var read = sync.OnceValue(func() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
})

// Read returns this binary's build information.
func Read() Info { return read() }
