//! The human summary of a dataset's manifest, printed by `weir convert`,
//! `weir info`, `weir merge`, `weir collect` and `weir capture`.

use std::fmt::Write;

use store::RowOrder;
use store::manifest::{Drops, Manifest, MergeInfo, RpcInfo, StackInfo};
use util::fmt::{group_digits, human_bytes};

/// The summary, a line per part of the manifest that is there.
pub fn describe(m: &Manifest) -> String {
    let mut s = String::new();
    counts(&mut s, m);
    drops(&mut s, m);
    if let Some(st) = &m.stack {
        stack(&mut s, st);
    }
    if let Some(mi) = &m.merge {
        merge(&mut s, mi);
    }
    if let Some(r) = &m.rpc {
        rpc(&mut s, r);
    }
    files(&mut s, m);
    origin(&mut s, m);
    if let Some(i) = &m.integrity {
        integrity(&mut s, i);
    }
    s
}

/// The integrity record: what `weir verify` checks.
fn integrity(s: &mut String, i: &store::integrity::Integrity) {
    let signed = match &i.signature {
        Some(sig) => format!("signed with key {}", sig.key),
        None => "not signed".to_string(),
    };
    let _ = writeln!(
        s,
        "integrity  {} files chained, {signed} (weir verify checks them)",
        i.live().len(),
    );
    let _ = writeln!(s, "seal       {}", i.seal);
}

/// Frames, time span, protocol mix and parse errors.
fn counts(s: &mut String, m: &Manifest) {
    let c = &m.counts;
    let _ = writeln!(
        s,
        "frames     {} ({} on the wire, {} captured)",
        group_digits(c.frames),
        human_bytes(c.wire_bytes),
        human_bytes(c.captured_bytes)
    );
    match &m.time_span {
        Some(t) => {
            let _ = writeln!(s, "span       {}", span_text(t.first_ns, t.last_ns));
        }
        None => {
            let _ = writeln!(s, "span       (no frames)");
        }
    }
    if c.frames > 0 {
        let mut mix: Vec<_> = c.protocols.iter().collect();
        mix.sort_by(|a, b| b.1.cmp(a.1));
        let mix: Vec<String> = mix
            .iter()
            .map(|(k, v)| format!("{k} {:.1}%", **v as f64 * 100.0 / c.frames as f64))
            .collect();
        let _ = writeln!(s, "protocols  {}", mix.join(", "));
    }
    if c.parse_errors.is_empty() {
        let _ = writeln!(s, "parse      every frame parsed fully");
    } else {
        let total: u64 = c.parse_errors.values().sum();
        let list: Vec<String> = c
            .parse_errors
            .iter()
            .map(|(k, v)| format!("{k} {}", group_digits(*v)))
            .collect();
        let _ = writeln!(
            s,
            "parse      {} frames stopped early: {}",
            group_digits(total),
            list.join(", ")
        );
    }
}

/// `2026-11-27 10:49:51.123456 to 10:49:55.123456 UTC (4.000 s)`: the
/// date once when both ends share it, to the microsecond.
pub fn span_text(first_ns: i64, last_ns: i64) -> String {
    let short = |ns: i64| {
        let t = store::time::format_ns(ns);
        (t[..10].to_string(), t[11..26].to_string())
    };
    let (d0, t0) = short(first_ns);
    let (d1, t1) = short(last_ns);
    let end = if d0 == d1 { t1 } else { format!("{d1} {t1}") };
    format!(
        "{d0} {t0} to {end} UTC ({:.3} s)",
        (last_ns - first_ns) as f64 / 1e9
    )
}

/// Drops the capturing system reported, and a live capture's own.
fn drops(s: &mut String, m: &Manifest) {
    let reported: u64 = m.interfaces.iter().filter_map(|i| i.dropped).sum();
    if m.interfaces.iter().any(|i| i.dropped.is_some()) {
        let _ = writeln!(
            s,
            "drops      {} reported by the capturing system",
            group_digits(reported)
        );
    }
    if let Some(d) = &m.drops {
        capture_drops(s, d);
    }
    if let Some(l) = &m.late_records {
        late_records(s, l);
    }
}

