//! `init-worker-secret`: makes the fleet's worker secret file once, for deployments that have no secret
//! store of their own (docker compose). An existing secret is never replaced: rotating it is a deliberate
//! act (see docs/security.md), not a side effect of a restart.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use rand::RngCore as _;

/// Whether a new secret was written (`false`: one was already there).
///
/// # Errors
/// When the file cannot be created, written or handed to `owner_uid`.
pub fn init(path: &Path, owner_uid: Option<u32>) -> anyhow::Result<bool> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let part = path.with_extension("part");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&part)?;
    writeln!(file, "{}", hex::encode(bytes))?;
    file.sync_all()?;
    if let Some(uid) = owner_uid {
        // The processes that read it run as this user; nobody else may.
        std::os::unix::fs::chown(&part, Some(uid), Some(uid))?;
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o400))?;
    }
    std::fs::rename(&part, path)?;
    Ok(true)
}
