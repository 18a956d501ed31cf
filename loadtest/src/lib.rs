//! `runaii-loadtest`: a load generator for OpenAI-compatible chat endpoints that checks, afterwards, that
//! the gateway's ledger agrees to the last digit with what its clients were told; and a mock worker that
//! answers instantly, to measure what the gateway itself adds to a request.

pub mod account;
pub mod body;
pub mod cli;
pub mod drive;
pub mod mix;
pub mod mock;
pub mod money;
pub mod observe;
pub mod reconcile;
pub mod send;
pub mod summary;
