//! Requests through hyper over an in-memory pipe: what a handler sees,
//! what the limits refuse, how a download and a missing answer go out,
//! and a client that goes away.

use std::io::Write as _;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .unwrap()
}

/// Sends `request`, ends the input, and reads the answer to the close.
fn exchange(request: &[u8], handler: Arc<Handler>) -> String {
    runtime().block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let serving = tokio::spawn(async move {
            let opts = Options {
                half_close: true,
                ..Options::default()
            };
            serve_connection(server, &opts, handler).await
        });
        client.write_all(request).await.unwrap();
        client.shutdown().await.unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        serving.await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    })
}

/// A handler that answers with what it was asked, as JSON.
fn echo() -> Arc<Handler> {
    Arc::new(|req: Request, r: Responder| {
        let v = serde_json::json!({
            "method": req.method,
            "path": req.path,
            "query": req.query,
            "host": req.header("host"),
            "body": String::from_utf8_lossy(&req.body),
            "n": req.param_i64("n").ok().flatten(),
        });
        r.send(Response::new(200, JSON, v.to_string()));
    })
}

fn body_json(response: &str) -> serde_json::Value {
    let (_, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

#[test]
fn a_request_as_handlers_see_it() {
    let r = exchange(
        b"POST /a%20b/c?filter=tcp+port%2080&n=7&x HTTP/1.1\r\nHost: Localhost:9\r\n\
          Content-Length: 5\r\n\r\nhello",
        echo(),
    );
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    let head = r.split("\r\n\r\n").next().unwrap();
    for h in [
        "content-type: application/json",
        "content-security-policy: default-src 'none'; script-src 'self';",
        "x-frame-options: DENY",
        "cache-control: no-store",
        "connection: close",
        "content-length: ",
    ] {
        assert!(head.contains(h), "{h}: {head}");
    }
    let v = body_json(&r);
    assert_eq!(v["method"], "POST");
    assert_eq!(v["path"], "/a b/c");
    assert_eq!(
        v["query"],
        serde_json::json!([["filter", "tcp port 80"], ["n", "7"], ["x", ""]])
    );
    assert_eq!(v["host"], "Localhost:9");
    assert_eq!(v["body"], "hello");
    assert_eq!(v["n"], 7);
}

#[test]
fn limits_refuse_with_their_status() {
    let status = |req: &[u8]| -> u16 {
        let r = exchange(req, echo());
        r.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {r:?}"))
    };
    let big = format!(
        "POST /x HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY + 1
    );
    assert_eq!(status(big.as_bytes()), 413);
    assert_eq!(
        status(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        411
    );
    assert_eq!(status(b"GET /%zz HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET /x?a=%ff HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET /x HTTP/1.1\r\nX: \xff\r\n\r\n"), 400);
    assert_eq!(status(b"NOT HTTP\r\n\r\n"), 400);
    let long = format!("GET /x HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
    assert_eq!(status(long.as_bytes()), 431);
    let many: String = (0..=MAX_HEADERS).map(|i| format!("X{i}: y\r\n")).collect();
    assert_eq!(
        status(format!("GET /x HTTP/1.1\r\n{many}\r\n").as_bytes()),
        431
    );
    // The refusals read as the API's errors.
    let r = exchange(big.as_bytes(), echo());
    assert_eq!(body_json(&r)["kind"], "request");
}

#[test]
fn a_download_goes_out_whole_and_ends_by_closing() {
    let handler: Arc<Handler> = Arc::new(|_req: Request, r: Responder| {
        let head = Response::new(200, "application/vnd.tcpdump.pcap", "")
            .with_header("content-disposition", "attachment");
        let mut w = r.streamed(head);
        assert!(!w.started());
        for i in 0..100u8 {
            w.write_all(&[i; 1000]).unwrap();
        }
        assert!(w.started());
    });
    let r = exchange(b"GET /pcap HTTP/1.1\r\n\r\n", handler);
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK"), "{head}");
    assert!(head.contains("content-disposition: attachment"), "{head}");
    assert!(!head.contains("transfer-encoding") && !head.contains("content-length"));
    let want: Vec<u8> = (0..100u8).flat_map(|i| [i; 1000]).collect();
    assert_eq!(body.as_bytes(), want.as_slice());
}

#[test]
fn a_handler_without_an_answer_is_a_500() {
    let r = exchange(
        b"GET / HTTP/1.1\r\n\r\n",
        Arc::new(|_: Request, _: Responder| {}),
    );
    assert!(r.starts_with("HTTP/1.1 500"), "{r}");
    assert_eq!(body_json(&r)["kind"], "internal");
    let r = exchange(
        b"GET / HTTP/1.1\r\n\r\n",
        Arc::new(|_: Request, _: Responder| panic!("a handler's bug")),
    );
    assert!(r.starts_with("HTTP/1.1 500"), "{r}");
}

/// A client that closes its connection while its answer is being made:
/// the handler sees it gone (and, in weir serve, stops its query).
#[test]
fn a_client_that_goes_away_is_seen_gone() {
    let (saw, seen) = mpsc::channel();
    let started = Arc::new(tokio::sync::Notify::new());
    let running = started.clone();
    let handler: Arc<Handler> = Arc::new(move |_req: Request, r: Responder| {
        running.notify_one();
        let gone = r.gone();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !gone.is_gone() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        saw.send(gone.is_gone()).unwrap();
        r.send(Response::new(200, JSON, "{}"));
    });
    runtime().block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let serving =
            tokio::spawn(
                async move { serve_connection(server, &Options::default(), handler).await },
            );
        client
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // Once its handler runs, the client goes away.
        started.notified().await;
        drop(client);
        serving.await.unwrap();
    });
    assert_eq!(seen.recv(), Ok(true));
}

#[test]
fn routes_by_method_and_path() {
    let table: &Routes<u8> = &[("GET", "/", 1), ("POST", "/api/sql", 2)];
    assert_eq!(route(table, "GET", "/"), Some(&1));
    assert_eq!(route(table, "POST", "/api/sql"), Some(&2));
    assert_eq!(route(table, "GET", "/api/sql"), None);
    assert_eq!(route(table, "GET", "/index"), None);
}

#[test]
fn queries_decode() {
    assert_eq!(
        parse_query("filter=tcp+port%2080&from=5&x").unwrap(),
        vec![
            ("filter".into(), "tcp port 80".into()),
            ("from".into(), "5".into()),
            ("x".into(), "".into())
        ]
    );
    assert!(parse_query("a=%zz").is_none());
    assert!(parse_query("a=%ff").is_none());
    assert_eq!(percent_decode("%2e%2E/").unwrap(), "../");
    assert!(percent_decode("%").is_none() && percent_decode("%4").is_none());
}

/// Any bytes at all: an answer or `None`, never a panic; and what an
/// encoder makes of any text decodes back to it.
#[test]
fn any_input_decodes_or_is_refused() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet = b"%=&+0123456789abcdefABCDEFxyz/.\xc3\xa9 \x00";
    for _ in 0..20_000 {
        let len = (next() % 24) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_query(&text);
        if let Some(d) = percent_decode(&text) {
            let encoded: String = d.bytes().map(|b| format!("%{b:02x}")).collect();
            assert_eq!(percent_decode(&encoded).as_deref(), Some(d.as_str()));
        }
    }
}
