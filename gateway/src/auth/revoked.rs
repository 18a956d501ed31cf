//! The staff tokens revoked before they expire, by `jti`, in this replica's memory: checking a token costs
//! no I/O. Filled from Postgres whenever the change listener (re)connects and every 30 s, and by each
//! `token:<jti>` notice as it is heard (`changes.rs`), so a revocation reaches every replica within a
//! second or so of its commit.

use std::collections::HashSet;
use std::sync::RwLock;

#[derive(Debug, Default)]
pub struct RevokedTokens {
    jtis: RwLock<HashSet<String>>,
}

impl RevokedTokens {
    #[must_use]
    pub fn contains(&self, jti: &str) -> bool {
        self.jtis.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains(jti)
    }

    /// One revocation just heard of.
    pub fn add(&self, jti: &str) {
        self.jtis.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(jti.to_owned());
    }

    /// The whole list, as the database has it now. Reloads and notices are applied by the one listener
    /// task in turn, so a notice heard during a reload is applied after it, never lost under it.
    pub fn replace(&self, jtis: Vec<String>) {
        let mut held = self.jtis.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *held = jtis.into_iter().collect();
    }

    /// Reloads the list from the database.
    ///
    /// # Errors
    /// Database errors; the list held stays.
    pub async fn reload(&self, db: &sqlx::PgPool) -> Result<(), sqlx::Error> {
        let jtis = crate::db::admin_tokens::live(db).await?;
        self.replace(jtis);
        Ok(())
    }
}
