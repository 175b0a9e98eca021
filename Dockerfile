# Dex's three binaries in one small image: dexd (a cluster node), dexctl (the
# CLI) and dexworker (the demo Worker). Static, so the runtime image has no
# libc; it runs as the unprivileged user "nonroot" (65532) of the distroless
# image, which also brings CA certificates and /etc/passwd.
#
#   docker build -t dex .
#   docker run --rm dex --help                      # dexd
#   docker run --rm --entrypoint dexctl dex --help

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/dexd ./cmd/dexctl ./cmd/dexworker
RUN mkdir -p /data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dexd /out/dexctl /out/dexworker /usr/local/bin/
# dexd's data dir, owned by the runtime user so that a volume mounted here
# starts writable (Docker copies the ownership into a new volume).
COPY --from=build --chown=65532:65532 /data /var/lib/dex
USER 65532:65532
# Dex's ports (deploy/README.md, "Ports"): raft, gRPC, HTTP.
EXPOSE 7001 7101 7201
ENTRYPOINT ["/usr/local/bin/dexd"]
