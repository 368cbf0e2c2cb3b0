#!/usr/bin/env bash
# Regenerates the Go code for proto/parley/v1/*.proto. Needs protoc and
# protoc-gen-go (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
set -euo pipefail
cd "$(dirname "$0")"
protoc -I . --go_out=. --go_opt=module=github.com/parleyim/parley/proto parley/v1/*.proto
