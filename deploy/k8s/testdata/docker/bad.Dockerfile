# A Dockerfile with every defect the checks look for; deploy/k8s's TestDockerfileFixture.
FROM golang:latest AS build
WORKDIR /src
COPY go.work go.work.sum ./
COPY proto/gen/ proto/gen/
COPY services/ services/
COPY gateway/ gateway/
COPY cmd/go.mod cmd/go.sum cmd/
COPY deploy/k8s/go.mod deploy/k8s/go.sum deploy/k8s/
RUN go build -o /out/accounts ./services/accounts/cmd/nothere

FROM gcr.io/distroless/static
COPY --from=build /out/accounts /usr/local/bin/accounts
USER root
ENTRYPOINT ["/bin/accounts"]
