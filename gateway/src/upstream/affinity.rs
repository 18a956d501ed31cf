//! Which worker most likely holds a request's prompt prefix in its cache. A worker keeps the KV state of
//! prompts it has read and reuses the longest prefix a new request shares with one of them; that only
//! helps if requests sharing a prefix reach the same worker. So each request gets an affinity key, and
//! among the model's ready workers the one with the highest rendezvous score for that key comes first —
//! unless its slots are all busy, when the least-loaded order stands (a cache hit is not worth a queue).
//!
//! The key is the caller's OpenAI `prompt_cache_key` when it sends one, else the first
//! [`PREFIX_BYTES`] bytes of what the worker renders first: the tools, then the messages (the system
//! prompt, with the gateway's schema guide, and on). Either way it is hashed with the tenant and the
//! model, so a tenant's key steers only its own requests: another tenant sending the same key or prompt
//! lands wherever its own hash says. Rendezvous hashing keeps the choice stable as workers come and go:
//! only the keys of a worker that left move, and a new worker takes a fair share.
//!
//! Kept apart from `registry.rs` (which knows who is ready) and `client.rs` (which sends): this only
//! orders.

use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::WorkerStatus;

/// Leading bytes of the rendered request that choose the worker: about 250–500 tokens. Requests that
/// share less than this are spread by load (what they would gain from a cache is small); requests that
/// share more (a long system prompt, the earlier turns of a conversation) meet on one worker.
pub const PREFIX_BYTES: usize = 2048;

/// The affinity key of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Affinity([u8; 32]);

impl Affinity {
    /// The key of a (final, as-sent) chat request of `tenant`.
    #[must_use]
    pub fn of(tenant: Uuid, body: &Value) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"runaii-affinity-v1\0");
        hash.update(tenant.as_bytes());
        let model = body["model"].as_str().unwrap_or_default();
        hash.update((model.len() as u64).to_be_bytes());
        hash.update(model.as_bytes());
        match body.get("prompt_cache_key").and_then(Value::as_str).filter(|k| !k.is_empty()) {
            Some(key) => {
                hash.update(b"key\0");
                hash.update(key.as_bytes());
            }
            None => {
                hash.update(b"prefix\0");
                hash.update(leading_bytes(body));
            }
        }
        Self(hash.finalize().into())
    }

    /// The worker's rendezvous score for this key: the highest score wins.
    fn score(&self, url: &str) -> u64 {
        let digest = Sha256::new().chain_update(self.0).chain_update(url.as_bytes()).finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    }

    /// The worker of `workers` that most likely holds this key's prefix, whatever its load.
    #[must_use]
    pub fn preferred<'a>(&self, workers: &'a [WorkerStatus]) -> Option<&'a WorkerStatus> {
        // Ties (two entries for one URL) go to the first, so the choice never depends on the list's order
        // beyond that.
        workers.iter().rev().max_by_key(|w| self.score(&w.url))
    }

    /// `workers` (least loaded first) in the order to try them: the preferred worker first when it has a
    /// free slot, otherwise the order as given. Whether the preference held is returned too.
    #[must_use]
    pub fn order(&self, mut workers: Vec<WorkerStatus>) -> (Vec<WorkerStatus>, Choice) {
        let Some(preferred) = self.preferred(&workers).map(|w| w.url.clone()) else {
            return (workers, Choice::None);
        };
        let Some(at) = workers.iter().position(|w| w.url == preferred) else {
            return (workers, Choice::None);
        };
        if is_full(&workers[at]) {
            return (workers, Choice::Busy);
        }
        let chosen = workers.remove(at);
        workers.insert(0, chosen);
        (workers, Choice::Preferred)
    }
}

/// How a request was routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// To the worker its key prefers.
    Preferred,
    /// That worker's slots were full: to the least loaded instead.
    Busy,
    /// No worker to prefer.
    None,
}

impl Choice {
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Preferred => "preferred",
            Self::Busy => "busy_fallback",
            Self::None => "none",
        }
    }
}

/// Every slot busy (or a queue already waiting): a request sent there would wait.
fn is_full(w: &WorkerStatus) -> bool {
    w.queue_depth > 0 || (w.slots > 0 && w.slots_busy >= w.slots)
}

