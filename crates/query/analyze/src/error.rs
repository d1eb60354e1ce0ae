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
}

impl AnalyzeError {
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