/// What a reader of these datasets should know before it answers: a
/// running capture whose records for some stored frames are still to be
/// built (readers see the frames that have records).
pub fn pending_records_notes(datasets: &[util::storage::Root]) -> Vec<String> {
    let mut notes = Vec::new();
    for d in datasets {
        let m = store::location::read_manifest(&**d);
        if let Ok(Manifest {
            late_records: Some(l),
            ..
        }) = m
            && l.pending > 0
        {
            notes.push(format!(
                "note: {}: {} frames in the pcap files have no packet record yet (the capture \
                 is still building them from the pcap files); the answer leaves them out",
                d.name(),
                group_digits(l.pending)
            ));
        }
    }
    notes
}

/// Records built from the pcap files rather than as the frames came.
fn late_records(s: &mut String, l: &store::manifest::LateRecords) {
    let mut line = format!(
        "records    {} built late from the pcap files (the record threads had fallen behind)",
        group_digits(l.built)
    );
    if l.pending > 0 {
        let _ = write!(
            line,
            "; {} still to build: their frames are in the pcap files but not yet in the \
             packet records",
            group_digits(l.pending)
        );
    }
    if l.lost > 0 {
        let _ = write!(
            line,
            "; {} never built (their pcap file went first)",
            group_digits(l.lost)
        );
    }
    let _ = writeln!(s, "{line}");
}

fn capture_drops(s: &mut String, d: &Drops) {
    let share = if d.kernel_seen > 0 {
        d.kernel as f64 * 100.0 / d.kernel_seen as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "drops      kernel {} of {} seen ({share:.3}%), pcap staging {}{}{}",
        group_digits(d.kernel),
        group_digits(d.kernel_seen),
        group_digits(d.pcap),
        if d.pcap_write > 0 {
            format!(" ({} lost to failed writes)", group_digits(d.pcap_write))
        } else {
            String::new()
        },
        if d.ring_unread > 0 {
            format!(
                ", never read from the rings {}",
                group_digits(d.ring_unread)
            )
        } else {
            String::new()
        }
    );
    if d.records_write + d.flows_write + d.stats_write > 0 {
        let _ = writeln!(
            s,
            "           not written (disk full): records {}, flows slices {}, stats rows {}",
            group_digits(d.records_write),
            group_digits(d.flows_write),
            group_digits(d.stats_write)
        );
    }
}

fn stack(s: &mut String, st: &StackInfo) {
    let events: u64 = st.events.values().sum();
    let lost: u64 = st.lost.values().sum();
    let mut kinds: Vec<_> = st.events.iter().filter(|(_, n)| **n > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{k} {}", group_digits(**n)))
        .collect();
    let _ = writeln!(
        s,
        "stack      {} events in {} files ({}), {} lost{}",
        group_digits(events),
        st.files.len(),
        kinds.join(", "),
        group_digits(lost),
        if st.ended_by == "running" {
            " (still recording, or ended without closing)"
        } else {
            ""
        }
    );
    if st.mode == "intervals" {
        // Recordings from before the levels were all per packet.
        let what = match st.level.as_deref() {
            Some("walk") => "each TCP socket's own counters read by a socket walk",
            Some("device") => {
                "socket walk, and sends, receives, segments and device frames added up per socket"
            }
            _ => {
                "sends, receives, segments and device frames added up per socket, with \
                 write-to-wire delays"
            }
        };
        let _ = writeln!(
            s,
            "           {what} every {} s (stack_intervals, {} files)",
            st.interval_s.unwrap_or(0.0),
            st.interval_files.len()
        );
    }
}

/// The merge and a line per input.
fn merge(s: &mut String, m: &MergeInfo) {
    let _ = writeln!(
        s,
        "merged     {} datasets; {}",
        m.inputs.len(),
        match m.dedup_window_ns {
            Some(w) => format!(
                "{} duplicate frames removed (same headers within {} us)",
                group_digits(m.duplicates_removed),
                w as f64 / 1e3
            ),
            None => "duplicates kept".to_string(),
        }
    );
    for (i, input) in m.inputs.iter().enumerate() {
        let clock = match (i, input.clock_offset_ns) {
            (0, _) => "clock reference".to_string(),
            (_, Some(o)) => format!(
                "clock {:+.3} ms from the first ({} frames in common)",
                o as f64 / 1e6,
                group_digits(input.offset_frames)
            ),
            (_, None) => "clock offset unknown (no frames in common)".to_string(),
        };
        let _ = writeln!(
            s,
            "  input {i}  {}: {} frames, {} duplicates, {clock}",
            input.path,
            group_digits(input.frames),
            group_digits(input.duplicates),
        );
    }
}

fn rpc(s: &mut String, r: &RpcInfo) {
    let n = |k: &str| group_digits(r.counters.get(k).copied().unwrap_or(0));
    let _ = writeln!(
        s,
        "rpc        {} transactions: {} calls, {} replies, {} matched, {} calls without \
         reply, {} replies without call, {} retransmitted; {} stream gaps",
        group_digits(r.transactions),
        n("calls"),
        n("replies"),
        n("matched"),
        n("calls_without_reply"),
        n("replies_without_call"),
        n("retransmitted_calls"),
        n("gaps"),
    );
}

/// The pcap files, if any, and the packet files.
fn files(s: &mut String, m: &Manifest) {
    if !m.files.pcap.is_empty() {
        let bytes: u64 = m.files.pcap.iter().map(|f| f.bytes).sum();
        let frames: u64 = m.files.pcap.iter().map(|f| f.frames).sum();
        let stored: u64 = m
            .files
            .pcap
            .iter()
            .map(|f| f.stored_bytes.unwrap_or(f.bytes))
            .sum();
        let _ = writeln!(
            s,
            "pcap       {} files, {} frames, {}{}{}",
            m.files.pcap.len(),
            group_digits(frames),
            human_bytes(bytes),
            if stored != bytes {
                format!(" ({} on disk)", human_bytes(stored))
            } else {
                String::new()
            },
            if m.files.pcap_removed.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} older files removed by retention",
                    m.files.pcap_removed.len()
                )
            }
        );
    }
    let bytes = m.packet_bytes();
    let per = if m.counts.frames > 0 {
        bytes as f64 / m.counts.frames as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "records    {} packet files, {} ({per:.2} B/frame), rows in {} order",
        m.files.packets.len(),
        human_bytes(bytes),
        match m.row_order {
            RowOrder::Flow => "flow",
            RowOrder::Arrival => "arrival",
        }
    );
}

