//! Where files' bytes are kept, behind one interface: each file is a sequence of parts written in order
//! while it uploads and read back in order. The database the gateway already runs keeps them by default
//! (table `file_parts`).

use axum::body::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use sqlx::PgPool;

use crate::db::files as rows;

/// The size of every part but a file's last: what an upload holds in memory at once.
pub const PART_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("part {seq} of file {id} is missing from storage")]
    MissingPart { id: String, seq: i32 },
}

/// The store of files' bytes.
#[derive(Debug, Clone)]
pub enum Storage {
    /// Postgres, in `file_parts`: nothing more to run.
    Database(PgPool),
}

impl Storage {
    /// Keeps part `seq` of file `id`.
    ///
    /// # Errors
    /// The store failed.
    pub async fn put(&self, id: &str, seq: i32, data: Bytes) -> Result<(), StorageError> {
        match self {
            Self::Database(db) => Ok(rows::put_part(db, id, seq, &data).await?),
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
        }
    }

    /// Forgets the bytes of files whose descriptions were deleted.
    ///
    /// # Errors
    /// The store failed.
    pub async fn forget(&self, ids: &[String]) -> Result<(), StorageError> {
        match self {
            // Deleting the description deleted its parts (ON DELETE CASCADE).
            Self::Database(_) => {
                let _ = ids;
                Ok(())
            }
        }
    }
}
