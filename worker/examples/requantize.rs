//! Re-quantizes a GGUF with llama.cpp's own quantizer, to measure how another quantization of the
//! embedded model decodes (issue 15: Q4_1 has no repacked CPU kernels; Q4_0 and Q8_0 do).
//!
//! ```text
//! cargo build --workspace --all-targets
//! ~/.cache/runaii/target/debug/examples/requantize models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/smollm2.q8_0.gguf q8_0
//! ```
//!
//! Re-quantizing an already quantized model (`allow_requantize`) adds the new format's rounding to the
//! old one's: a measurement tool, not how a production model should be made (that starts from f16).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The quantizer is not wrapped by `llama-cpp-2`: this example calls llama.cpp's C function directly.
#![allow(unsafe_code)]

use std::ffi::CString;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, kind] = args.as_slice() else {
        panic!("usage: requantize INPUT.gguf OUTPUT.gguf q4_0|q8_0");
    };
    let ftype = match kind.as_str() {
        "q4_0" => llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q4_0,
        "q8_0" => llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q8_0,
        other => panic!("unknown type {other}: q4_0 or q8_0"),
    };
    let (input, output) = (CString::new(input.as_str()).unwrap(), CString::new(output.as_str()).unwrap());
    // SAFETY: `llama_model_quantize_default_params` returns a plain struct by value; the two paths are
    // NUL-terminated strings that live until the call returns, and `params` outlives it too. The backend is
    // initialised first, as llama.cpp requires.
    let failed = unsafe {
        llama_cpp_sys_2::llama_backend_init();
        let mut params = llama_cpp_sys_2::llama_model_quantize_default_params();
        params.ftype = ftype;
        params.allow_requantize = true;
        params.nthread = 2;
        llama_cpp_sys_2::llama_model_quantize(input.as_ptr(), output.as_ptr(), &params)
    };
    assert_eq!(failed, 0, "llama_model_quantize failed");
    println!("wrote {}", output.to_string_lossy());
}
