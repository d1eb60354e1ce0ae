//! The weir dataset: a directory of standard files that DuckDB, Polars,
//! pandas, Spark, tshark and Wireshark read without weir.
//!
//! ```text
//! DATASET/
//!   manifest.json          what the dataset holds and how it was made
//!   packets/*.parquet      one row per frame (see [`schema`]), with a page
//!                          index by flow (see [`index`])
//!   flows/*.parquet        one row per flow per packet file (see [`flows`])
//!   pcap/*.pcap            full frames, when a capture kept them
//!   stats/*.parquet        one row per second per worker (see [`stats`])
//!   stack/*.parquet        one row per host-stack event (see [`stack`])
//!   stack_intervals/*.parquet  one row per socket per interval of weir
//!                          stack's default mode (see [`stack_intervals`])
//!   rpc/*.parquet          one row per RPC call and its reply (see [`rpc`])
//!   nfs/*.parquet          one row per NFS operation of those calls
//!   dns/*.parquet          one row per DNS query and its response (see [`app`])
//!   tls/*.parquet          one row per TLS handshake
//!   http/*.parquet         one row per HTTP/1.x request and its response
//! ```
//!
//! Files are written under a hidden temporary name and renamed into place
//! when complete, so a reader never sees half a file.
//!
//! Every table names its columns once ([`columns::Column`]) and is
//! written through one of [`table`]'s writers; the Parquet encoders and
//! the column reader are the `pqcodec` crate's.

pub mod app;
pub mod columns;
pub mod dataset;
mod error;
pub mod flows;
pub mod identify;
pub mod index;
pub mod integrity;
pub mod location;
pub mod manifest;
pub mod packets;
pub mod read;
pub mod rewrite;
pub mod rpc;
pub mod schema;
pub mod stack;
pub mod stack_intervals;
pub mod stats;
pub mod table;
pub mod time;

/// The column reader the hand-written analyses scan the tables with
/// (weir's Parquet codec, `pqcodec`).
pub use pqcodec::decode;
/// Creating a dataset's files and directories, private to owner and group.
pub use pqcodec::files;

pub use dataset::Dataset;
pub use error::StoreError;
pub use manifest::Manifest;
pub use packets::{
    FinishedFile, PacketFileSummary, PacketWriter, PacketWriterOptions, RowBuffers, RowOrder,
};
pub use schema::{PACKET_COLUMNS, PACKET_SCHEMA_VERSION, packet_schema};
