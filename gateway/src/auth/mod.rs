//! Who is calling. Customers: API keys, `rk-<public_id>-<secret>` ([`Caller`]). Staff: signed admin JWTs
//! with roles ([`staff`]). The extractors take what they need from the application's state through
//! `FromRef`, so this module never names the state.
//!
//! API keys: `rk-<public_id>-<secret>`. The public id finds the row; only SHA-256(secret) is stored and it
//! is compared in constant time. Keys never reach logs, errors or spans.

mod cache;
mod extract;
pub mod staff;

pub use cache::KeyCache;
pub use extract::{presented_key, Caller, KeyCheck, MaybeCaller};

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const PREFIX: &str = "rk-";
const PUBLIC_ID_LEN: usize = 12;

/// A key split into its parts. Borrowed from the header: never stored or printed.
#[derive(Clone, Copy)]
pub struct KeyParts<'a> {
    pub public_id: &'a str,
    secret: &'a str,
}

impl std::fmt::Debug for KeyParts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyParts").field("public_id", &self.public_id).finish_non_exhaustive()
    }
}

#[must_use]
pub fn parse(key: &str) -> Option<KeyParts<'_>> {
    let rest = key.strip_prefix(PREFIX)?;
    let (public_id, secret) = rest.split_once('-')?;
    let well_formed = public_id.len() == PUBLIC_ID_LEN
        && public_id.bytes().all(|b| b.is_ascii_alphanumeric())
        && !secret.is_empty()
        && secret.len() <= 128;
    well_formed.then_some(KeyParts { public_id, secret })
}

#[must_use]
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl KeyParts<'_> {
    /// Constant-time comparison of this key's secret against a stored hash.
    #[must_use]
    pub fn matches(&self, stored_hash: &[u8]) -> bool {
        let hash = hash_secret(self.secret);
        stored_hash.len() == hash.len() && bool::from(hash.ct_eq(stored_hash))
    }
}

/// A fresh key: the full text (shown once), its public id and the hash to store.
#[must_use]
pub fn generate() -> (String, String, [u8; 32]) {
    let mut rng = rand::thread_rng();
    let mut public = [0u8; PUBLIC_ID_LEN / 2];
    let mut secret = [0u8; 24];
    rng.fill_bytes(&mut public);
    rng.fill_bytes(&mut secret);
    let public_id = hex(&public);
    let secret = hex(&secret);
    let hash = hash_secret(&secret);
    (format!("{PREFIX}{public_id}-{secret}"), public_id, hash)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_match_only_their_hash() {
        let (key, public_id, hash) = generate();
        let parts = parse(&key).expect("parses");
        assert_eq!(parts.public_id, public_id);
        assert!(parts.matches(&hash));
        let (_, _, other) = generate();
        assert!(!parts.matches(&other));
        assert!(!parts.matches(&hash[..31]));
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for bad in ["", "sk-abc", "rk-short-secret", "rk-abcdefabcdef-", "rk-abcdef_bcdef-x"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let (key, _, _) = generate();
        let parts = parse(&key).expect("parses");
        let secret = key.rsplit('-').next().expect("has secret");
        assert!(!format!("{parts:?}").contains(secret));
    }
}
