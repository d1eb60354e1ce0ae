//! A reader of flat Parquet columns in the encodings weir writes, for the
//! analyses that scan millions of rows a second.
//!
//! arrow-rs's reader builds general Arrow arrays: null bitmaps padded value
//! by value, fixed-size binary copied into buffers, a zstd context made and
//! dropped per column chunk. On `weir analyze rpc` those were ~35 % of the
//! pass (BENCHMARKS, session 9). This reader decodes a page straight into
//! plain vectors it reuses, keeps dictionary codes as codes (so a caller
//! maps a dictionary once, not a value per row), and hands out batches that
//! are slices of the pages themselves.
//!
//! It reads what the standard allows for flat columns of INT32, INT64,
//! FIXED_LEN_BYTE_ARRAY (≤ 16 bytes) and BYTE_ARRAY: PLAIN, RLE_DICTIONARY
//! (and its older name PLAIN_DICTIONARY), DELTA_BINARY_PACKED, data pages
//! v1 and v2, uncompressed or zstd. Anything else is
//! [`DecodeError::Unsupported`], which [`scan::supports`] reports before a
//! scan starts, so a caller can take the general reader instead.

pub mod scan;
pub mod thrift;
pub mod values;

/// Why a page could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Valid Parquet this reader does not handle.
    #[error("not readable by weir's column scan: {0}")]
    Unsupported(String),
    /// Bytes that are not valid Parquet.
    #[error("corrupt column data: {0}")]
    Corrupt(String),
}

impl DecodeError {
    pub fn corrupt(what: impl Into<String>) -> Self {
        DecodeError::Corrupt(what.into())
    }

    pub fn unsupported(what: impl Into<String>) -> Self {
        DecodeError::Unsupported(what.into())
    }
}
