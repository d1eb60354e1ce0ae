//! The routes: the page's files, and the JSON API it draws from. Every
//! answer about traffic is for one selection: a time window (`from`, `to`:
//! ns since the epoch) and a tcpdump filter (`filter`), as the page keeps
//! them in its address.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use analyze::answer::{Analysis, AnswerOptions, Settings, answer};
use analyze::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use analyze::arrow::compute::{
    SortOptions, cast, concat_batches, sort_to_indices, take_record_batch,
};
use analyze::arrow::datatypes::{DataType, Int64Type};
use analyze::read::{ReadOptions, ReadOutput, check_filter, read_frames_into};
use analyze::render::{rank, unit_of};
use analyze::{AnalyzeError, By, Session, Table, TimeWindow};
use serde_json::{Value, json};

use crate::http::{self, Request};
use crate::{Shared, Slot, host_is_loopback};

pub const JSON: &str = "application/json";

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// Bars of the overview across the window.
const OVERVIEW_BARS: i64 = 300;
/// The most rows a page of flows or packets may ask for.
const MAX_PAGE: usize = 1000;
/// How long a verification of the datasets is reused.
const VERIFY_REUSE: Duration = Duration::from_secs(60);

/// An answer that is not a 200: its status, a kind the page can tell
/// apart (`filter`, `sql`, `usage`, `interrupted`, `dataset`, `auth`,
/// `refused`, `busy`), and what to do.
#[derive(Debug)]
struct ApiError {
    status: u16,
    kind: &'static str,
    message: String,
}

fn api_err(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        kind,
        message: message.into(),
    }
}

impl From<AnalyzeError> for ApiError {
    fn from(e: AnalyzeError) -> Self {
        let (status, kind) = match &e {
            AnalyzeError::Filter(_) => (400, "filter"),
            AnalyzeError::Sql(_) => (400, "sql"),
            AnalyzeError::Usage(_) => (400, "usage"),
            AnalyzeError::Interrupted(_) => (503, "interrupted"),
            AnalyzeError::Store(_) | AnalyzeError::Io { .. } | AnalyzeError::Engine(_) => {
                (500, "dataset")
            }
        };
        api_err(status, kind, e.to_string())
    }
}

pub fn error_body(kind: &str, message: &str) -> String {
    json!({ "error": message, "kind": kind }).to_string()
}

/// Answers `req` on `stream`.
pub fn handle(shared: &Shared, req: &Request, stream: &mut TcpStream) {
    if let Err(e) = route(shared, req, stream) {
        if e.kind == "interrupted" {
            // The operator sees what was stopped, and why.
            eprintln!("weir serve: {} {}: {}", req.method, req.path, e.message);
        }
        let mut extra = Vec::new();
        if e.kind == "auth" {
            extra.push(("WWW-Authenticate", "Bearer"));
        }
        let body = error_body(e.kind, &e.message);
        let _ = http::respond(stream, e.status, JSON, &extra, body.as_bytes());
    }
}

/// The token a request carries: as a bearer token, or in the cookie the
/// page was given.
fn presented_token(req: &Request) -> Option<&str> {
    if let Some(v) = req.header("authorization") {
        return v.strip_prefix("Bearer ").map(str::trim);
    }
    req.header("cookie")?
        .split(';')
        .filter_map(|c| c.trim().strip_prefix("weir_token="))
        .next()
}

