//! Creating dataset files: mode 0640, because captures hold other people's
//! traffic.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::StoreError;

/// Creates (or truncates) `path` for writing, readable by owner and group.
pub fn create_file(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| StoreError::io(path, e))
}