/// Where the frames came from (a capture or source files, with their
/// errors) and the run that wrote them.
fn origin(s: &mut String, m: &Manifest) {
    let sources_failed = m.sources.iter().filter(|x| x.error.is_some()).count();
    if let Some(cap) = &m.capture {
        let names: Vec<&str> = m
            .interfaces
            .iter()
            .filter_map(|i| i.name.as_deref())
            .collect();
        let _ = writeln!(
            s,
            "capture    {} ({} worker(s) each, {} clock){}, ended by {}",
            names.join(", "),
            cap.workers_per_interface,
            m.clock,
            cap.filter
                .as_deref()
                .map(|f| format!(", filter {f:?}"))
                .unwrap_or_default(),
            cap.ended_by
        );
    } else {
        let _ = writeln!(
            s,
            "sources    {} file(s){}",
            m.sources.len(),
            if sources_failed > 0 {
                format!(", {sources_failed} stopped early (see errors)")
            } else {
                String::new()
            }
        );
    }
    for src in m.sources.iter().filter(|x| x.error.is_some()) {
        let _ = writeln!(s, "  error    {}", src.error.as_deref().unwrap_or_default());
    }
    if let Some(run) = &m.run {
        let _ = writeln!(
            s,
            "run        {} worker(s), {:.3} s, {} frames/s",
            run.workers,
            run.elapsed_s,
            group_digits(run.frames_per_s as u64)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::manifest::LateRecords;

    /// A running capture whose records for some frames are still to be
    /// built: the summary and every reader's note say how many; once none
    /// are pending, readers say nothing.
    #[test]
    fn records_still_to_build_are_said() {
        let root = std::env::temp_dir().join(format!("weir-describe-late-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let ds = store::Dataset::create(&root, false).unwrap();
        let mut m = Manifest::new("capture", "kernel", RowOrder::Flow);
        m.late_records = Some(LateRecords {
            built: 1_000,
            pending: 2_500,
            lost: 0,
        });
        ds.write_manifest(&m).unwrap();
        let text = describe(&m);
        assert!(text.contains("1,000 built late"), "{text}");
        assert!(text.contains("2,500 still to build"), "{text}");
        let notes = pending_records_notes(&[util::storage::Directory::root(&root)]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("2,500 frames"), "{}", notes[0]);
        m.late_records = Some(LateRecords {
            built: 3_500,
            pending: 0,
            lost: 0,
        });
        ds.write_manifest(&m).unwrap();
        assert!(pending_records_notes(&[util::storage::Directory::root(&root)]).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}
