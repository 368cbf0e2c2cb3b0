#!/usr/bin/env bash
# CI for the deployment files (docs/operations.md, "Deploying"):
#  - the container image, built without a Docker daemon or a registry
#    (deploy/tools/cmd/parley-image): reproducible, its config inspected, its
#    binary run as the image says; held to the Dockerfile's final stage;
#  - the Helm chart: helm lint, kubeconform on the rendered manifests (default
#    and cluster values) against schemas derived offline from k8s.io/api, and
#    the config a pod would get starting a real node;
#  - the systemd unit: systemd-analyze verify and its security exposure.
# Installs what it needs: helm and kubeconform with go install (kept per
# version under GOPATH, so only the first run builds them), systemd-analyze
# from apt.
set -euo pipefail
cd "$(dirname "$0")/.."

export PARLEY_TEST_PG=${PARLEY_TEST_PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
tools=$(go env GOPATH)/deploy-tools
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# go_tool NAME PACKAGE VERSION: the binary's path, installed once per version.
go_tool() {
  local dir="$tools/$1-$3"
  if [ ! -x "$dir/$1" ]; then
    echo "-- go install $2@$3" >&2
    GOBIN="$dir" go install "$2@$3" >&2
  fi
  echo "$dir/$1"
}

echo "== deploy: tools"
start=$SECONDS
HELM=$(go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION")
KUBECONFORM=$(go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION")
export HELM
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
echo "tools ready in $((SECONDS - start)) s"

echo "== deploy: container image without a daemon"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/parley" ./cmd/parley
# The machine's CA roots, as a release build would carry them.
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || ca=
image() { # layout-dir [tarball]
  (cd deploy/tools && go run ./cmd/parley-image --binary "$work/parley" --version "$version" \
    --revision "$revision" --created "$created" ${ca:+--ca-bundle "$ca"} --layout "$1" ${2:+--tarball "$2"})
}
d1=$(image "$work/oci-1" "$work/parley-image.tar")
d2=$(image "$work/oci-2")
if [ "$d1" != "$d2" ]; then echo "the image build is not reproducible: $d1 then $d2"; exit 1; fi
echo "image $d1 ($(du -h "$work/parley-image.tar" | cut -f1) as a docker load tarball), the same twice"

echo "== deploy: image inspection and run, chart configs on a real node (go test in deploy/tools)"
(cd deploy/tools && go vet ./... && go test -count=1 ./...)

echo "== deploy: helm lint and kubeconform"
chart=deploy/helm/parley
schemas="$work/schemas"
(cd deploy/tools && go run ./cmd/k8s-schemas --out "$schemas")
kubeconform() {
  "$KUBECONFORM" -strict -summary -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}
for values in "" "$chart/ci/cluster-values.yaml" "$chart/ci/external-nats-values.yaml"; do
  name=${values:+$(basename "$values" .yaml)}
  name=${name:-default}
  "$HELM" lint --strict "$chart" ${values:+-f "$values"}
  "$HELM" template parley "$chart" ${values:+-f "$values"} > "$work/$name.yaml"
  kubeconform "$work/$name.yaml"
done
# The validator has teeth: a misspelled field and a wrongly typed one fail.
sed -e 's/readOnlyRootFilesystem/readOnlyRootFileSystem/' -e 's/^  replicas: \([0-9]*\)/  replicas: "\1"/' \
  "$work/default.yaml" > "$work/broken.yaml"
if kubeconform "$work/broken.yaml" >/dev/null 2>&1; then
  echo "kubeconform accepted a misspelled field: its schemas check nothing"; exit 1
fi
# Values that would deploy what cannot work are refused.
for bad in "--set replicaCount=3" "--set terminationGracePeriodSeconds=5" "--set cluster.enabled=true"; do
  # shellcheck disable=SC2086
  if "$HELM" template parley "$chart" $bad >/dev/null 2>&1; then echo "the chart accepted $bad"; exit 1; fi
done

echo "== deploy: systemd unit"
# verify checks that ExecStart exists: the same unit, pointed at this build.
sed "s#/usr/local/bin/parley#$work/parley#" deploy/systemd/parley.service > "$work/parley.service"
out=$(systemd-analyze verify "$work/parley.service" 2>&1) || { echo "$out"; exit 1; }
# It warns (and exits 0) on a misspelled or unparsable setting: any word fails.
if [ -n "$out" ]; then echo "$out"; exit 1; fi
systemd-analyze security --offline=true --threshold=25 "$work/parley.service" | tail -1

echo "deploy checks passed in $((SECONDS - start)) s"
