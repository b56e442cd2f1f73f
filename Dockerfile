# Limbo in a container: a static binary (pure Go, CGO_ENABLED=0, the
# embedded SQLite included) on distroless, as a non-root user. See README
# "Production" and compose.yaml.
#
#   docker build -t limbo .
#   docker run -p 127.0.0.1:8080:8080 -v limbo-data:/data limbo serve --demo

# The build stage: the same command deploy/deploy_test.go runs, so what the
# image holds is tested even where no container engine runs.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/limbo ./cmd/limbo \
 && mkdir -p /out/data /out/anchor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/limbo /usr/local/bin/limbo
# The SQLite database (and its audit key, made beside it) live in /data;
# /anchor is for --audit-anchor. Both belong to the non-root user.
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chown=65532:65532 /out/anchor /anchor
VOLUME ["/data"]
# Inside a container Limbo listens on every interface: the port is
# published (or not) by whoever runs it.
ENV LIMBO_ADDR=0.0.0.0:8080 \
    LIMBO_DB=sqlite:/data/limbo.db
EXPOSE 8080
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/limbo"]
CMD ["serve"]
