//! Reaching workers: which ones are ready (`registry`), which of them most likely holds the request's
//! prompt prefix in its cache (`affinity`), and sending a request to that one or the least loaded,
//! retrying once elsewhere when a worker fails before answering (`client`); reading what it answers
//! within limits (`body`); this replica's own requests in each worker's load (`load`); and how long a
//! whole answer may take, from what was asked and the model's measured speed (`pace`).

pub mod affinity;
pub mod body;
mod client;
mod load;
mod pace;
mod registry;

pub use client::{send, Ask, Limits, Upstream};
pub use registry::{Registry, WorkerStatus};
