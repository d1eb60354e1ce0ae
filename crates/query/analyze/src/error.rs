use std::path::PathBuf;

use datafusion::error::DataFusionError;

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The query itself is wrong (a name, a type, the syntax).
    #[error("{0}")]
    Sql(String),
    /// The engine failed while running a valid query.
    #[error("query engine: {0}")]
    Engine(String),
    #[error("{0}")]
    Usage(String),
    /// The filter does not compile (libpcap's message) or does not
    /// translate to the records' columns: the caller's to fix, not the
    /// dataset's.
    #[error("{0}")]
    Filter(String),
    /// The query was stopped before it finished: its time limit passed, or
    /// whoever asked for it went away.
    #[error("stopped: {0}")]
    Interrupted(String),
}

impl AnalyzeError {
    /// Whether the error is in what was asked (a filter, the SQL, a
    /// setting) rather than in the dataset's files or the engine.
    pub fn is_request_error(&self) -> bool {
        matches!(
            self,
            AnalyzeError::Sql(_) | AnalyzeError::Usage(_) | AnalyzeError::Filter(_)
        )
    }

    pub(crate) fn from_arrow(e: datafusion::arrow::error::ArrowError) -> AnalyzeError {
        AnalyzeError::Engine(e.to_string())
    }

    pub(crate) fn from_sql(e: DataFusionError) -> AnalyzeError {
        match e.find_root() {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_) => {
                AnalyzeError::Sql(format!("in the SQL: {}", e.find_root()))
            }
            DataFusionError::IoError(_) | DataFusionError::ObjectStore(_) => {
                AnalyzeError::Engine(format!("reading the dataset's files: {}", e.find_root()))
            }
            _ => AnalyzeError::Engine(e.find_root().to_string()),
        }
    }
}

impl From<crate::filter::FilterError> for AnalyzeError {
    fn from(e: crate::filter::FilterError) -> Self {
        AnalyzeError::Filter(e.to_string())
    }
}
