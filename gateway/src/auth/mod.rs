//! Who is calling. Customers: API keys, `rk-<public_id>-<secret>` ([`Caller`]). Staff: signed admin JWTs
//! with roles ([`staff`]). The extractors take what they need from the application's state through
//! `FromRef`, so this module never names the state.
//!
//! API keys: `rk-<public_id>-<secret>`. The public id finds the row; only SHA-256(secret) is stored and it
//! is compared in constant time. Keys never reach logs, errors or spans.
//!
//! A key issued today ends in a checksum (CRC-32 of everything before it, six base-62 characters), so a
//! made-up or mistyped key is refused without any I/O. The checksum is no secret: it spares the database
//! from noise, and a key forged with a right checksum still meets the negative cache and the per-address
//! limit on failures ([`attempts`]). Keys issued before the checksum (a secret of 48 hex digits) keep
//! working: their shape is recognised and they are looked up as before, behind the same two guards.

pub mod attempts;
mod cache;
mod extract;
mod revoked;
pub mod staff;

pub use attempts::{FailedAuth, Source};
pub use cache::{Cached, KeyCache};
pub use extract::{presented_key, Caller, KeyCheck, MaybeCaller};

use rand::distributions::{Alphanumeric, DistString};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const PREFIX: &str = "rk-";
const PUBLIC_ID_LEN: usize = 12;
/// The random part of a checksummed key's secret: 40 base-62 characters, 238 bits.
const RANDOM_LEN: usize = 40;
/// CRC-32 in base 62 (62^6 > 2^32).
const CHECKSUM_LEN: usize = 6;
/// A key issued before the checksum: 24 random bytes in lowercase hex.
const LEGACY_SECRET_LEN: usize = 48;
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// How a well-formed key was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Ends in a checksum that verified.
    Checked,
    /// Issued before keys carried a checksum.
    Legacy,
}

/// A key split into its parts. Borrowed from the header: never stored or printed.
#[derive(Clone, Copy)]
pub struct KeyParts<'a> {
    pub public_id: &'a str,
    pub shape: Shape,
    secret: &'a str,
}

impl std::fmt::Debug for KeyParts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyParts").field("public_id", &self.public_id).field("shape", &self.shape).finish_non_exhaustive()
    }
}

/// The key's parts when it has one of the two shapes (and a checksummed one verifies); `None` otherwise,
/// decided from the text alone.
#[must_use]
pub fn parse(key: &str) -> Option<KeyParts<'_>> {
    let rest = key.strip_prefix(PREFIX)?;
    let (public_id, secret) = rest.split_once('-')?;
    if public_id.len() != PUBLIC_ID_LEN || !public_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let shape = if secret.len() == RANDOM_LEN + CHECKSUM_LEN && secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
        let (body, sum) = key.split_at(key.len() - CHECKSUM_LEN);
        (base62(CRC32.checksum(body.as_bytes())).as_bytes() == sum.as_bytes()).then_some(Shape::Checked)?
    } else if secret.len() == LEGACY_SECRET_LEN && secret.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Shape::Legacy
    } else {
        return None;
    };
    Some(KeyParts { public_id, shape, secret })
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

/// A fresh key: the full text (shown once), its public id and the hash of its secret (checksum included)
/// to store.
#[must_use]
pub fn generate() -> (String, String, [u8; 32]) {
    let mut rng = rand::thread_rng();
    let mut public = [0u8; PUBLIC_ID_LEN / 2];
    rng.fill_bytes(&mut public);
    let public_id = hex(&public);
    let body = format!("{PREFIX}{public_id}-{}", Alphanumeric.sample_string(&mut rng, RANDOM_LEN));
    let key = format!("{body}{}", base62(CRC32.checksum(body.as_bytes())));
    let secret = &key[PREFIX.len() + PUBLIC_ID_LEN + 1..];
    let hash = hash_secret(secret);
    (key, public_id, hash)
}

/// `n` in six base-62 digits, most significant first.
fn base62(mut n: u32) -> String {
    let mut digits = [b'0'; CHECKSUM_LEN];
    for digit in digits.iter_mut().rev() {
        *digit = BASE62[(n % 62) as usize];
        n /= 62;
    }
    digits.iter().map(|&b| char::from(b)).collect()
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
        for bad in ["", "sk-abc", "rk-short-secret", "rk-abcdefabcdef-", "rk-abcdef_bcdef-x", "rk-abcdefabcdef-x"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_changed_character_breaks_the_checksum() {
        let (key, _, _) = generate();
        assert_eq!(parse(&key).expect("parses").shape, Shape::Checked);
        for i in [PREFIX.len(), key.len() - CHECKSUM_LEN - 1, key.len() - 1] {
            let mut bytes = key.clone().into_bytes();
            bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
            let changed = String::from_utf8(bytes).expect("ascii");
            assert!(parse(&changed).is_none(), "{i}");
        }
    }

    #[test]
    fn keys_issued_before_the_checksum_keep_their_shape() {
        let legacy = format!("rk-0123456789ab-{}", "0a".repeat(24));
        let parts = parse(&legacy).expect("parses");
        assert_eq!(parts.shape, Shape::Legacy);
        assert!(parts.matches(&hash_secret(&"0a".repeat(24))));
        assert!(parse(&format!("rk-0123456789ab-{}", "0A".repeat(24))).is_none(), "hex was lowercase");
        assert!(parse(&format!("rk-0123456789ab-{}", "0a".repeat(23))).is_none());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let (key, _, _) = generate();
        let parts = parse(&key).expect("parses");
        let secret = key.rsplit('-').next().expect("has secret");
        assert!(!format!("{parts:?}").contains(secret));
    }
}
