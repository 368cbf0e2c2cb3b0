# syntax=docker/dockerfile:1
# Parley's container image: a static binary (the web client is embedded in
# it) on distroless, run as a non-root user, data in the /data volume.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t parley .
#   docker run -p 8080:8080 -p 7070:7070 -v parley-data:/data parley
#
# The same image is built without Docker by deploy/tools/cmd/parley-image
# (what CI builds and inspects); keep the two final stages in step: a test
# in deploy/tools/ociimage compares them.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static (no cgo), no build paths, stripped: the same flags as the daemonless build.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/parley ./cmd/parley \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
ARG CREATED=
COPY --from=build /out/parley /parley
COPY deploy/container/parley.yaml /etc/parley/parley.yaml
# An empty /data owned by the server's user: a new named volume takes its owner.
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
USER 65532:65532
VOLUME /data
# HTTP + WebSocket, raw TCP, NATS routes between cluster nodes.
EXPOSE 8080/tcp 7070/tcp 6222/tcp
# distroless has no curl: the binary asks its own /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["/parley", "healthcheck"]
ENTRYPOINT ["/parley"]
CMD ["serve", "--config", "/etc/parley/parley.yaml"]
LABEL org.opencontainers.image.title="parley" \
      org.opencontainers.image.description="Parley IM server (web client embedded)" \
      org.opencontainers.image.source="https://github.com/parleyim/parley" \
      org.opencontainers.image.url="https://github.com/parleyim/parley" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
