# The connect service (gRPC). `connect migrate` applies its schema migrations and exits.
# Build from the repository root (the build context):
#   docker build -f deploy/docker/connect.Dockerfile -t registry.example.com/mnv/connect:0.1.0 .
# deploy/k8s's tests check this file: pinned base images, a non-root final user, a build path
# that exists, and a copied file set from which the binary resolves (go list in a copy of it).

# The builder: the Go release the repository is tested with (go.mod says go 1.26).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# The workspace as make build sees it, so the image gets the dependency versions that make test
# tested: go.work names every module, so each needs at least its go.mod; only the modules this
# binary imports need their sources.
COPY go.work go.work.sum ./
COPY proto/gen/ proto/gen/
COPY services/ services/
COPY gateway/ gateway/
COPY cmd/go.mod cmd/go.sum cmd/
COPY tests/go.mod tests/go.sum tests/
COPY deploy/k8s/go.mod deploy/k8s/go.sum deploy/k8s/
# A static binary: no C library, so it runs on an empty base image.
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/connect ./services/connect/cmd/connect

# The runtime: nothing but the binary and the CA certificates (for TLS to PostgreSQL and, for
# connect, to CRM endpoints). No shell, no package manager, no user database: the user is
# numeric, 65532, as the Kubernetes manifests' securityContext expects.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/connect /usr/local/bin/connect
USER 65532:65532
EXPOSE 9093 9100
ENTRYPOINT ["/usr/local/bin/connect"]
