//! Frames in, packet records out.
//!
//! A [`Worker`] parses each frame once and hands the record to its own
//! sinks; it shares nothing with other workers, so there is no lock on the
//! per-packet path. [`convert`] runs trace files through a pool of workers:
//! reader threads cut each file into chunks of whole records, any idle
//! worker takes the next chunk, so one big file spreads over every core as
//! well as many small ones do.

mod app;
pub mod capture_run;
mod convert;
pub mod late;
pub mod live;
pub mod merge;
pub mod recover;
mod rpc;
mod stats;
#[cfg(test)]
mod tests;
mod worker;

pub use app::{AppOptions, AppStage};
pub use convert::{ConvertError, ConvertOptions, ConvertReport, Input, Progress, convert};
pub use rpc::{
    RpcGate, RpcMode, RpcOptions, RpcStage, SegmentAt, SegmentGate, TablesOn, chunk_segments,
    write_ready_transactions,
};
pub use stats::{FrameStats, ProtocolClass};
pub use worker::{FrameMeta, RecordTap, StatsTap, Taps, Worker, WorkerOptions};
