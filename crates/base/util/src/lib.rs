//! Helpers shared by weir's crates that have nothing to do with parsing
//! frames: [`fasthash`], the hasher of small in-memory maps; [`hint`], a
//! prefetch hint for loops that know what they read next; and [`fmt`],
//! numbers, sizes and durations written for people.

pub mod fasthash;
pub mod fmt;
pub mod hint;
