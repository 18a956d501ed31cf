//! What each request consumed, kept a short while after it ends: when a gateway cuts a request or its
//! client leaves, the gateway asks for it (`GET /v1/requests/{id}/usage`) to bill the work done — the
//! prompt tokens read and the tokens generated — which no chunk may yet have carried.
//!
//! A receipt is filed under the request's cache scope and id, so one tenant's request id never reads
//! another's. It ends when its job is dropped: finished, failed, abandoned, or skipped in the queue
//! because its client had left (then it read nothing). The store keeps the newest `KEPT` receipts.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use runaii_wire::cache_scope::CacheScope;

/// Receipts kept, the oldest forgotten first: many minutes of traffic at any rate one worker serves.
const KEPT: usize = 16_384;

/// Longest request id a receipt is filed under (the gateway's are ~40 characters).
const MAX_ID_LEN: usize = 128;

#[derive(Debug, Default)]
struct Receipt {
    prompt_read: AtomicU32,
    cached: AtomicU32,
    generated: AtomicU32,
    ended: AtomicBool,
}

/// A receipt as read: counts so far, and whether the request has ended (they are then final).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Consumed {
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub completion_tokens: u32,
    pub ended: bool,
}

/// The engine's end of one receipt, carried by the job (shared by its sequences). Dropping it ends the
/// receipt.
#[derive(Debug)]
pub struct ReceiptWriter(Arc<Receipt>);

impl ReceiptWriter {
    /// The counts of one of the request's sequences when it leaves: the prompt is read once (the
    /// sequences of a request of several answers share it), every answer's tokens count.
    pub fn record(&self, prompt_read: u32, cached: u32, generated: u32) {
        self.0.prompt_read.fetch_max(prompt_read, Ordering::Relaxed);
        self.0.cached.fetch_max(cached, Ordering::Relaxed);
        self.0.generated.fetch_add(generated, Ordering::Relaxed);
    }
}

impl Drop for ReceiptWriter {
    fn drop(&mut self) {
        // Release: whoever sees `ended` sees the counts recorded before it.
        self.0.ended.store(true, Ordering::Release);
    }
}

type Key = (CacheScope, Box<str>);

/// Every receipt this worker keeps.
#[derive(Debug, Default)]
pub struct Receipts {
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    by_key: HashMap<Key, Arc<Receipt>>,
    order: VecDeque<Key>,
}

impl Receipts {
    /// Opens the receipt of a request; `None` for an id too long to file.
    pub fn open(&self, scope: &CacheScope, request_id: &str) -> Option<ReceiptWriter> {
        if request_id.is_empty() || request_id.len() > MAX_ID_LEN {
            return None;
        }
        let receipt = Arc::new(Receipt::default());
        let key: Key = (scope.clone(), request_id.into());
        let mut kept = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.by_key.insert(key.clone(), Arc::clone(&receipt)).is_none() {
            kept.order.push_back(key);
        }
        while kept.order.len() > KEPT {
            if let Some(oldest) = kept.order.pop_front() {
                kept.by_key.remove(&oldest);
            }
        }
        Some(ReceiptWriter(receipt))
    }

    /// The receipt of a request of `scope`, if it is kept.
    pub fn read(&self, scope: &CacheScope, request_id: &str) -> Option<Consumed> {
        let kept = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let receipt = kept.by_key.get(&(scope.clone(), request_id.into()))?;
        let ended = receipt.ended.load(Ordering::Acquire);
        Some(Consumed {
            prompt_tokens: receipt.prompt_read.load(Ordering::Relaxed),
            cached_tokens: receipt.cached.load(Ordering::Relaxed),
            completion_tokens: receipt.generated.load(Ordering::Relaxed),
            ended,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_is_read_only_in_its_scope_and_ends_with_its_writer() {
        let receipts = Receipts::default();
        let (a, b) = (CacheScope::parse("tenant-a").unwrap(), CacheScope::parse("tenant-b").unwrap());
        let writer = receipts.open(&a, "chatcmpl-1").unwrap();
        writer.record(120, 100, 7);
        assert_eq!(receipts.read(&a, "chatcmpl-1").map(|c| c.ended), Some(false));
        assert_eq!(receipts.read(&b, "chatcmpl-1"), None, "another tenant's scope reads nothing");
        drop(writer);
        assert_eq!(
            receipts.read(&a, "chatcmpl-1"),
            Some(Consumed { prompt_tokens: 120, cached_tokens: 100, completion_tokens: 7, ended: true })
        );
        assert!(receipts.open(&a, &"x".repeat(129)).is_none());
    }

    #[test]
    fn the_oldest_receipts_are_forgotten() {
        let receipts = Receipts::default();
        let scope = CacheScope::default();
        for n in 0..=KEPT {
            drop(receipts.open(&scope, &format!("r{n}")));
        }
        assert_eq!(receipts.read(&scope, "r0"), None);
        assert!(receipts.read(&scope, &format!("r{KEPT}")).is_some());
    }
}
