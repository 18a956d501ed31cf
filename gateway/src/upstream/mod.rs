//! Reaching workers: which ones are ready (`registry`), which of them most likely holds the request's
//! prompt prefix in its cache (`affinity`), and sending a request to that one or the least loaded,
//! retrying once elsewhere when a worker fails before answering (`client`); reading what it answers
//! within limits (`body`); this replica's own requests in each worker's load (`load`); and what a worker
//! did for a request the gateway cut (`work`).

pub mod affinity;
pub mod body;
mod client;
mod load;
mod registry;
mod work;

pub use client::{send, Limits, Upstream};
pub use registry::{Registry, WorkerStatus};
pub use work::work_done;
