//! Helpers shared by weir's crates that have nothing to do with parsing
//! frames: [`fasthash`], the hasher of small in-memory maps; [`hint`], a
//! prefetch hint for loops that know what they read next; [`fmt`],
//! numbers, sizes and durations written for people; [`digest`], BLAKE3 of
//! files as they are written; [`keyfile`], secret key files; and
//! [`storage`], where a dataset's files are read from (a directory, or a
//! bucket's prefix).

pub mod digest;
pub mod fasthash;
pub mod fmt;
pub mod hint;
pub mod keyfile;
pub mod storage;
