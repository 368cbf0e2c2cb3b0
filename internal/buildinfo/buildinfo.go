// Package buildinfo says what a Parley binary is: its version, the commit
// it was built from, the Go release that built it and the client protocol
// version it speaks (for `parley version` and /metrics).
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/parleyim/parley/wire"
)

// Info describes one build.
type Info struct {
	// Version: the one given at link time, else the module's version (a
	// `go install ...@vX`), else "dev".
	Version string
	// Commit is the VCS revision the Go toolchain stamped, "unknown" when
	// it did not (a build outside a checkout, or -buildvcs=false).
	Commit string
	// Modified: the checkout had uncommitted changes.
	Modified bool
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time      string
	GoVersion string
	// Protocol is the client protocol version (AuthOk.protocol_version).
	Protocol string
}

// Read returns this binary's Info; linkVersion is the version set at link
// time (-ldflags "-X main.version=v1.2.3"), "" or "dev" when none was.
func Read(linkVersion string) Info {
	i := Info{Version: linkVersion, Commit: "unknown", GoVersion: runtime.Version(), Protocol: wire.ProtocolVersion}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if (i.Version == "" || i.Version == "dev") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			case "vcs.time":
				i.Time = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	return i
}
