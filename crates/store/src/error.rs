//! The store's error: the Parquet codec's, which always names the file
//! (and says what to do about a full disk).

pub use pqcodec::FileError as StoreError;
