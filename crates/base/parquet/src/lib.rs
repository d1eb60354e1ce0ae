//! weir's Parquet codec: column encoders that take one value at a time
//! ([`encode`]) and a reader of flat columns that decodes pages straight
//! into reused vectors ([`decode`]), both far cheaper per row than
//! arrow-rs's general writer and reader for the tables weir writes. The
//! container (page headers, footer, metadata) stays the parquet crate's,
//! so the files are standard Parquet. Knows nothing of datasets: the
//! store (`weir-store`) says which tables use it and how.

pub mod decode;
pub mod encode;
mod error;
pub mod files;

pub use error::FileError;
