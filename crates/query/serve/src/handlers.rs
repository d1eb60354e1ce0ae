//! The handlers of the routes (`routes::ROUTES`): each reads its
//! request's parameters, asks `analyze` (a session over the selection, a
//! pcap of it, the datasets' facts), and answers with JSON.

use std::sync::Arc;
use std::time::{Duration, Instant};

use analyze::answer::{Analysis, AnswerOptions, Settings, answer};
use analyze::arrow::compute::{SortOptions, concat_batches, sort_to_indices, take_record_batch};
use analyze::read::{ReadOptions, ReadOutput, check_filter, read_frames_into};
use analyze::served::Located;
use analyze::{By, Session, Table, TimeWindow};
use httpd::Response;
use serde_json::{Value, json};

use crate::Slot;
use crate::json::{columns_i64, nice_bucket, short_name, table_json};
use crate::routes::{ApiError, Ctx, Reply, SlotWait, api_err};

/// Bars of the overview across the window.
const OVERVIEW_BARS: i64 = 300;
/// The most rows a page of flows or packets may ask for.
const MAX_PAGE: usize = 1000;
/// How long a verification of the datasets is reused.
const VERIFY_REUSE: Duration = Duration::from_secs(60);

fn every_slot_taken() -> String {
    "every query slot is taken; try again".into()
}

/// The selection of a request.
struct Selection {
    window: TimeWindow,
    filter: Option<String>,
}

