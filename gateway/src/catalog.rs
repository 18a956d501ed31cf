//! The catalog as every request reads it: enabled models and which tenants may use the private ones,
//! held in memory so that no request waits on Postgres to learn its model and price.
//!
//! A change (`ops::catalog`, `ops::access`) notifies every replica in its transaction (`db::notify`); the
//! listener (`changes.rs`) reloads the snapshot then. A full reload also runs on a timer, and whenever
//! the listener reconnects, since notifications sent meanwhile are lost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use sqlx::PgPool;
use uuid::Uuid;

use crate::db::models::{self, ModelRow};

#[derive(Debug, Default)]
struct Snapshot {
    /// Enabled models by id.
    models: HashMap<String, ModelRow>,
    /// (tenant, model) pairs granted access to a private model.
    access: HashSet<(Uuid, String)>,
}

impl Snapshot {
    fn visible(&self, model: &ModelRow, tenant: Option<Uuid>) -> bool {
        model.public || tenant.is_some_and(|t| self.access.contains(&(t, model.id.clone())))
    }
}

/// The in-memory catalog of one replica.
#[derive(Debug, Default)]
pub struct Catalog {
    snapshot: RwLock<Arc<Snapshot>>,
}

impl Catalog {
    /// Reads the whole catalog and replaces the snapshot.
    ///
    /// # Errors
    /// Database errors; the previous snapshot stays.
    pub async fn reload(&self, db: &PgPool) -> Result<(), sqlx::Error> {
        let (rows, access) = tokio::try_join!(models::list_enabled(db), models::all_access(db))?;
        let snapshot = Snapshot { models: rows.into_iter().map(|m| (m.id.clone(), m)).collect(), access: access.into_iter().collect() };
        *self.snapshot.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(snapshot);
        Ok(())
    }

    fn current(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// One enabled model, if the tenant may use it (public ones to anyone, private ones to the tenants
    /// granted them; without a tenant, public ones only).
    #[must_use]
    pub fn find_visible(&self, id: &str, tenant: Option<Uuid>) -> Option<ModelRow> {
        let snapshot = self.current();
        snapshot.models.get(id).filter(|m| snapshot.visible(m, tenant)).cloned()
    }

    /// Every enabled model the tenant may use, by id.
    #[must_use]
    pub fn list_visible(&self, tenant: Option<Uuid>) -> Vec<ModelRow> {
        let snapshot = self.current();
        let mut rows: Vec<ModelRow> = snapshot.models.values().filter(|m| snapshot.visible(m, tenant)).cloned().collect();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        rows
    }
}
