//! The CPU llama.cpp was built for. Its kernels are compiled for a set of x86 features chosen at build
//! time (`RUNAII_LLAMA_CPU` in scripts/lib.sh; `build.rs` records the set). On a CPU without one of them
//! the first matrix product dies with SIGILL, in whichever request comes first; the worker checks at
//! start instead and says what is missing. Only ggml's CPU kernels get these instructions: the checks
//! below run before the model is loaded, and so before any kernel.

/// The list `build.rs` records from; the tests check that each option maps to features.
#[cfg(test)]
mod options;

use std::fmt;

/// ggml's options that were on when this worker was built, comma-separated.
const BUILT_WITH: &str = env!("RUNAII_LLAMA_CPU_OPTIONS");

/// The worker's llama.cpp needs CPU features this machine does not offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedCpu {
    pub missing: Vec<&'static str>,
}

impl std::error::Error for UnsupportedCpu {}

impl fmt::Display for UnsupportedCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this worker's llama.cpp was built for CPU features this machine lacks ({}); build it for this \
             CPU: RUNAII_LLAMA_CPU=auto on a machine like this one, or x86-64-v3 or generic (scripts/lib.sh)",
            self.missing.join(", ")
        )
    }
}

/// The ggml options this worker was built with, e.g. `["GGML_AVX2", "GGML_AVX512"]`; empty for the
/// x86-64 baseline.
pub fn built_with() -> impl Iterator<Item = &'static str> {
    BUILT_WITH.split(',').filter(|o| !o.is_empty())
}

/// # Errors
/// [`UnsupportedCpu`] naming every feature the build needs and this CPU (or its kernel) does not give.
pub fn check() -> Result<(), UnsupportedCpu> {
    let missing = missing(built_with(), detected);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(UnsupportedCpu { missing })
    }
}

/// One line for the start-up log: what the kernels were compiled for.
#[must_use]
pub fn describe() -> String {
    let options: Vec<&str> = built_with().map(|o| o.trim_start_matches("GGML_")).collect();
    if options.is_empty() {
        "x86-64 baseline (no GGML CPU options)".to_owned()
    } else if options.contains(&"NATIVE") {
        "the build machine's CPU (GGML_NATIVE): runs only on CPUs with the same features".to_owned()
    } else {
        options.join(" ").to_ascii_lowercase()
    }
}

/// The features the build needs that `has` says are absent. Options whose features cannot be known
/// (`NATIVE`: whatever the build machine had; `CPU_ALL_VARIANTS`: chosen at run time by ggml itself)
/// need nothing here.
fn missing(options: impl Iterator<Item = &'static str>, has: impl Fn(&str) -> bool) -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = options.flat_map(|o| needs(o).iter().copied()).filter(|f| !has(f)).collect();
    missing.dedup();
    missing
}

/// The CPU features (as `is_x86_feature_detected!` names them) behind each ggml option, from the
/// compiler flags ggml adds for it.
fn needs(option: &str) -> &'static [&'static str] {
    match option {
        "GGML_SSE42" => &["sse4.2"],
        "GGML_AVX" => &["avx"],
        "GGML_F16C" => &["f16c"],
        "GGML_FMA" => &["fma"],
        "GGML_AVX2" => &["avx2"],
        "GGML_BMI2" => &["bmi2"],
        "GGML_AVX_VNNI" => &["avxvnni"],
        "GGML_AVX512" => &["avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"],
        "GGML_AVX512_VBMI" => &["avx512vbmi"],
        "GGML_AVX512_VNNI" => &["avx512vnni"],
        "GGML_AVX512_BF16" => &["avx512bf16"],
        // AMX also needs the kernel's permission (arch_prctl); std cannot ask, so an AMX build is refused.
        "GGML_AMX_TILE" | "GGML_AMX_INT8" | "GGML_AMX_BF16" => &["amx"],
        _ => &[],
    }
}

/// Whether this CPU and its operating system support `feature` (std checks both: an AVX-512 CPU whose
/// kernel does not save the ZMM registers reports no AVX-512).
#[cfg(target_arch = "x86_64")]
fn detected(feature: &str) -> bool {
    match feature {
        "sse4.2" => std::arch::is_x86_feature_detected!("sse4.2"),
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
        "avxvnni" => std::arch::is_x86_feature_detected!("avxvnni"),
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx512cd" => std::arch::is_x86_feature_detected!("avx512cd"),
        "avx512vl" => std::arch::is_x86_feature_detected!("avx512vl"),
        "avx512dq" => std::arch::is_x86_feature_detected!("avx512dq"),
        "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
        "avx512vbmi" => std::arch::is_x86_feature_detected!("avx512vbmi"),
        "avx512vnni" => std::arch::is_x86_feature_detected!("avx512vnni"),
        "avx512bf16" => std::arch::is_x86_feature_detected!("avx512bf16"),
        _ => false,
    }
}

/// Elsewhere the x86 options are never set (scripts/lib.sh leaves them off), so nothing is needed.
#[cfg(not(target_arch = "x86_64"))]
fn detected(_feature: &str) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_for_avx512_vnni_names_what_a_cpu_without_it_lacks() {
        let avx2_only = |f: &str| matches!(f, "sse4.2" | "avx" | "f16c" | "fma" | "avx2" | "bmi2");
        let options = ["GGML_AVX2", "GGML_AVX512", "GGML_AVX512_VNNI"].into_iter();
        assert_eq!(missing(options, avx2_only), vec!["avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512vnni"]);
    }

    #[test]
    fn a_baseline_build_runs_anywhere() {
        assert!(missing(std::iter::empty(), |_| false).is_empty());
        assert!(missing(["GGML_NATIVE"].into_iter(), |_| false).is_empty());
    }

    #[test]
    fn an_amx_build_is_refused_because_the_kernel_may_not_grant_amx() {
        assert_eq!(missing(["GGML_AMX_INT8"].into_iter(), |f| f != "amx"), vec!["amx"]);
    }

    #[test]
    fn every_feature_a_build_can_need_is_one_the_detector_knows() {
        // Every option but the two whose features cannot be known maps to features.
        for option in options::GGML_CPU_OPTIONS.into_iter().filter(|o| !matches!(*o, "GGML_NATIVE" | "GGML_CPU_ALL_VARIANTS")) {
            assert!(!needs(option).is_empty(), "{option} maps to no feature");
        }
        // The worker under test was built for the machine it runs on (CI builds and tests on one machine).
        assert_eq!(check(), Ok(()), "built with {BUILT_WITH}");
    }
}