impl Ctx {
    fn param_i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.req
            .param_i64(name)
            .map_err(|m| api_err(400, "usage", m))
    }

    fn param_usize(&self, name: &str, default: usize) -> Result<usize, ApiError> {
        Ok(self.param_i64(name)?.map_or(default, |v| v.max(0) as usize))
    }

    fn selection(&self) -> Result<Selection, ApiError> {
        let window = TimeWindow {
            from_ns: self.param_i64("from")?,
            to_ns: self.param_i64("to")?,
        };
        if let (Some(f), Some(t)) = (window.from_ns, window.to_ns)
            && f >= t
        {
            return Err(api_err(400, "usage", "from must come before to"));
        }
        let filter = self
            .req
            .param("filter")
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_string);
        Ok(Selection { window, filter })
    }

    /// Compiles the filter with libpcap for each link type of the
    /// datasets, as `weir read` will: its error is libpcap's.
    fn check_filter(&self, filter: &str) -> Result<(), ApiError> {
        for link in analyze::served::link_types(&self.located()?) {
            check_filter(filter, link)?;
        }
        Ok(())
    }

    /// A query slot, waiting for one until `deadline` at most; noted for
    /// the response's `X-Weir-Query-Slot`.
    fn slot(&self, deadline: Instant, busy: impl FnOnce() -> String) -> Result<Slot<'_>, ApiError> {
        let Some(slot) = self.shared.slots.take(deadline) else {
            self.slot_wait.set(Some(SlotWait::Busy));
            return Err(api_err(503, "busy", busy()));
        };
        self.slot_wait.set(Some(match slot.waited {
            None => SlotWait::Free,
            Some(d) => SlotWait::Waited(d),
        }));
        Ok(slot)
    }

    /// A query slot, and a session over the selection whose queries stop
    /// at the time limit or when the client goes away.
    fn session(&self, sel: &Selection) -> Result<(Session, Slot<'_>), ApiError> {
        let limits = &self.shared.limits;
        let deadline = Instant::now() + limits.time_limit;
        let slot = self.slot(deadline, || {
            format!(
                "{} queries were running for the whole time limit; try again",
                limits.max_queries
            )
        })?;
        if let Some(f) = &sel.filter {
            self.check_filter(f)?;
        }
        let mut session = Session::open(
            &self.shared.datasets,
            sel.window,
            sel.filter.as_deref(),
            limits.query_threads,
        )?;
        let gone = self.responder.gone();
        let limit = limits.time_limit;
        session.set_interrupt(Arc::new(move || {
            if Instant::now() >= deadline {
                Some(format!(
                    "the request's time limit ({}s) passed; narrow the window or the filter, or \
                     start weir serve with a larger --time-limit",
                    limit.as_secs_f64()
                ))
            } else if gone.is_gone() {
                Some("the client went away".into())
            } else {
                None
            }
        }));
        Ok((session, slot))
    }

    /// Every dataset served: each given, or each below a prefix given.
    fn located(&self) -> Result<Vec<Located>, ApiError> {
        Ok(analyze::served::datasets(&self.shared.datasets)?)
    }

    pub(crate) fn datasets(&self) -> Result<Reply, ApiError> {
        let mut out = Vec::new();
        let mut span: Option<(i64, i64)> = None;
        for (k, d) in self.located()?.iter().enumerate() {
            let (root, m) = (&d.root, &d.manifest);
            if let Some(t) = &m.time_span {
                span = Some(match span {
                    None => (t.first_ns, t.last_ns),
                    Some((a, b)) => (a.min(t.first_ns), b.max(t.last_ns)),
                });
            }
            let running = m.capture.as_ref().is_some_and(|c| c.ended_by == "running");
            let workers = m
                .capture
                .as_ref()
                .map(|c| c.workers_per_interface)
                .or(m.run.as_ref().map(|r| r.workers));
            out.push(json!({
                "id": k,
                "name": short_name(&**root),
                "kind": m.kind,
                "created": m.created,
                "running": running,
                "workers": workers,
                "interfaces": m.interfaces.iter().map(|i| json!({
                    "name": i.name, "link": i.link_name, "snaplen": i.snaplen,
                    "dropped": i.dropped,
                })).collect::<Vec<_>>(),
                "span": m.time_span,
                "frames": m.counts.frames,
                "wire_bytes": m.counts.wire_bytes,
                "drops": m.drops,
                "capture_filter": m.capture.as_ref().and_then(|c| c.filter.clone()),
                "has_stats": !m.files.stats.is_empty(),
                "has_rpc": m.rpc.is_some(),
                "has_stack": m.stack.is_some(),
                "pcap_files": m.files.pcap.len(),
            }));
        }
        Ok(Reply::Json(json!({
            "datasets": out,
            "span": span.map(|(a, b)| json!({"first_ns": a, "last_ns": b})),
            "limits": {
                "max_rows": self.shared.limits.max_rows,
                "time_limit_s": self.shared.limits.time_limit.as_secs_f64(),
            },
            "analyses": analyze::answer::KINDS.iter().map(|k| json!({
                "name": k.name, "about": k.about,
            })).collect::<Vec<_>>(),
        })))
    }

    /// `weir verify` of every dataset (without a key or a seal), reused
    /// for a minute unless `fresh=1`.
    pub(crate) fn verify(&self) -> Result<Reply, ApiError> {
        let fresh = self.req.param("fresh") == Some("1");
        {
            let cached = self
                .shared
                .verified
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some((at, v)) = &*cached
                && !fresh
                && at.elapsed() < VERIFY_REUSE
            {
                return Ok(Reply::Json(v.clone()));
            }
        }
        let _slot = self.slot(
            Instant::now() + self.shared.limits.time_limit,
            every_slot_taken,
        )?;
        let mut out = Vec::new();
        for d in self.located()? {
            let threads = self.shared.limits.query_threads.max(1);
            let v = analyze::served::verify(&d, threads)?;
            out.push(json!({
                "dataset": short_name(&*d.root),
                "ok": v.ok(),
                "report": v,
            }));
        }
        let v = json!({ "datasets": out });
        *self
            .shared
            .verified
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), v.clone()));
        Ok(Reply::Json(v))
    }

    /// Whether the filter compiles (libpcap) and translates to the
    /// records' columns (the tables' reading of it).
    pub(crate) fn check(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        let Some(f) = &sel.filter else {
            return Ok(Reply::Json(json!({ "ok": true })));
        };
        self.check_filter(f)?;
        // Whether the records hold tunnels changes an outer filter's
        // translation: checked on the datasets themselves.
        let (_session, _slot) = self.session(&sel)?;
        Ok(Reply::Json(json!({ "ok": true })))
    }

    pub(crate) fn overview(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        let (session, _slot) = self.session(&sel)?;
        let data = session.data_span_ns();
        let Some((a, b)) = session.span_ns() else {
            return Ok(Reply::Json(json!({ "empty": true, "data_span": data })));
        };
        let bucket = nice_bucket((b - a + OVERVIEW_BARS) / OVERVIEW_BARS);
        let origin = a - a.rem_euclid(bucket);
        let traffic = session.query(&format!(
            "SELECT CAST((ts_ns - {origin}) / {bucket} AS BIGINT) AS i, count(*) AS frames, \
             sum(wire_len) AS bytes FROM packets GROUP BY 1 ORDER BY 1"
        ))?;
        let drops = session.query(&format!(
            "SELECT CAST((ts_ns - {origin}) / {bucket} AS BIGINT) AS i, \
             sum(kernel_packets) AS kernel_seen, sum(frames) AS captured, \
             sum(kernel_drops) AS kernel_drops, sum(kernel_freezes) AS queue_freezes, \
             sum(pcap_drops) AS pcap_drops FROM stats WHERE stack_event IS NULL \
             GROUP BY 1 ORDER BY 1"
        ))?;
        let t = columns_i64(&traffic, &["i", "frames", "bytes"])?;
        let d = columns_i64(
            &drops,
            &[
                "i",
                "kernel_seen",
                "captured",
                "kernel_drops",
                "queue_freezes",
                "pcap_drops",
            ],
        )?;
        let times = |is: &[i64]| is.iter().map(|i| origin + i * bucket).collect::<Vec<_>>();
        Ok(Reply::Json(json!({
            "from_ns": a,
            "to_ns": b + 1,
            "bucket_ns": bucket,
            "data_span": data,
            "traffic": { "t": times(&t[0]), "frames": t[1], "bytes": t[2] },
            "stats": {
                "t": times(&d[0]), "kernel_seen": d[1], "captured": d[2],
                "kernel_drops": d[3], "queue_freezes": d[4], "pcap_drops": d[5],
            },
        })))
    }

    /// One analysis by its registry name (`name`, and `what` for top),
    /// with `by`, `limit`, `every_ns`, `sample_ns`, `scales_ns`.
    pub(crate) fn analysis(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        let name = self.req.param("name").unwrap_or("");
        let mut settings = Settings {
            by: self.by()?,
            limit: self.param_i64("limit")?.map(|v| v.max(0) as usize),
            default_flows: self.shared.limits.max_rows,
            ..Settings::default()
        };
        if let Some(v) = self.param_i64("every_ns")? {
            settings.every_ns = v;
        }
        if let Some(v) = self.param_i64("sample_ns")? {
            settings.sample_ns = v;
        }
        if let Some(v) = self.req.param("scales_ns").filter(|v| !v.is_empty()) {
            settings.scales_ns = v
                .split(',')
                .map(|s| s.trim().parse::<i64>())
                .collect::<Result<_, _>>()
                .map_err(|_| api_err(400, "usage", format!("scales_ns={v}: give ns,ns,...")))?;
        }
        let (session, _slot) = self.session(&sel)?;
        // Intervals the page does not give are chosen from the selection's
        // span, as `weir analyze` chooses them.
        if self.param_i64("every_ns")?.is_none() {
            let (every_ns, sample_ns) = analyze::analyses::default_rate_grid_for(&session);
            settings.every_ns = every_ns;
            if self.param_i64("sample_ns")?.is_none() {
                settings.sample_ns = sample_ns;
            }
        }
        if self.req.param("scales_ns").is_none_or(str::is_empty) {
            settings.scales_ns = analyze::analyses::default_burst_scales_for(&session);
        }
        let analysis = Analysis::parse(name, self.req.param("what"), &settings)?;
        let answered = answer(&session, &analysis, &AnswerOptions::default())?;
        let max = self.shared.limits.max_rows;
        let tables = answered
            .tables
            .iter()
            .map(|t| table_json(t, 0, max))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Reply::Json(
            json!({ "how": answered.how, "tables": tables }),
        ))
    }

    fn by(&self) -> Result<By, ApiError> {
        match self.req.param("by").unwrap_or("bytes") {
            "bytes" => Ok(By::Bytes),
            "frames" => Ok(By::Frames),
            other => Err(api_err(
                400,
                "usage",
                format!("by={other}: bytes or frames"),
            )),
        }
    }

    fn page(&self) -> Result<(usize, usize), ApiError> {
        let per = self.param_usize("per", 50)?.clamp(1, MAX_PAGE);
        Ok((self.param_usize("page", 0)?, per))
    }

    /// The flows of the selection (from the flows table when it can
    /// answer, as `weir analyze flows` does), sorted by `sort` (a column)
    /// and `order` (asc, desc), one page.
    pub(crate) fn flows(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        let (page, per) = self.page()?;
        let (session, _slot) = self.session(&sel)?;
        let analysis = Analysis::Flows {
            by: By::Bytes,
            limit: 0,
        };
        let answered = answer(&session, &analysis, &AnswerOptions::default())?;
        let Some(t) = answered.tables.into_iter().next() else {
            return Err(api_err(500, "dataset", "flows gave no table"));
        };
        let all = concat_batches(&t.schema, &t.batches)
            .map_err(|e| api_err(500, "dataset", e.to_string()))?;
        let total = all.num_rows();
        let sorted = match self.req.param("sort").filter(|s| !s.is_empty()) {
            None => all,
            Some(col) => {
                let Some(c) = all.column_by_name(col) else {
                    return Err(api_err(400, "usage", format!("sort={col}: no such column")));
                };
                let desc = self.req.param("order") != Some("asc");
                let idx = sort_to_indices(
                    c,
                    Some(SortOptions {
                        descending: desc,
                        nulls_first: false,
                    }),
                    None,
                )
                .map_err(|e| api_err(400, "usage", format!("sort={col}: {e}")))?;
                take_record_batch(&all, &idx).map_err(|e| api_err(500, "dataset", e.to_string()))?
            }
        };
        let start = (page * per).min(total);
        let rows = sorted.slice(start, per.min(total - start));
        let t = Table {
            name: "flows".into(),
            schema: t.schema,
            batches: vec![rows],
        };
        let mut v = table_json(&t, 0, per)?;
        v["total"] = json!(total);
        v["page"] = json!(page);
        v["per"] = json!(per);
        v["how"] = json!(answered.how);
        Ok(Reply::Json(v))
    }

    /// The packet records of the selection in time order, one page.
    pub(crate) fn packets(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        let (page, per) = self.page()?;
        let (session, _slot) = self.session(&sel)?;
        let schema = session.plan_schema("SELECT * FROM packet_files")?;
        let tunnel = if schema.field_with_name("tunnel").is_ok() {
            ", tunnel, tunnel_id"
        } else {
            ""
        };
        let sql = format!(
            "SELECT ts_ns, wire_len, ip_text(ip_src) AS src, src_port, ip_text(ip_dst) AS dst, \
             dst_port, ip_proto AS proto, tcp_flags, tcp_seq, tcp_ack, vlan{tunnel} \
             FROM packets ORDER BY ts_ns LIMIT {per} OFFSET {}",
            page * per
        );
        let (schema, batches) = session.query_with_schema(&sql)?;
        let total = columns_i64(&session.query("SELECT count(*) AS n FROM packets")?, &["n"])?[0]
            .first()
            .copied()
            .unwrap_or(0);
        let t = Table {
            name: "packets".into(),
            schema,
            batches,
        };
        let mut v = table_json(&t, 0, per)?;
        v["total"] = json!(total);
        v["page"] = json!(page);
        v["per"] = json!(per);
        Ok(Reply::Json(v))
    }

    /// The frames of the selection as a pcap, streamed as `weir read`
    /// writes it: the response starts with the first bytes, so an error
    /// found before any (a bad filter, no frames kept) is still an error.
    pub(crate) fn pcap(&self) -> Result<Reply, ApiError> {
        let sel = self.selection()?;
        if let Some(f) = &sel.filter {
            self.check_filter(f)?;
        }
        let _slot = self.slot(
            Instant::now() + self.shared.limits.time_limit,
            every_slot_taken,
        )?;
        let opts = ReadOptions {
            datasets: self.shared.datasets.clone(),
            filter: sel.filter.clone().unwrap_or_default(),
            window: sel.window,
            output: ReadOutput::File("download".into()),
        };
        let mut head = Response::new(200, "application/vnd.tcpdump.pcap", "").with_header(
            "content-disposition",
            "attachment; filename=\"weir-selection.pcap\"",
        );
        if let Some((n, v)) = self.slot_header() {
            head = head.with_header(n, v);
        }
        let mut sink = self.responder.streamed(head);
        let r = read_frames_into(
            &opts,
            Box::new(std::io::BufWriter::with_capacity(1 << 16, &mut sink)),
        );
        match r {
            Ok(_) if !sink.started() => Err(api_err(
                500,
                "dataset",
                "the selection's pcap came out empty",
            )),
            Ok(_) => Ok(Reply::Sent),
            Err(e) if !sink.started() => Err(e.into()),
            // The client has part of a pcap; the end of the body tells it
            // no more come.
            Err(e) => {
                eprintln!("weir serve: a pcap download stopped: {e}");
                Ok(Reply::Sent)
            }
        }
    }

    /// A read-only statement (`{"sql": "..."}`, sent as JSON) over the
    /// selection's tables, at most the row limit.
    pub(crate) fn sql(&self) -> Result<Reply, ApiError> {
        let ct = self.req.header("content-type").unwrap_or("");
        if !ct.starts_with("application/json") {
            return Err(api_err(
                415,
                "refused",
                "send the statement as JSON: {\"sql\": \"SELECT ...\"}",
            ));
        }
        let body: Value = serde_json::from_slice(&self.req.body)
            .map_err(|e| api_err(400, "usage", format!("the body is not JSON: {e}")))?;
        let Some(sql) = body["sql"].as_str() else {
            return Err(api_err(400, "usage", "give {\"sql\": \"SELECT ...\"}"));
        };
        let sel = self.selection()?;
        let (session, _slot) = self.session(&sel)?;
        let max = self.shared.limits.max_rows;
        let r = session.query_read_only(sql, max)?;
        let t = Table {
            name: "result".into(),
            schema: r.schema,
            batches: r.batches,
        };
        let mut v = table_json(&t, 0, max)?;
        v["truncated"] = json!(r.truncated);
        Ok(Reply::Json(v))
    }
}
