//! How weir's answers are shown: the engine ([`analyze`]) answers with
//! Arrow tables (and, for a plot, the series behind it); this crate turns
//! them into what people and programs read. `weir analyze` prints with it,
//! and `weir serve`'s page reads the JSON it writes.
//!
//! Its modules depend in one direction: `text` (addresses as text) and
//! `cells` (a cell by its column's name) at the bottom; `terminal`
//! (tables as wide as a terminal) on them; [`render`] (plain tables, JSON,
//! CSV; the terminal's entry too) on top. Plots: `figure` (panels,
//! axes, drawing) under [`plot`] (one figure per analysis).

mod cells;
mod figure;
pub mod plot;
pub mod render;
mod terminal;
mod text;
