//! The part of time an analysis looks at, and its SQL condition: below
//! the session and the flow index, which both restrict to it.

/// The part of time an analysis looks at; `None` is unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeWindow {
    /// Inclusive, ns since the epoch.
    pub from_ns: Option<i64>,
    /// Exclusive, ns since the epoch.
    pub to_ns: Option<i64>,
}

impl TimeWindow {
    /// The SQL condition on `ts` (a timestamp column), `TRUE` when unbounded.
    /// Written on the column itself so that DataFusion prunes files and row
    /// groups by their `ts` statistics.
    pub fn condition(&self) -> String {
        let mut parts = Vec::new();
        if let Some(f) = self.from_ns {
            parts.push(format!("ts >= TIMESTAMP '{}'", store::time::format_ns(f)));
        }
        if let Some(t) = self.to_ns {
            parts.push(format!("ts < TIMESTAMP '{}'", store::time::format_ns(t)));
        }
        if parts.is_empty() {
            "TRUE".into()
        } else {
            parts.join(" AND ")
        }
    }
}
