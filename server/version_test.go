package server_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// A client learns the server's protocol version from AuthOk, on every
// transport; /metrics says which build serves.
func TestProtocolVersionAndBuildInfo(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.Version = "v9.8.7" })
	for _, tc := range transports {
		c, _ := ts.connect(t, "alice", "a-"+tc.name, "cli", tc)
		if got := c.AuthOk().GetProtocolVersion(); got != wire.ProtocolVersion || c.ProtocolVersion() != got {
			t.Fatalf("%s: AuthOk.protocol_version %q, want %q", tc.name, got, wire.ProtocolVersion)
		}
	}
	code, body := adminGet(t, ts.httpBase+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	var line string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "parley_build_info{") {
			line = l
		}
	}
	for _, want := range []string{`version="v9.8.7"`, `go_version="` + runtime.Version() + `"`, `protocol="` + wire.ProtocolVersion + `"`, `commit="`, "} 1"} {
		if !strings.Contains(line, want) {
			t.Fatalf("parley_build_info %q lacks %s", line, want)
		}
	}
}
