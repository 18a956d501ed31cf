# syntax=docker/dockerfile:1
# runaii-worker for NVIDIA GPUs (`--features cuda`), with the embedded model baked in.
# Build from the repository root (no GPU is needed to build):
#   docker build -f deploy/docker/worker-cuda.Dockerfile -t runaii/worker-cuda:dev .
# Run on a host with the NVIDIA driver and container toolkit:
#   docker run --gpus all -p 8081:8081 runaii/worker-cuda:dev
#
# llama.cpp's CUDA kernels are compiled for its default architecture list (with CUDA 12.4: PTX for 5.0,
# 6.1, 7.0, 7.5, 8.0 and 9.0, SASS for 8.6 and 8.9). Other GPUs, Hopper (H100/H200) among them, JIT-compile
# the PTX on first start; CUDA_CACHE_PATH keeps the result where a volume can hold it. The CUDA libraries
# (cudart, cuBLAS) are linked statically; libcuda comes from the host's driver (>= 550 for CUDA 12.4).

ARG CUDA_VERSION=12.4.1
ARG UBUNTU_RELEASE=22.04
ARG RUST_VERSION=1.95.0

# The model: the same step as the CPU image (scripts/fetch-model.sh checks its SHA-256).
FROM python:3.12-slim-bookworm AS model
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY scripts/fetch-model.sh scripts/fetch-model.sh
RUN scripts/fetch-model.sh

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_RELEASE} AS build
ARG RUST_VERSION
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# cmake and clang build llama.cpp (bindgen needs libclang); nvcc comes with the devel image.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       ca-certificates curl build-essential pkg-config cmake clang libclang-dev \
    && rm -rf /var/lib/apt/lists/*
# The CUDA images carry no Rust: rustup installs the same toolchain as the CPU images.
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:${PATH}
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
    | sh -s -- -y --no-modify-path --profile minimal --default-toolchain "${RUST_VERSION}"
WORKDIR /build
COPY . .
# libcuda.so is linked from the toolkit's stubs directory (found by llama-cpp-sys-2); the real one is
# mounted from the host driver at run time.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/target \
    cargo build --release --locked -p runaii-worker --features cuda \
    && install -D -m 0755 target/release/runaii-worker /out/runaii-worker

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_RELEASE} AS runtime
# libgomp1: llama.cpp's OpenMP threads; curl: the health check.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libgomp1 curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 runaii \
    && useradd --system --uid 10001 --gid runaii --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin runaii \
    && install -d -o runaii -g runaii /var/cache/runaii
COPY --from=build /out/runaii-worker /usr/local/bin/runaii-worker
COPY --from=model /src/models/SmolLM2-135M-Instruct.Q4_1.gguf /models/SmolLM2-135M-Instruct.Q4_1.gguf
# Every layer on the GPU by default; RUNAII_GPU_LAYERS=0 would run on the CPU.
ENV RUNAII_MODEL_PATH=/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    RUNAII_MODEL_ID=smollm2-135m-instruct \
    RUNAII_WORKER_ADDR=0.0.0.0:8081 \
    RUNAII_GPU_LAYERS=999 \
    CUDA_CACHE_PATH=/var/cache/runaii/cuda
USER 10001:10001
EXPOSE 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8081/health"]
ENTRYPOINT ["runaii-worker"]
