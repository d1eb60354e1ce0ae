//! Answers from a dataset: SQL over its Parquet tables (`packets`, `stats`,
//! `stack`, the view `flows`) on an embedded DataFusion.
//!
//! Each analysis is SQL text kept in `src/sql/`, written so that the same
//! text runs on Spark SQL: standard aggregates and CASE, integer times in
//! ns (`ts_ns`), no engine-specific functions except `ip_text`/`mac_text`,
//! which only format results. The binding of tables, the time window and
//! the UDFs live in [`session`]. `rpc`, `rates`, `bursts` and `loss` run
//! their SQL's equivalent as hand-written passes over the columns
//! (`rpc_pass`, `count_pass`, `loss_pass`): the SQL there stays the
//! definition, for `--emit-sql`, for filters and for the tests.

pub mod analyses;
pub mod answer;
pub mod app;
mod columns;
mod count_pass;
pub mod emit;
mod error;
pub mod filter;
pub mod flow_table;
pub mod index;
mod loss_pass;
pub mod plot;
pub mod read;
pub mod remote;
pub mod render;
pub mod rpc;
mod rpc_pass;
pub mod served;
pub mod session;
pub mod stack;
mod terminal;
mod text;
pub mod udf;

pub use analyses::{BurstScale, By, Table};
/// The Arrow types of results, for callers that read them.
pub use datafusion::arrow;
pub use error::AnalyzeError;
pub use session::{Interrupt, LimitedResult, ScanReport, Session, TimeWindow};
