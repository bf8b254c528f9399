# syntax=docker/dockerfile:1
# Multi-stage build of the service binaries: order-gateway, trading-worker, card-polling, shop-sim.
#   docker build -t rakuten .
#   docker run --rm rakuten order-gateway serve --help
# The runtime image is distroless (glibc + CA certificates, no shell, no package manager) and runs
# as the unprivileged user `nonroot` (uid 65532). Failpoints are not compiled in (release build
# without the `failpoints` feature, D-failpoints-feature-only).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# The registry and target/ are cache mounts: a rebuild after a source change reuses compiled
# dependencies.
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p order-gateway -p trading-worker -p card-polling -p shop-sim \
 && mkdir -p /out /empty-data \
 && cp target/release/order-gateway target/release/trading-worker \
       target/release/card-polling target/release/shop-sim /out/

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/ /usr/local/bin/
# Relative default paths (data/gateway.db, data/evidence, …) land in /data/data, writable by
# nonroot; mount a volume on /data to keep them.
COPY --from=build --chown=65532:65532 /empty-data /data
WORKDIR /data
USER nonroot:nonroot
# order-gateway 31109, card-polling 8090, shop-sim 31120; the trading worker listens on nothing.
EXPOSE 31109 8090 31120
ENTRYPOINT ["/usr/local/bin/order-gateway"]
CMD ["serve"]