fn route(shared: &Shared, req: &Request, stream: &mut TcpStream) -> Result<(), ApiError> {
    if shared.token.is_some() {
        // The page's address may carry the token once (weir serve prints
        // it); it is then kept as a cookie the page's requests carry.
        if req.method == "GET" && req.path == "/" {
            if let Some(t) = req.param("token") {
                if !shared.token_matches(t) {
                    return Err(api_err(401, "auth", "wrong token"));
                }
                let cookie = format!("weir_token={t}; HttpOnly; SameSite=Strict; Path=/");
                let _ = http::respond(
                    stream,
                    303,
                    "text/plain; charset=utf-8",
                    &[("Location", "/"), ("Set-Cookie", &cookie)],
                    b"",
                );
                return Ok(());
            }
        }
        match presented_token(req) {
            None => {
                return Err(api_err(
                    401,
                    "auth",
                    "this server needs its token: send Authorization: Bearer TOKEN, or open \
                     the page once as /?token=TOKEN",
                ));
            }
            Some(t) if !shared.token_matches(t) => {
                return Err(api_err(401, "auth", "wrong token"));
            }
            Some(_) => {}
        }
    } else if !req.header("host").is_some_and(host_is_loopback) {
        return Err(api_err(
            421,
            "refused",
            format!(
                "this server answers only requests to the loopback ({}); a page from another \
                 name cannot read it",
                shared.listen
            ),
        ));
    }
    let asset = |stream: &mut TcpStream, ct: &str, body: &str| {
        let _ = http::respond(stream, 200, ct, &[], body.as_bytes());
        Ok(())
    };
    let ctx = Ctx {
        shared,
        req,
        probe: stream.try_clone().ok().map(Arc::new),
    };
    let value = match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/") | ("GET", "/index.html") => {
            return asset(stream, "text/html; charset=utf-8", INDEX_HTML);
        }
        ("GET", "/app.js") => return asset(stream, "text/javascript; charset=utf-8", APP_JS),
        ("GET", "/style.css") => return asset(stream, "text/css; charset=utf-8", STYLE_CSS),
        ("GET", "/api/datasets") => ctx.datasets()?,
        ("GET", "/api/verify") => ctx.verify()?,
        ("GET", "/api/check") => ctx.check()?,
        ("GET", "/api/overview") => ctx.overview()?,
        ("GET", "/api/analysis") => ctx.analysis()?,
        ("GET", "/api/flows") => ctx.flows()?,
        ("GET", "/api/packets") => ctx.packets()?,
        ("GET", "/api/pcap") => return ctx.pcap(stream),
        ("POST", "/api/sql") => ctx.sql()?,
        (_, p) if p.starts_with("/api/") || p == "/" => {
            return Err(api_err(
                405,
                "usage",
                format!("{} {p}: not here", req.method),
            ));
        }
        (_, p) => {
            return Err(api_err(
                404,
                "usage",
                format!("{p}: no such page; the server serves / and /api/ only"),
            ));
        }
    };
    let _ = http::respond(stream, 200, JSON, &[], value.to_string().as_bytes());
    Ok(())
}

/// The selection of a request.
struct Selection {
    window: TimeWindow,
    filter: Option<String>,
}

struct Ctx<'a> {
    shared: &'a Shared,
    req: &'a Request,
    /// The client's socket, to notice when it goes away.
    probe: Option<Arc<TcpStream>>,
}

