//! Reaching workers: which ones are ready (`registry`) and sending a request to the least loaded one,
//! retrying once elsewhere when a worker fails before answering (`client`); reading what it answers
//! within limits (`body`).

pub mod body;
mod client;
mod registry;

pub use client::{send, Limits, Upstream};
pub use registry::{Registry, WorkerStatus};
