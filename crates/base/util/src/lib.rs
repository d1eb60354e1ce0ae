//! Helpers shared by weir's crates that have nothing to do with parsing
//! frames: [`fasthash`], the hasher of small in-memory maps; [`hint`], a
//! prefetch hint for loops that know what they read next; [`fmt`],
//! numbers, sizes and durations written for people; [`digest`], BLAKE3 of
//! files as they are written; and [`keyfile`], secret key files.

pub mod digest;
pub mod fasthash;
pub mod fmt;
pub mod hint;
pub mod keyfile;