/// The first [`PREFIX_BYTES`] of the tools and messages as JSON, in the order a chat template renders
/// them.
fn leading_bytes(body: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES);
    let parts = body.get("tools").into_iter().chain(body.get("messages").and_then(Value::as_array).into_iter().flatten());
    for part in parts {
        // A Value always serializes; a failure would only shorten the key.
        let Ok(bytes) = serde_json::to_vec(part) else { break };
        let room = PREFIX_BYTES - out.len();
        out.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if out.len() == PREFIX_BYTES {
            break;
        }
        out.push(b'\n');
    }
    out.truncate(PREFIX_BYTES);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn worker(n: usize, slots_busy: u64) -> WorkerStatus {
        WorkerStatus { url: format!("http://10.0.0.{n}:8081"), model: "m".into(), slots: 4, slots_busy, queue_depth: 0 }
    }

    fn fleet(n: usize) -> Vec<WorkerStatus> {
        (1..=n).map(|i| worker(i, 0)).collect()
    }

    fn request(system: &str, user: &str) -> Value {
        json!({"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]})
    }

    const TENANT: Uuid = Uuid::from_u128(1);
    const OTHER: Uuid = Uuid::from_u128(2);

    #[test]
    fn a_shared_long_prefix_goes_to_one_worker_whatever_follows() {
        let system = "You extract invoices. ".repeat(200); // ~4 KB, past PREFIX_BYTES
        let workers = fleet(5);
        let first = Affinity::of(TENANT, &request(&system, "invoice A")).preferred(&workers).unwrap().url.clone();
        for user in ["invoice B", "invoice C", &"long document ".repeat(500)] {
            let key = Affinity::of(TENANT, &request(&system, user));
            assert_eq!(key.preferred(&workers).unwrap().url, first, "{user}");
        }
        // The same key, computed again (another replica, a later request): the same worker.
        assert_eq!(Affinity::of(TENANT, &request(&system, "x")), Affinity::of(TENANT, &request(&system, "y")));
    }

    #[test]
    fn short_different_prompts_spread_over_the_workers() {
        let workers = fleet(4);
        let chosen: std::collections::HashSet<String> = (0..64)
            .map(|i| Affinity::of(TENANT, &request("be brief", &format!("question {i}"))).preferred(&workers).unwrap().url.clone())
            .collect();
        assert!(chosen.len() >= 3, "64 unrelated prompts over 4 workers reached only {chosen:?}");
    }

    #[test]
    fn the_choice_is_stable_when_the_list_changes_order_or_another_worker_leaves() {
        let key = Affinity::of(TENANT, &request("s", "u"));
        let workers = fleet(6);
        let preferred = key.preferred(&workers).unwrap().url.clone();
        let mut reversed = workers.clone();
        reversed.reverse();
        assert_eq!(key.preferred(&reversed).unwrap().url, preferred);
        let without_another: Vec<WorkerStatus> =
            workers.iter().filter(|w| w.url == preferred || w.url.ends_with(".3:8081")).cloned().collect();
        assert_eq!(key.preferred(&without_another).unwrap().url, preferred, "only the keys of a worker that left move");
    }

    #[test]
    fn the_preferred_worker_comes_first_unless_its_slots_are_full() {
        let key = Affinity::of(TENANT, &request("s", "u"));
        let workers = fleet(3);
        let preferred = key.preferred(&workers).unwrap().url.clone();
        let (order, choice) = key.order(workers.clone());
        assert_eq!((order[0].url.as_str(), choice), (preferred.as_str(), Choice::Preferred));
        assert_eq!(order.len(), 3);

        // Full: the least-loaded order as given.
        let busy: Vec<WorkerStatus> =
            workers.iter().map(|w| if w.url == preferred { WorkerStatus { slots_busy: 4, ..w.clone() } } else { w.clone() }).collect();
        let (order, choice) = key.order(busy.clone());
        assert_eq!(choice, Choice::Busy);
        assert_eq!(order.iter().map(|w| &w.url).collect::<Vec<_>>(), busy.iter().map(|w| &w.url).collect::<Vec<_>>());
        // A queue waiting counts as full too.
        let queued: Vec<WorkerStatus> =
            workers.iter().map(|w| if w.url == preferred { WorkerStatus { queue_depth: 1, ..w.clone() } } else { w.clone() }).collect();
        assert_eq!(key.order(queued).1, Choice::Busy);
        // One slot busy of four is not full.
        let partly: Vec<WorkerStatus> =
            workers.iter().map(|w| if w.url == preferred { WorkerStatus { slots_busy: 3, ..w.clone() } } else { w.clone() }).collect();
        assert_eq!(key.order(partly).0[0].url, preferred);
        assert_eq!(key.order(Vec::new()).1, Choice::None);
    }

    #[test]
    fn prompt_cache_key_decides_and_is_scoped_to_the_tenant() {
        let mut a = request("one prompt", "u1");
        let mut b = request("another prompt entirely", "u2");
        a["prompt_cache_key"] = json!("customer-42");
        b["prompt_cache_key"] = json!("customer-42");
        assert_eq!(Affinity::of(TENANT, &a), Affinity::of(TENANT, &b), "the key, not the prompt, decides");
        assert_ne!(Affinity::of(TENANT, &a), Affinity::of(OTHER, &a), "another tenant's same key is another key");
        // Across many keys, two tenants using the same key land on different workers about as often as chance says.
        let workers = fleet(4);
        let same = (0..200)
            .filter(|i| {
                let mut r = request("s", "u");
                r["prompt_cache_key"] = json!(format!("k{i}"));
                Affinity::of(TENANT, &r).preferred(&workers).unwrap().url == Affinity::of(OTHER, &r).preferred(&workers).unwrap().url
            })
            .count();
        assert!((20..=80).contains(&same), "{same} of 200 keys put both tenants on one worker (chance: about 50)");
        // An empty key is no key.
        let mut empty = request("s", "u");
        empty["prompt_cache_key"] = json!("");
        assert_eq!(Affinity::of(TENANT, &empty), Affinity::of(TENANT, &request("s", "u")));
        // Prefix keys are scoped too, and so is the model.
        assert_ne!(Affinity::of(TENANT, &request("s", "u")), Affinity::of(OTHER, &request("s", "u")));
        let mut other_model = request("s", "u");
        other_model["model"] = json!("m2");
        assert_ne!(Affinity::of(TENANT, &request("s", "u")), Affinity::of(TENANT, &other_model));
    }

    #[test]
    fn the_prefix_is_bounded_and_starts_with_the_tools() {
        let body = json!({"model": "m", "tools": [{"type": "function", "function": {"name": "f"}}],
                          "messages": [{"role": "user", "content": "x".repeat(10_000)}]});
        let bytes = leading_bytes(&body);
        assert_eq!(bytes.len(), PREFIX_BYTES);
        assert!(bytes.starts_with(br#"[{"type":"function""#));
        let mut other_tools = body.clone();
        other_tools["tools"][0]["function"]["name"] = json!("g");
        assert_ne!(Affinity::of(TENANT, &body), Affinity::of(TENANT, &other_tools));
    }
}
