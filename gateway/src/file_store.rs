//! Where files' bytes are kept, behind one interface: each file is a sequence of parts written in order
//! while it uploads and read back in order. The database the gateway already runs keeps them by default
//! (table `file_parts`); a fleet keeps them in an S3-compatible object store (`--files-store s3://…`),
//! one object per part, `PREFIX/files/<file id>/<part>`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, RetryConfig};
use sqlx::PgPool;

use crate::config::{FileStore, S3Args};
use crate::db::files as rows;

/// The size of every part but a file's last: what an upload holds in memory at once.
pub const PART_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("part {seq} of file {id} is missing from storage")]
    MissingPart { id: String, seq: i32 },
    #[error("object store: {0}")]
    Object(#[from] object_store::Error),
}

/// The store of files' bytes.
#[derive(Debug, Clone)]
pub enum Storage {
    /// Postgres, in `file_parts`: nothing more to run.
    Database(PgPool),
    /// An object store: objects under `prefix`.
    Object { store: Arc<dyn ObjectStore>, prefix: Path },
}

impl Storage {
    /// The store `--files-store` names, checked: an object store's bucket must answer a listing.
    ///
    /// # Errors
    /// The store's settings are incomplete, or the bucket cannot be listed with them.
    pub async fn open(store: &FileStore, s3: &S3Args, db: &PgPool) -> anyhow::Result<Self> {
        let FileStore::S3 { bucket, prefix } = store else {
            return Ok(Self::Database(db.clone()));
        };
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            // A store that does not answer fails the request in seconds, not after AWS's minutes of retries.
            .with_retry(RetryConfig { max_retries: 3, retry_timeout: Duration::from_secs(15), ..RetryConfig::default() });
        if let Some(endpoint) = &s3.endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        if let Some(region) = &s3.region {
            builder = builder.with_region(region);
        }
        if let Some(id) = &s3.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &s3.secret_access_key {
            builder = builder.with_secret_access_key(secret.expose());
        }
        let store: Arc<dyn ObjectStore> = Arc::new(builder.build()?);
        let prefix = Path::from(prefix.as_str()).child("files");
        store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| anyhow::anyhow!("the file store s3://{bucket} cannot be listed: {e}"))?;
        Ok(Self::Object { store, prefix })
    }

    /// Where part `seq` of file `id` is kept in an object store: numbered so that names sort in order.
    fn object(prefix: &Path, id: &str, seq: i32) -> Path {
        prefix.child(id).child(format!("{seq:06}"))
    }

    /// Keeps part `seq` of file `id`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn put(&self, id: &str, seq: i32, data: Bytes) -> Result<(), StorageError> {
        match self {
            Self::Database(db) => Ok(rows::put_part(db, id, seq, &data).await?),
            Self::Object { store, prefix } => {
                store.put(&Self::object(prefix, id, seq), PutPayload::from_bytes(data)).await?;
                Ok(())
            }
        }
    }

    /// File `id`'s `parts` parts, in order, read one at a time.
    pub fn read(&self, id: &str, parts: i32) -> BoxStream<'static, Result<Bytes, StorageError>> {
        match self {
            Self::Database(db) => {
                let (db, id) = (db.clone(), id.to_owned());
                futures::stream::iter(0..parts)
                    .then(move |seq| {
                        let (db, id) = (db.clone(), id.clone());
                        async move {
                            match rows::part(&db, &id, seq).await? {
                                Some(data) => Ok(Bytes::from(data)),
                                None => Err(StorageError::MissingPart { id, seq }),
                            }
                        }
                    })
                    .boxed()
            }
            Self::Object { store, prefix } => {
                let (store, prefix, id) = (Arc::clone(store), prefix.clone(), id.to_owned());
                futures::stream::iter(0..parts)
                    .then(move |seq| {
                        let (store, path) = (Arc::clone(&store), Self::object(&prefix, &id, seq));
                        let id = id.clone();
                        async move {
                            match store.get(&path).await {
                                Ok(part) => Ok(part.into_stream().map_err(StorageError::from)),
                                Err(object_store::Error::NotFound { .. }) => Err(StorageError::MissingPart { id, seq }),
                                Err(e) => Err(e.into()),
                            }
                        }
                    })
                    .try_flatten()
                    .boxed()
            }
        }
    }

    /// Forgets the bytes of files whose descriptions were deleted; forgetting what is already gone is
    /// no error.
    ///
    /// # Errors
    /// The store failed.
    pub async fn forget(&self, ids: &[String]) -> Result<(), StorageError> {
        match self {
            // Deleting the description deleted its parts (ON DELETE CASCADE).
            Self::Database(_) => Ok(()),
            Self::Object { store, prefix } => {
                for id in ids {
                    let parts = store.list(Some(&prefix.child(id.as_str()))).map_ok(|object| object.location).boxed();
                    store.delete_stream(parts).try_for_each(|_| async { Ok(()) }).await.or_else(|e| {
                        if matches!(e, object_store::Error::NotFound { .. }) {
                            Ok(())
                        } else {
                            Err(e)
                        }
                    })?;
                }
                Ok(())
            }
        }
    }
}
