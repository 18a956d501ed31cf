//! Hearing what other replicas and the command line changed: one `LISTEN` connection per replica on
//! `db::notify::CHANNEL`. A catalog notice reloads the in-memory catalog; a key notice drops that key's
//! cached row; a token notice adds a revoked staff token's `jti` to the list every admin request checks
//! (the list is also reloaded whole with the catalog). Whenever the connection is (re)established the catalog is reloaded and the key cache
//! emptied, because notices sent while it was down are lost; while it is down, cached keys are trusted for
//! a second at most. A full catalog reload also runs on a timer, as a backstop.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::auth::staff::RevokedTokens;
use crate::auth::KeyCache;
use crate::catalog::Catalog;
use crate::db::notify::{CATALOG, CHANNEL, KEY_PREFIX, TOKEN_PREFIX};

/// How often the catalog is reloaded whatever was heard.
const RELOAD_EVERY: Duration = Duration::from_secs(30);
/// The pause before connecting again after the listener failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Listens until the process ends, on a connection of its own (`database_url`): held for good, it must
/// not take one of the pool's.
pub async fn listen(database_url: String, db: PgPool, catalog: Arc<Catalog>, keys: Arc<KeyCache>, revoked: Arc<RevokedTokens>) {
    let heard = Heard { catalog, keys, revoked };
    loop {
        if let Ok(mut listener) = PgListener::connect(&database_url).await {
            if listener.listen(CHANNEL).await.is_ok() {
                heard.keys.set_listening(true);
                reload(&db, &heard).await;
                hear(&mut listener, &db, &heard).await;
            }
        }
        heard.keys.set_listening(false);
        tracing::warn!("not listening for catalog and key changes; retrying");
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// What notices keep fresh.
struct Heard {
    catalog: Arc<Catalog>,
    keys: Arc<KeyCache>,
    revoked: Arc<RevokedTokens>,
}

/// Applies notices until the connection is lost.
async fn hear(listener: &mut PgListener, db: &PgPool, heard: &Heard) {
    let mut timer = tokio::time::interval(RELOAD_EVERY);
    timer.tick().await;
    loop {
        let notice = tokio::select! {
            notice = listener.try_recv() => notice,
            _ = timer.tick() => {
                reload(db, heard).await;
                continue;
            }
        };
        match notice {
            Ok(Some(notice)) => match notice.payload() {
                CATALOG => reload_catalog(db, &heard.catalog).await,
                payload => {
                    if let Some(public_id) = payload.strip_prefix(KEY_PREFIX) {
                        heard.keys.evict(public_id);
                    } else if let Some(jti) = payload.strip_prefix(TOKEN_PREFIX) {
                        heard.revoked.add(jti);
                    }
                }
            },
            // The connection dropped (the listener reconnects on the next call): what was said meanwhile
            // is lost, so start over.
            Ok(None) | Err(_) => return,
        }
    }
}

/// The catalog and the revoked staff tokens, whole.
async fn reload(db: &PgPool, heard: &Heard) {
    reload_catalog(db, &heard.catalog).await;
    if let Err(e) = heard.revoked.reload(db).await {
        tracing::warn!(error = %e, "revoked staff tokens not reloaded; the previous list stays");
    }
}

async fn reload_catalog(db: &PgPool, catalog: &Catalog) {
    if let Err(e) = catalog.reload(db).await {
        tracing::warn!(error = %e, "catalog not reloaded; the previous one stays");
    }
}
