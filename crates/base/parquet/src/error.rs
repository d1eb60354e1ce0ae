use std::path::PathBuf;

/// An error writing or reading a file (a dataset's, in the store); always
/// names the file. The store calls it `StoreError`.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl FileError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        // Say what to do about the errors people actually hit.
        let source = match source.raw_os_error() {
            // ENOSPC
            Some(28) => std::io::Error::new(
                source.kind(),
                "no space left on the device; free space or write the dataset elsewhere \
                 (files completed so far are intact)",
            ),
            _ => source,
        };
        FileError::Io { path, source }
    }

    pub fn parquet(path: impl Into<PathBuf>, source: parquet::errors::ParquetError) -> Self {
        // The Parquet writer passes a full disk on as text: say it as the
        // I/O error it is.
        let text = source.to_string();
        if text.contains("os error 28") || text.contains("No space left on device") {
            return FileError::io(path, std::io::Error::from_raw_os_error(28));
        }
        FileError::Parquet {
            path: path.into(),
            source,
        }
    }

    /// Whether this is the disk (or its quota) being full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            FileError::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
                    || matches!(source.raw_os_error(), Some(28 | 122))
            }
            _ => false,
        }
    }
}
