// Command parley runs the Parley IM server and its tools.
//
//	parley serve [flags]   run a server (see parley serve -h)
//	parley chat --user U --to PEER  a line-based chat client
//	parley bench SCENARIO  load-test a server (see parley bench -h)
//	parley push test|vapid-keys  push notification tools
//	parley reindex --data DIR    rebuild the search index (server stopped)
//	parley migrate --from DIR --to postgres://...  move to PostgreSQL (node stopped)
//	parley backup --out FILE     archive the data directory (docs/backup.md)
//	parley restore --in FILE --data DIR  a data directory from an archive
//	parley healthcheck [--url URL]  exit 0 if a server's /healthz answers 200
//	parley version
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parleyim/parley/internal/bench"
	"github.com/parleyim/parley/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=..."; left
// "dev", the module's version from the build info is shown instead.
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "bench":
		err = benchCmd(os.Args[2:])
	case "chat":
		err = chatCmd(os.Args[2:])
	case "push":
		err = pushCmd(os.Args[2:])
	case "reindex":
		err = reindexCmd(os.Args[2:])
	case "migrate":
		err = migrateCmd(os.Args[2:])
	case "backup":
		err = backupCmd(os.Args[2:])
	case "restore":
		err = restoreCmd(os.Args[2:])
	case "healthcheck":
		err = healthcheckCmd(os.Args[2:])
	case "version":
		writeVersion(os.Stdout, buildinfo.Read(version))
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "parley: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors name their origin ("parley: ...", "chat: ...")
		os.Exit(1)
	}
}

func usage() { writeUsage(os.Stderr) }

// writeVersion prints what `parley version` says: the version on the
// first line (scripts read that), then how the binary was built.
func writeVersion(w io.Writer, i buildinfo.Info) {
	commit := i.Commit
	if i.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "parley %s\n  commit    %s\n", i.Version, commit)
	if i.Time != "" {
		fmt.Fprintf(w, "  committed %s\n", i.Time)
	}
	fmt.Fprintf(w, "  go        %s\n  protocol  %s\n", i.GoVersion, i.Protocol)
}

func writeUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: parley <command> [flags]

commands:
  serve     run a Parley server (embedded storage, no other service needed)
  chat      a line-based chat client (WebSocket or TCP)
  bench     load-test a server (see docs/benchmarks.md), one scenario of:
%s
  push      push notifications: 'push test --user U' sends a test to a
            user's devices; 'push vapid-keys' makes a Web Push key pair
  reindex   rebuild the search index from the embedded store:
            'reindex --data DIR', with the server stopped
  migrate   copy a stopped node's embedded store into PostgreSQL for a
            cluster: 'migrate --from DIR --to postgres://...' (docs/migrate.md)
  backup    archive the data directory: 'backup --out FILE [--server URL]'
            while it serves, or '--data DIR' stopped
  restore   a data directory from a backup: 'restore --in FILE --data DIR'
  healthcheck
            exit 0 if a server's /healthz answers 200 (a container's
            HEALTHCHECK): 'healthcheck [--url URL]'
  version   print the version, commit, Go and protocol versions

Run 'parley <command> -h' for a command's flags.
`, wrapList(bench.Scenarios(), "            ", 78))
}

// wrapList joins words with ", " into indented lines of at most width.
func wrapList(words []string, indent string, width int) string {
	var b strings.Builder
	line := indent
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}
