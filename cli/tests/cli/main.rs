//! The `runaii` binary against a real stack (worker on the embedded model, Postgres, Redis, the gateway
//! binary): exit statuses, stdout holding only the answer, the MCP tool loop with a real MCP server
//! process, chat, and the listing commands. The model is tiny, so the assertions are on what it cannot
//! break: statuses, JSON validating against its schema, calls counted by the server, token counts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod batch;
mod chat;
mod listing;
mod mcp;
mod run;
mod stack;