impl Ctx<'_> {
    fn param_i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.req.param(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| api_err(400, "usage", format!("{name}={v}: give a whole number"))),
        }
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
        let mut links = Vec::new();
        for d in self.located()? {
            for i in &d.manifest.interfaces {
                if !links.contains(&i.link_type) {
                    links.push(i.link_type);
                }
            }
        }
        if links.is_empty() {
            links.push(wire::LinkType::ETHERNET.0);
        }
        for l in links {
            check_filter(filter, wire::LinkType(l))?;
        }
        Ok(())
    }

    /// A query slot, and a session over the selection whose queries stop
    /// at the time limit or when the client goes away.
    fn session(&self, sel: &Selection) -> Result<(Session, Slot<'_>), ApiError> {
        let limits = &self.shared.limits;
        let deadline = Instant::now() + limits.time_limit;
        let slot = self.shared.slots.take(deadline).ok_or_else(|| {
            api_err(
                503,
                "busy",
                format!(
                    "{} queries were running for the whole time limit; try again",
                    limits.max_queries
                ),
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
        let probe = self.probe.clone();
        let limit = limits.time_limit;
        session.set_interrupt(Arc::new(move || {
            if Instant::now() >= deadline {
                Some(format!(
                    "the request's time limit ({}s) passed; narrow the window or the filter, or \
                     start weir serve with a larger --time-limit",
                    limit.as_secs_f64()
                ))
            } else if probe.as_deref().is_some_and(http::client_gone) {
                Some("the client went away".into())
            } else {
                None
            }
        }));
        Ok((session, slot))
    }

    /// Every dataset served: each given, or each below a prefix given.
    fn located(&self) -> Result<Vec<store::location::Located>, ApiError> {
        let mut out = Vec::new();
        for root in &self.shared.datasets {
            out.extend(store::location::datasets_under(root).map_err(AnalyzeError::from)?);
        }
        Ok(out)
    }

    fn datasets(&self) -> Result<Value, ApiError> {
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
        Ok(json!({
            "datasets": out,
            "span": span.map(|(a, b)| json!({"first_ns": a, "last_ns": b})),
            "limits": {
                "max_rows": self.shared.limits.max_rows,
                "time_limit_s": self.shared.limits.time_limit.as_secs_f64(),
            },
            "analyses": analyze::answer::KINDS.iter().map(|k| json!({
                "name": k.name, "about": k.about,
            })).collect::<Vec<_>>(),
        }))
    }

    /// `weir verify` of every dataset (without a key or a seal), reused
    /// for a minute unless `fresh=1`.
    fn verify(&self) -> Result<Value, ApiError> {
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
                return Ok(v.clone());
            }
        }
        let _slot = self
            .shared
            .slots
            .take(Instant::now() + self.shared.limits.time_limit)
            .ok_or_else(|| api_err(503, "busy", "every query slot is taken; try again"))?;
        let mut out = Vec::new();
        for d in self.located()? {
            let threads = self.shared.limits.query_threads.max(1);
            let v = store::integrity::verify(&d.root, None, None, threads)
                .map_err(AnalyzeError::from)?;
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
        Ok(v)
    }

    /// Whether the filter compiles (libpcap) and translates to the
    /// records' columns (the tables' reading of it).
    fn check(&self) -> Result<Value, ApiError> {
        let sel = self.selection()?;
        let Some(f) = &sel.filter else {
            return Ok(json!({ "ok": true }));
        };
        self.check_filter(f)?;
        // Whether the records hold tunnels changes an outer filter's
        // translation: checked on the datasets themselves.
        let (_session, _slot) = self.session(&sel)?;
        Ok(json!({ "ok": true }))
    }

    fn overview(&self) -> Result<Value, ApiError> {
        let sel = self.selection()?;
        let (session, _slot) = self.session(&sel)?;
        let data = session.data_span_ns();
        let Some((a, b)) = session.span_ns() else {
            return Ok(json!({ "empty": true, "data_span": data }));
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
        Ok(json!({
            "from_ns": a,
            "to_ns": b + 1,
            "bucket_ns": bucket,
            "data_span": data,
            "traffic": { "t": times(&t[0]), "frames": t[1], "bytes": t[2] },
            "stats": {
                "t": times(&d[0]), "kernel_seen": d[1], "captured": d[2],
                "kernel_drops": d[3], "queue_freezes": d[4], "pcap_drops": d[5],
            },
        }))
    }

    /// One analysis by its registry name (`name`, and `what` for top),
    /// with `by`, `limit`, `every_ns`, `sample_ns`, `scales_ns`.
    fn analysis(&self) -> Result<Value, ApiError> {
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
        Ok(json!({ "how": answered.how, "tables": tables }))
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
    fn flows(&self) -> Result<Value, ApiError> {
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
        Ok(v)
    }

    /// The packet records of the selection in time order, one page.
    fn packets(&self) -> Result<Value, ApiError> {
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
        Ok(v)
    }

    /// The frames of the selection as a pcap, streamed as `weir read`
    /// writes it: the response starts with the first bytes, so an error
    /// found before any (a bad filter, no frames kept) is still an error.
    fn pcap(&self, stream: &mut TcpStream) -> Result<(), ApiError> {
        let sel = self.selection()?;
        if let Some(f) = &sel.filter {
            self.check_filter(f)?;
        }
        let _slot = self
            .shared
            .slots
            .take(Instant::now() + self.shared.limits.time_limit)
            .ok_or_else(|| api_err(503, "busy", "every query slot is taken; try again"))?;
        let opts = ReadOptions {
            datasets: self.shared.datasets.clone(),
            filter: sel.filter.clone().unwrap_or_default(),
            window: sel.window,
            output: ReadOutput::File("download".into()),
        };
        let out = stream
            .try_clone()
            .map_err(|e| api_err(500, "dataset", e.to_string()))?;
        let mut sink = HeadFirst {
            stream: out,
            sent: false,
        };
        let r = read_frames_into(
            &opts,
            Box::new(std::io::BufWriter::with_capacity(1 << 16, &mut sink)),
        );
        match r {
            Ok(_) => Ok(()),
            Err(e) if !sink.sent => Err(e.into()),
            // The client has part of a pcap; closing tells it no more come.
            Err(e) => {
                eprintln!("weir serve: a pcap download stopped: {e}");
                Ok(())
            }
        }
    }

    /// A read-only statement (`{"sql": "..."}`, sent as JSON) over the
    /// selection's tables, at most the row limit.
    fn sql(&self) -> Result<Value, ApiError> {
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
        Ok(v)
    }
}

/// Sends the response's head before the first byte of the body.
struct HeadFirst {
    stream: TcpStream,
    sent: bool,
}

impl Write for HeadFirst {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.sent {
            http::respond_streamed(
                &mut self.stream,
                "application/vnd.tcpdump.pcap",
                &[(
                    "Content-Disposition",
                    "attachment; filename=\"weir-selection.pcap\"",
                )],
            )?;
            self.sent = true;
        }
        self.stream.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// A bar width for the overview: 1, 2 or 5 times a power of ten ns, or a
/// whole number of seconds, minutes, hours.
fn nice_bucket(at_least: i64) -> i64 {
    let at_least = at_least.max(1);
    const S: i64 = 1_000_000_000;
    if at_least >= S {
        for step in [
            S,
            2 * S,
            5 * S,
            10 * S,
            15 * S,
            30 * S,
            60 * S,
            120 * S,
            300 * S,
            600 * S,
            900 * S,
            1800 * S,
            3600 * S,
            7200 * S,
            21600 * S,
            43200 * S,
            86400 * S,
        ] {
            if step >= at_least {
                return step;
            }
        }
        return (at_least + 86400 * S - 1) / (86400 * S) * 86400 * S;
    }
    let mut p = 1i64;
    loop {
        for m in [1, 2, 5] {
            if p * m >= at_least {
                return p * m;
            }
        }
        p *= 10;
    }
}

/// The named integer columns of `batches`, each as i64.
fn columns_i64(batches: &[RecordBatch], names: &[&str]) -> Result<Vec<Vec<i64>>, ApiError> {
    let mut out = vec![Vec::new(); names.len()];
    for b in batches {
        for (k, n) in names.iter().enumerate() {
            let c: &ArrayRef = b
                .column_by_name(n)
                .ok_or_else(|| api_err(500, "dataset", format!("no column {n}")))?;
            let c =
                cast(c, &DataType::Int64).map_err(|e| api_err(500, "dataset", e.to_string()))?;
            let c = c.as_primitive::<Int64Type>();
            out[k].extend((0..c.len()).map(|r| if c.is_null(r) { 0 } else { c.value(r) }));
        }
    }
    Ok(out)
}

/// Integers a JavaScript number cannot hold exactly (times in ns since the
/// epoch) as strings of their digits.
fn exact_in_javascript(v: &mut Value) {
    const EXACT: u64 = 1 << 53;
    match v {
        Value::Number(n)
            if n.as_i64().is_some_and(|i| i.unsigned_abs() > EXACT)
                || n.as_u64().is_some_and(|u| u > EXACT) =>
        {
            *v = Value::String(n.to_string());
        }
        Value::Array(a) => a.iter_mut().for_each(exact_in_javascript),
        Value::Object(o) => o.values_mut().for_each(exact_in_javascript),
        _ => {}
    }
}

/// A table as `{name, columns, units, ranks, rows}`: rows from `skip`, at
/// most `max`, as objects (a null is left out, addresses are text);
/// each column's unit and rank (0 most telling) as the terminal has them;
/// `truncated` when rows were left out.
fn table_json(t: &Table, skip: usize, max: usize) -> Result<Value, ApiError> {
    let mut kept = Vec::new();
    let mut to_skip = skip;
    let mut left = max;
    for b in &t.batches {
        if to_skip >= b.num_rows() {
            to_skip -= b.num_rows();
            continue;
        }
        let take = (b.num_rows() - to_skip).min(left);
        if take > 0 {
            kept.push(b.slice(to_skip, take));
        }
        to_skip = 0;
        left -= take;
    }
    let total = t.rows();
    let part = Table {
        name: t.name.clone(),
        schema: t.schema.clone(),
        batches: kept,
    };
    let mut rows: Value = if part.rows() == 0 {
        json!([])
    } else {
        let text = analyze::render::render(&[part], analyze::render::Format::Json)?;
        serde_json::from_str(&text).map_err(|e| api_err(500, "dataset", e.to_string()))?
    };
    exact_in_javascript(&mut rows);
    // How the page shows each column: the terminal's units and ranks.
    let fields = t.schema.fields();
    let units: Vec<&str> = fields
        .iter()
        .map(|f| unit_of(f.name(), f.data_type()).name())
        .collect();
    let ranks: Vec<u8> = fields.iter().map(|f| rank(f.name())).collect();
    Ok(json!({
        "name": t.name,
        "columns": fields.iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
        "units": units,
        "ranks": ranks,
        "rows": rows,
        "truncated": skip + max < total,
    }))
}

/// A dataset's name on the page: the last part of its path or URL.
fn short_name(root: &dyn util::storage::Storage) -> String {
    let name = root.name();
    let trimmed = name.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_round() {
        assert_eq!(nice_bucket(0), 1);
        assert_eq!(nice_bucket(3), 5);
        assert_eq!(nice_bucket(1_100), 2_000);
        assert_eq!(nice_bucket(600_000_000), 1_000_000_000);
        assert_eq!(nice_bucket(1_000_000_001), 2_000_000_000);
        assert_eq!(nice_bucket(40 * 1_000_000_000), 60_000_000_000);
    }
}
