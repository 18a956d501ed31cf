//! Reaching workers: which ones are ready (`registry`) and sending a request to the least loaded one,
//! retrying once elsewhere when a worker fails before answering (`client`).

mod client;
mod registry;

pub use client::{send, Upstream};
pub use registry::{Registry, WorkerStatus};
