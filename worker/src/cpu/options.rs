//! ggml's CMake options that add instructions to its CPU kernels (ggml/src/ggml-cpu/CMakeLists.txt), and
//! `GGML_NATIVE`, whose instructions are whatever the build machine had. Shared by `build.rs`, which
//! records which of them llama.cpp was configured with, and `cpu.rs`'s tests, which check that each maps
//! to the CPU features the worker checks at start.

pub const GGML_CPU_OPTIONS: [&str; 16] = [
    "GGML_NATIVE",
    "GGML_SSE42",
    "GGML_AVX",
    "GGML_F16C",
    "GGML_FMA",
    "GGML_AVX2",
    "GGML_BMI2",
    "GGML_AVX_VNNI",
    "GGML_AVX512",
    "GGML_AVX512_VBMI",
    "GGML_AVX512_VNNI",
    "GGML_AVX512_BF16",
    "GGML_AMX_TILE",
    "GGML_AMX_INT8",
    "GGML_AMX_BF16",
    "GGML_CPU_ALL_VARIANTS",
];
