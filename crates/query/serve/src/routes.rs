//! Every endpoint in one table ([`ROUTES`]), the check of who may ask,
//! and how a handler's answer or error becomes a response. Every answer
//! about traffic is for one selection: a time window (`from`, `to`: ns
//! since the epoch) and a tcpdump filter (`filter`), as the page keeps
//! them in its address.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use analyze::AnalyzeError;
use httpd::{JSON, Request, Responder, Response};
use serde_json::Value;

use crate::{Shared, host_is_loopback};

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// What a handler answers with.
pub(crate) enum Reply {
    Json(Value),
    /// One of the page's files: its type and text.
    File(&'static str, &'static str),
    /// The handler sent its answer itself (a download).
    Sent,
    /// To the page, setting this cookie (the token, once in the page's
    /// address, kept as a cookie).
    SeeOther(String),
}

type Handler = fn(&Ctx) -> Result<Reply, ApiError>;

/// Every endpoint: method, path, handler. The page's three files, then the
/// JSON API it draws from (docs/ANALYSIS.md). Each handler (`handlers.rs`)
/// reads the request and asks `analyze`.
const ROUTES: &httpd::Routes<Handler> = &[
    ("GET", "/", index_html),
    ("GET", "/index.html", index_html),
    ("GET", "/app.js", app_js),
    ("GET", "/style.css", style_css),
    ("GET", "/api/datasets", Ctx::datasets),
    ("GET", "/api/verify", Ctx::verify),
    ("GET", "/api/check", Ctx::check),
    ("GET", "/api/overview", Ctx::overview),
    ("GET", "/api/analysis", Ctx::analysis),
    ("GET", "/api/flows", Ctx::flows),
    ("GET", "/api/packets", Ctx::packets),
    ("GET", "/api/pcap", Ctx::pcap),
    ("POST", "/api/sql", Ctx::sql),
];

fn index_html(_: &Ctx) -> Result<Reply, ApiError> {
    Ok(Reply::File("text/html; charset=utf-8", INDEX_HTML))
}

fn app_js(_: &Ctx) -> Result<Reply, ApiError> {
    Ok(Reply::File("text/javascript; charset=utf-8", APP_JS))
}

fn style_css(_: &Ctx) -> Result<Reply, ApiError> {
    Ok(Reply::File("text/css; charset=utf-8", STYLE_CSS))
}

/// An answer that is not a 200: its status, a kind the page can tell
/// apart (`filter`, `sql`, `usage`, `interrupted`, `dataset`, `auth`,
/// `refused`, `busy`), and what to do.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
}

pub(crate) fn api_err(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
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

/// How a request came by its query slot, as the header
/// `X-Weir-Query-Slot` tells the client: `free`, `waited N ms` (every
/// slot was taken when it came), or `busy` (none came free in time).
#[derive(Clone, Copy, Debug)]
pub(crate) enum SlotWait {
    Free,
    Waited(Duration),
    Busy,
}

/// One request being answered: what the handlers read.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub req: Request,
    pub responder: Responder,
    /// Set when the request takes (or fails to take) a query slot.
    pub slot_wait: Cell<Option<SlotWait>>,
}

impl Ctx {
    /// The `X-Weir-Query-Slot` header, for a request that asked for a slot.
    pub fn slot_header(&self) -> Option<(&'static str, String)> {
        let value = match self.slot_wait.get()? {
            SlotWait::Free => "free".to_string(),
            SlotWait::Waited(d) => format!("waited {} ms", d.as_millis()),
            SlotWait::Busy => "busy".to_string(),
        };
        Some(("x-weir-query-slot", value))
    }
}

/// Answers `req` through `responder`.
pub(crate) fn handle(shared: Arc<Shared>, req: Request, responder: Responder) {
    let ctx = Ctx {
        shared,
        req,
        responder,
        slot_wait: Cell::new(None),
    };
    let (shared, req) = (&*ctx.shared, &ctx.req);
    let answer = match authorized(shared, req) {
        Ok(None) => dispatch(&ctx),
        Ok(Some(reply)) => Ok(reply),
        Err(e) => Err(e),
    };
    let response = match answer {
        Ok(Reply::Sent) => return,
        Ok(Reply::Json(v)) => Response::new(200, JSON, v.to_string()),
        Ok(Reply::File(content_type, text)) => Response::new(200, content_type, text),
        Ok(Reply::SeeOther(cookie)) => Response::new(303, "text/plain; charset=utf-8", "")
            .with_header("location", "/")
            .with_header("set-cookie", cookie),
        Err(e) => {
            if e.kind == "interrupted" {
                // The operator sees what was stopped, and why.
                eprintln!("weir serve: {} {}: {}", req.method, req.path, e.message);
            }
            let r = Response::error(e.status, e.kind, &e.message);
            if e.kind == "auth" {
                r.with_header("www-authenticate", "Bearer")
            } else {
                r
            }
        }
    };
    let response = match ctx.slot_header() {
        Some((n, v)) => response.with_header(n, v),
        None => response,
    };
    ctx.responder.send(response);
}

fn dispatch(ctx: &Ctx) -> Result<Reply, ApiError> {
    let req = &ctx.req;
    if let Some(handler) = httpd::route(ROUTES, &req.method, &req.path) {
        return handler(ctx);
    }
    let p = &req.path;
    if p.starts_with("/api/") || p == "/" {
        Err(api_err(
            405,
            "usage",
            format!("{} {p}: not here", req.method),
        ))
    } else {
        Err(api_err(
            404,
            "usage",
            format!("{p}: no such page; the server serves / and /api/ only"),
        ))
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

/// Whether the request may be answered: with a token, it carries it
/// (or brings it once in the page's address: then the answer is a
/// redirect that sets it as a cookie); without, it names the loopback as
/// its Host.
fn authorized(shared: &Shared, req: &Request) -> Result<Option<Reply>, ApiError> {
    if shared.token.is_none() {
        if req.header("host").is_some_and(host_is_loopback) {
            return Ok(None);
        }
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
    if req.method == "GET"
        && req.path == "/"
        && let Some(t) = req.param("token")
    {
        if !shared.token_matches(t) {
            return Err(api_err(401, "auth", "wrong token"));
        }
        return Ok(Some(Reply::SeeOther(format!(
            "weir_token={t}; HttpOnly; SameSite=Strict; Path=/"
        ))));
    }
    match presented_token(req) {
        None => Err(api_err(
            401,
            "auth",
            "this server needs its token: send Authorization: Bearer TOKEN, or open the page \
             once as /?token=TOKEN",
        )),
        Some(t) if !shared.token_matches(t) => Err(api_err(401, "auth", "wrong token")),
        Some(_) => Ok(None),
    }
}
