//! A result as the analyses give it (a named table of Arrow batches), and
//! which way it was answered.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;

use crate::error::AnalyzeError;
use crate::session::Session;

/// A result: a named table.
#[derive(Clone)]
pub struct Table {
    pub name: String,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Table {
    pub fn rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}

/// `sql` run over `session`, as the table `name`.
pub(crate) fn run(session: &Session, name: &str, sql: &str) -> Result<Table, AnalyzeError> {
    let (schema, batches) = session.query_with_schema(sql)?;
    Ok(Table {
        name: name.into(),
        schema,
        batches,
    })
}

/// Which way an analysis was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnsweredBy {
    /// A pass over the columns with weir's own decoder.
    Pass,
    /// Its SQL on DataFusion (with a filter, or files the decoder cannot
    /// read).
    Sql,
}

impl std::fmt::Display for AnsweredBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AnsweredBy::Pass => "one pass over the columns (weir's Parquet decoder)",
            AnsweredBy::Sql => "its SQL on DataFusion",
        })
    }
}
