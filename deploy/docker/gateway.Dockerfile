# syntax=docker/dockerfile:1
# runaii-gateway: built with cargo in the Rust image, run by a non-root user in Debian slim.
# Build from the repository root:
#   docker build -f deploy/docker/gateway.Dockerfile -t runaii/gateway:dev .
# The image runs `runaii-gateway serve`; `docker run … runaii/gateway:dev migrate` applies the migrations
# (they are compiled into the binary).

ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /build
# The whole workspace: cargo resolves every member's manifest even when building one package.
COPY . .
# The SQL is checked at compile time against the committed .sqlx/ (scripts/sqlx-prepare.sh), never against
# a database: there is none here.
ENV SQLX_OFFLINE=true
# The registry and target caches survive between builds (BuildKit), so a code change recompiles only the
# crates it touched. The binary is copied out because the cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/target \
    cargo build --release --locked -p runaii-gateway \
    && install -D -m 0755 target/release/runaii-gateway /out/runaii-gateway

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# curl serves the health check (compose, plain docker); nothing else is needed at run time: TLS is
# rustls with bundled roots, and the binary links only glibc.
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 runaii \
    && useradd --system --uid 10001 --gid runaii --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin runaii
COPY --from=build /out/runaii-gateway /usr/local/bin/runaii-gateway
# Listen on every interface inside the container; the published port decides who can reach it.
ENV RUNAII_GATEWAY_ADDR=0.0.0.0:8080
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/health"]
ENTRYPOINT ["runaii-gateway"]
CMD ["serve"]
