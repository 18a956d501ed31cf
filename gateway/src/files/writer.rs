//! A file being written, by an upload or by the gateway for a tenant (a batch's answers): its bytes go
//! to storage in parts as they fill, each part counted against the tenant's quota before it is kept.
//! It is listed to nobody until [`Writer::finish`]; a writer dropped before that (refused, its client
//! gone) deletes what it kept.

use bytes::{Bytes, BytesMut};
use uuid::Uuid;

use crate::db::files::{self as rows, FileRow};
use crate::error::ApiError;
use crate::file_store::PART_BYTES;
use crate::state::AppState;

#[derive(Debug)]
pub struct Writer {
    state: AppState,
    tenant: Uuid,
    id: String,
    /// The most bytes the tenant's files may take with this one.
    quota: i64,
    buffer: BytesMut,
    finished: bool,
}

impl Writer {
    /// Starts file `filename` for the tenant.
    ///
    /// # Errors
    /// Database errors.
    pub async fn begin(state: &AppState, tenant: Uuid, filename: &str, quota: i64) -> Result<Self, ApiError> {
        let id = format!("file-{}", Uuid::now_v7().simple());
        rows::begin(&state.db, tenant, &id, filename).await?;
        Ok(Self { state: state.clone(), tenant, id, quota, buffer: BytesMut::new(), finished: false })
    }

    /// Adds `bytes`, keeping every part that fills.
    ///
    /// # Errors
    /// 400 `storage_quota_exceeded` when a part would pass the quota; storage errors.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), ApiError> {
        self.buffer.extend_from_slice(bytes);
        while self.buffer.len() >= PART_BYTES {
            let part = self.buffer.split_to(PART_BYTES).freeze();
            self.keep(part).await?;
        }
        Ok(())
    }

    /// Keeps the last part and shows the file: `purpose`, `lines`, kept `expires_in_s` from its creation.
    ///
    /// # Errors
    /// As [`Writer::write`].
    pub async fn finish(mut self, purpose: &str, lines: Option<i32>, expires_in_s: i64) -> Result<FileRow, ApiError> {
        if !self.buffer.is_empty() {
            let last = std::mem::take(&mut self.buffer).freeze();
            self.keep(last).await?;
        }
        let row = rows::finish(&self.state.db, self.tenant, &self.id, purpose, lines, expires_in_s)
            .await?
            .ok_or_else(|| ApiError::Internal(format!("file {} vanished before it was finished", self.id)))?;
        self.finished = true;
        Ok(row)
    }

    async fn keep(&mut self, part: Bytes) -> Result<(), ApiError> {
        let bytes = i64::try_from(part.len()).unwrap_or(i64::MAX);
        let seq = rows::reserve(&self.state.db, self.tenant, &self.id, bytes, self.quota)
            .await?
            .map_err(|used| ApiError::FileQuotaExceeded { used, max: self.quota })?;
        self.state.files.put(&self.id, seq, part).await.map_err(super::storage_error)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let (state, tenant, id) = (self.state.clone(), self.tenant, std::mem::take(&mut self.id));
        self.state.tasks.spawn(async move {
            if let Err(e) = super::discard(&state, tenant, &id).await {
                tracing::warn!(file = %id, error = ?e, "an unfinished file was not deleted; the sweep deletes it");
            }
        });
    }
}
