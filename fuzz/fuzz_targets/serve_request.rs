//! weir serve's HTTP layer: any bytes as a client's request (head, query
//! string, body) through hyper's server connection, over an in-memory
//! pipe, into `httpd`'s request reading and a table of routes whose
//! handlers read requests as `weir serve`'s do (whole numbers, a window,
//! a comma list, a JSON body, a download of unknown length). Checks that
//! nothing panics or hangs and that what comes back is one well-formed
//! response (or nothing, for a request that never ended).

#![no_main]

use std::io::Write;
use std::sync::{Arc, OnceLock};

use httpd::{Handler, JSON, Options, Request, Responder, Response, Routes};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A handler: `Ok(None)` when it sent its answer itself (a download),
/// `Err` a usage error (400).
type Route = fn(&Request, &Responder) -> Result<Option<Response>, String>;

/// The shape of `weir serve`'s table: the page, GET endpoints with
/// parameters, a download, and a POST with a JSON body.
static ROUTES: &Routes<Route> = &[
    ("GET", "/", page),
    ("GET", "/index.html", page),
    ("GET", "/api/overview", window),
    ("GET", "/api/flows", flows),
    ("GET", "/api/analysis", analysis),
    ("GET", "/api/pcap", pcap),
    ("POST", "/api/sql", sql),
];

/// The most a download may be asked for.
const MAX_DOWNLOAD: i64 = 1 << 20;

fn page(_: &Request, _: &Responder) -> Result<Option<Response>, String> {
    Ok(Some(Response::new(
        200,
        "text/html; charset=utf-8",
        "<!doctype html>",
    )))
}

fn json(v: serde_json::Value) -> Result<Option<Response>, String> {
    Ok(Some(Response::new(200, JSON, v.to_string())))
}

fn window(req: &Request, _: &Responder) -> Result<Option<Response>, String> {
    let (from, to) = (req.param_i64("from")?, req.param_i64("to")?);
    if let (Some(f), Some(t)) = (from, to)
        && f >= t
    {
        return Err("from must come before to".into());
    }
    let filter = req.param("filter").map(str::trim).filter(|f| !f.is_empty());
    json(serde_json::json!({ "from": from, "to": to, "filter": filter }))
}

fn flows(req: &Request, _: &Responder) -> Result<Option<Response>, String> {
    let per = req
        .param_i64("per")?
        .map_or(50, |v| v.max(0) as usize)
        .clamp(1, 1000);
    let page = req.param_i64("page")?.map_or(0, |v| v.max(0) as usize);
    let start = page.saturating_mul(per);
    let desc = req.param("order") != Some("asc");
    json(serde_json::json!({ "start": start, "per": per, "sort": req.param("sort"), "desc": desc }))
}

fn analysis(req: &Request, _: &Responder) -> Result<Option<Response>, String> {
    let scales: Vec<i64> = match req.param("scales_ns").filter(|v| !v.is_empty()) {
        None => Vec::new(),
        Some(v) => v
            .split(',')
            .map(|s| s.trim().parse::<i64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("scales_ns={v}: give ns,ns,..."))?,
    };
    match req.param("by").unwrap_or("bytes") {
        "bytes" | "frames" => {}
        other => return Err(format!("by={other}: bytes or frames")),
    }
    json(serde_json::json!({ "name": req.param("name"), "scales": scales }))
}

/// `bytes` bytes, written in pieces as a download; none is an error
/// before the head.
fn pcap(req: &Request, r: &Responder) -> Result<Option<Response>, String> {
    let n = req.param_i64("bytes")?.unwrap_or(0).clamp(0, MAX_DOWNLOAD) as usize;
    if n == 0 {
        return Err("nothing to download".into());
    }
    let head = Response::new(200, "application/vnd.tcpdump.pcap", "")
        .with_header("content-disposition", "attachment");
    let mut w = r.streamed(head);
    let piece = [0xa5u8; 1000];
    let mut left = n;
    while left > 0 {
        let k = left.min(piece.len());
        if w.write_all(&piece[..k]).is_err() {
            break;
        }
        left -= k;
    }
    Ok(None)
}

fn sql(req: &Request, _: &Responder) -> Result<Option<Response>, String> {
    if !req
        .header("content-type")
        .unwrap_or("")
        .starts_with("application/json")
    {
        return Ok(Some(Response::error(
            415,
            "refused",
            "send the statement as JSON",
        )));
    }
    let body: serde_json::Value =
        serde_json::from_slice(&req.body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Some(sql) = body["sql"].as_str() else {
        return Err("give {\"sql\": \"SELECT ...\"}".into());
    };
    json(serde_json::json!({ "length": sql.len() }))
}

fn handle(req: Request, r: Responder) {
    let answer = match httpd::route(ROUTES, &req.method, &req.path) {
        Some(h) => h(&req, &r),
        None if req.path.starts_with("/api/") || req.path == "/" => {
            Ok(Some(Response::error(405, "usage", "not here")))
        }
        None => Ok(Some(Response::error(404, "usage", "no such page"))),
    };
    match answer {
        Ok(Some(resp)) => {
            r.send(resp);
        }
        Ok(None) => {}
        Err(m) => {
            r.send(Response::error(400, "usage", &m));
        }
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .expect("a runtime")
    })
}

/// The request's bytes in, then the end of the input; the answer to the
/// close.
fn exchange(data: &[u8]) -> Vec<u8> {
    let handler: Arc<Handler> = Arc::new(handle);
    runtime().block_on(async {
        // Larger than any input and any answer: neither side waits on the
        // other's reading.
        let (mut client, server) = tokio::io::duplex(4 << 20);
        let serving = tokio::spawn(async move {
            let opts = Options {
                half_close: true,
                ..Options::default()
            };
            httpd::serve_connection(server, &opts, handler).await
        });
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let _ = client.read_to_end(&mut out).await;
        serving.await.expect("the connection's task");
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let out = exchange(data);
    if out.is_empty() {
        // hyper closed without answering: the input ended inside a head.
        return;
    }
    // hyper says "100 Continue" first to a client that asks for it.
    let continued = b"HTTP/1.1 100 Continue\r\n\r\n";
    let out = out.strip_prefix(continued.as_slice()).unwrap_or(&out);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(out) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!(
            "not one whole response head: {other:?} in {:?}",
            String::from_utf8_lossy(out)
        ),
    };
    let status = resp.code.expect("a status");
    assert!((200..600).contains(&status), "status {status}");
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).into_owned())
    };
    let body = &out[head_len..];
    match header("content-length") {
        // Exactly the body: nothing after it (one response a connection).
        Some(len) => assert_eq!(
            len.parse::<usize>().ok(),
            Some(body.len()),
            "content-length"
        ),
        None => {
            // A download, ended by closing: HTTP/1.0, never chunked.
            assert_eq!(resp.version, Some(0), "a body without a length");
            assert!(header("transfer-encoding").is_none());
            assert_eq!(status, 200);
        }
    }
    // weir's own answers (hyper's refusals of a malformed head carry no
    // type) carry the security headers; refusals are JSON errors.
    if let Some(ct) = header("content-type") {
        assert!(
            header("content-security-policy").is_some_and(|v| v.contains("default-src 'none'"))
        );
        assert_eq!(header("connection").as_deref(), Some("close"));
        if status >= 400 {
            assert_eq!(ct, JSON);
            let v: serde_json::Value = serde_json::from_slice(body).expect("a JSON error");
            assert!(v["error"].is_string() && v["kind"].is_string(), "{v}");
        }
    }
});
