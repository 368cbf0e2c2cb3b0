#!/usr/bin/env bash
# Regenerates the Go code for both schemas: the client protocol
# (proto/parley/v1 → proto/parleyv1, public) and the cluster protocol between
# nodes (proto/parley/cluster/v1 → internal/cluster/clusterpb, server-only).
# Needs protoc and protoc-gen-go
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
set -euo pipefail
cd "$(dirname "$0")"
protoc -I . --go_out=. --go_opt=module=github.com/parleyim/parley/proto parley/v1/*.proto
protoc -I . --go_out=.. --go_opt=module=github.com/parleyim/parley parley/cluster/v1/*.proto
