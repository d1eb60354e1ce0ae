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
//!
//! The engine only answers (Arrow tables, and for a plot the series
//! behind it in [`answer::Plot`]); how answers are shown (terminal tables,
//! JSON, CSV, plots) is the crate `weir-present`.
//!
//! Its modules depend in one direction, each only on those before it:
//! 1. `window`, `udf`, `filter` (the filter language), then `error`,
//!    `sql` (the SQL text), `grid` (the rates windows), `remote`, `served`;
//! 2. `index` (which flows a filter wants), then [`session`] (tables,
//!    window, UDFs), then `table` (a result) and `columns` (reading the
//!    Parquet columns, `par_map`);
//! 3. the passes over the columns: `count_pass`, `loss_pass`, `rpc_pass`;
//! 4. the analyses: `rates`, `bursts`, [`app`], [`stack`], [`rpc`], then
//!    [`analyses`] (the rest, and the entry to each), then [`flow_table`]
//!    and [`read`] (pcap extraction);
//! 5. [`answer`] (one analysis by its name, as the CLI and the page ask),
//!    then [`emit`] (`--emit-sql`).

pub mod analyses;
pub mod answer;
pub mod app;
mod bursts;
mod columns;
mod count_pass;
pub mod emit;
mod error;
pub mod filter;
pub mod flow_table;
mod grid;
pub mod index;
mod loss_pass;
mod rates;
pub mod read;
pub mod remote;
pub mod rpc;
mod rpc_pass;
pub mod served;
pub mod session;
mod sql;
pub mod stack;
mod table;
pub mod udf;
mod window;

pub use analyses::{BurstScale, By};
/// The Arrow types of results, for callers that read them.
pub use datafusion::arrow;
pub use error::AnalyzeError;
pub use session::{Interrupt, LimitedResult, ScanReport, Session, TimeWindow};
pub use table::Table;
