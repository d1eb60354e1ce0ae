//! The app stage: packets of one capture or source, in time order, into
//! the dataset's dns, tls and http tables. It sits where the RPC stage
//! does, for the same reason (both directions of a flow must meet in one
//! tracker): a conversion runs it on each source's stage thread, beside
//! the RPC stage; a capture in each worker.

use std::collections::BTreeMap;

use app::{Tracker, TrackerOptions};
use store::app::AppWriter;
use store::manifest::AppInfo;
use store::{Dataset, StoreError};
use wire::Segment;

#[derive(Clone, Copy, Debug)]
pub struct AppOptions {
    /// Whether the stage runs (`--app on|off`).
    pub on: bool,
    pub tracker: TrackerOptions,
}

impl Default for AppOptions {
    fn default() -> Self {
        AppOptions {
            on: true,
            tracker: TrackerOptions::default(),
        }
    }
}

/// Records written at a time: the tracker holds them meanwhile.
const BATCH: usize = 256;

/// One tracker and its writer (which starts with the first record: a
/// trace without DNS, TLS or HTTP gets no files).
pub struct AppStage {
    tracker: Tracker,
    writer: Option<AppWriter>,
    dataset: Dataset,
    writer_id: u16,
    rows: [u64; 3],
}

impl AppStage {
    pub fn new(dataset: &Dataset, writer_id: u16, opts: AppOptions) -> AppStage {
        AppStage {
            tracker: Tracker::new(opts.tracker),
            writer: None,
            dataset: dataset.clone(),
            writer_id,
            rows: [0; 3],
        }
    }

    /// A TCP or UDP segment, in capture order.
    #[inline]
    pub fn segment(&mut self, seg: &Segment) -> Result<(), StoreError> {
        self.tracker.track(seg);
        if self.tracker.ready() >= BATCH {
            self.write_ready()?;
        }
        Ok(())
    }

    fn write_ready(&mut self) -> Result<(), StoreError> {
        let w = self
            .writer
            .get_or_insert_with(|| AppWriter::new(self.dataset.root(), self.writer_id, 1 << 22));
        for r in self.tracker.dns.drain(..) {
            w.push_dns(&r)?;
            self.rows[0] += 1;
        }
        for r in self.tracker.tls.drain(..) {
            w.push_tls(&r)?;
            self.rows[1] += 1;
        }
        for r in self.tracker.http.drain(..) {
            w.push_http(&r)?;
            self.rows[2] += 1;
        }
        Ok(())
    }

    /// Ends the stage: open queries and requests are written unanswered.
    pub fn finish(mut self) -> Result<AppInfo, StoreError> {
        self.tracker.end();
        if self.tracker.ready() > 0 {
            self.write_ready()?;
        }
        let files = match self.writer.take() {
            Some(w) => w.finish()?,
            None => Default::default(),
        };
        Ok(AppInfo {
            dns: self.rows[0],
            tls: self.rows[1],
            http: self.rows[2],
            counters: counters(self.tracker.counters()),
            dns_files: files.dns,
            tls_files: files.tls,
            http_files: files.http,
        })
    }
}

/// The tracker's counters by name, for the manifest.
fn counters(c: &app::Counters) -> BTreeMap<String, u64> {
    [
        ("dns_messages", c.dns_messages),
        ("dns_matched", c.dns_matched),
        ("dns_unanswered", c.dns_unanswered),
        ("dns_unmatched_responses", c.dns_unmatched_responses),
        ("dns_retransmitted_queries", c.dns_retransmitted_queries),
        ("dns_errors", c.dns_errors),
        ("dns_truncated", c.dns_truncated),
        ("dns_bad_label", c.dns_bad_label),
        ("dns_bad_pointer", c.dns_bad_pointer),
        ("dns_name_too_long", c.dns_name_too_long),
        ("tls_handshakes", c.tls_handshakes),
        ("tls_without_server", c.tls_without_server),
        ("tls_errors", c.tls_errors),
        ("http_requests", c.http_requests),
        ("http_unanswered", c.http_unanswered),
        (
            "http_responses_without_request",
            c.http_responses_without_request,
        ),
        ("http_errors", c.http_errors),
        ("tcp_flows", c.tcp_flows),
        ("segments_without_start", c.segments_without_start),
        ("flows_over_limit", c.flows_over_limit),
        ("gaps", c.gaps),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
