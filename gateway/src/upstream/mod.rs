//! Reaching workers: which ones are ready (`registry`), which of them most likely holds the request's
//! prompt prefix in its cache (`affinity`), and sending a request to that one or the least loaded,
//! retrying once elsewhere when a worker fails before answering (`client`); reading what it answers
//! within limits (`body`); the signed headers every request to a worker carries (`signed`); what a
//! request it cut consumed there (`receipt`); this replica's own requests in each worker's load (`load`);
//! and how long a whole answer may take, from what was asked and the model's measured speed (`pace`).

pub mod affinity;
pub mod body;
mod client;
mod load;
mod pace;
mod receipt;
mod registry;
mod signed;

pub use client::{send, Ask, Fleet, Limits, Unanswered, Upstream};
pub use receipt::{Consumed, Receipt};
pub use registry::{Registry, WorkerStatus};
