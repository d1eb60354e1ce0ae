//! Creating dataset files: mode 0640, because captures hold other people's
//! traffic.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::FileError;

/// Creates `path` and any missing parents, open to owner and group only
/// (0750): a capture is as private as the traffic in it.
pub fn create_dirs(path: &Path) -> Result<(), FileError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(path)
        .map_err(|e| FileError::io(path, e))
}

/// Creates (or truncates) `path` for writing, readable by owner and group.
pub fn create_file(path: &Path) -> Result<File, FileError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| FileError::io(path, e))
}
