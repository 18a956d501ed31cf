//! Tells the worker which x86 features llama.cpp's CPU kernels are compiled for, so that it can refuse a
//! CPU that lacks one of them before llama.cpp runs an instruction it does not have (src/cpu.rs).
//! llama-cpp-sys-2 passes every `GGML_*` variable of the build's environment to llama.cpp's CMake
//! (scripts/lib.sh sets them from `RUNAII_LLAMA_CPU`); what CMake kept is read from its cache.

#[path = "src/cpu/options.rs"]
mod options;

use options::GGML_CPU_OPTIONS;

fn main() {
    // What llama.cpp was really configured with: llama-cpp-sys-2 configures CMake once per build
    // directory and never again, so its cache, not this build's environment, says what the kernels use.
    // DEP_LLAMA_GGML_CMAKE_DIR is <its OUT_DIR>/lib/cmake; the cache is <its OUT_DIR>/build.
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_GGML_CMAKE_DIR");
    let cache = std::env::var("DEP_LLAMA_GGML_CMAKE_DIR")
        .ok()
        .and_then(|dir| std::path::Path::new(&dir).parent()?.parent().map(|out| out.join("build").join("CMakeCache.txt")))
        .and_then(|path| {
            println!("cargo:rerun-if-changed={}", path.display());
            std::fs::read_to_string(path).ok()
        });
    let mut on = Vec::new();
    for option in GGML_CPU_OPTIONS {
        println!("cargo:rerun-if-env-changed={option}");
        let value = match &cache {
            Some(cache) => cached(cache, option),
            None => std::env::var(option).unwrap_or_default(),
        };
        if is_on(&value) {
            on.push(option);
        }
    }
    println!("cargo:rustc-env=RUNAII_LLAMA_CPU_OPTIONS={}", on.join(","));

    // Whether ggml threads with OpenMP: asked for (GGML_OPENMP) and found by CMake (OpenMP_C_FLAGS), so
    // that libgomp is linked and the engine can change the team size at run time (src/engine/threads.rs).
    println!("cargo::rustc-check-cfg=cfg(ggml_openmp)");
    let openmp = cache.as_deref().is_some_and(|c| is_on(&cached(c, "GGML_OPENMP")) && !cached(c, "OpenMP_C_FLAGS").is_empty());
    if openmp {
        println!("cargo:rustc-cfg=ggml_openmp");
    }
}

/// CMake's true constants; anything else (unset, OFF, 0, FALSE) is off.
fn is_on(value: &str) -> bool {
    matches!(value.to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE" | "YES" | "Y")
}

/// The value of `option` in a CMakeCache.txt (`GGML_AVX2:BOOL=ON`), empty when absent.
fn cached(cache: &str, option: &str) -> String {
    cache
        .lines()
        .find_map(|line| line.strip_prefix(option)?.strip_prefix(':')?.split_once('=').map(|(_, value)| value.trim().to_owned()))
        .unwrap_or_default()
}
