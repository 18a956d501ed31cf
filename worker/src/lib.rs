//! runaii worker: one model replica behind an OpenAI-compatible HTTP API.
//!
//! `engine` owns llama.cpp (one thread, continuous batching), `constraint` compiles and enforces
//! JSON Schema / GBNF constraints, `completion` turns requests into jobs, `http` is the thin surface,
//! `cpu` refuses a CPU that lacks what llama.cpp's kernels were compiled for, `work_done` keeps what recent
//! requests cost the engine for a gateway that cut one. `error` is the one error
//! type, below everything that returns it, so no module imports its caller.

pub mod announce;
pub mod app;
pub mod completion;
pub mod config;
pub mod constraint;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod http;
pub mod model_file;
pub mod template;
pub mod tools;
pub mod work_done;

pub use app::Application;
pub use config::Settings;
