//! `weir serve`: its API's answers and refusals, its page driven in
//! headless Chromium (load, zoom, filter, sort, a flow's packets, its pcap
//! against `weir read`), and the page following a running capture.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::web::{Browser, enc, get, http, serve, tcpdump_frames};
use common::*;
use serde_json::json;

/// A dataset of TCP sessions over six seconds, its records pointing into
/// the trace.
fn dataset(s: &Scratch) -> PathBuf {
    let trace = s.join("trace.pcap");
    let mut cmd = weir();
    cmd.args([
        "gen",
        "--model",
        "app",
        "-c",
        "20000",
        "--sessions-per-s",
        "50",
        "--seed",
        "3",
        "-w",
    ])
    .arg(&trace);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.args(["convert", "-q", "--index-sources"])
        .arg(&trace)
        .arg("-o")
        .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ds
}

/// `weir read DS --from --to FILTER -w OUT`: the frames tcpdump reads back.
fn weir_read(ds: &Path, from: Option<i64>, to: Option<i64>, filter: &str, out: &Path) -> usize {
    let mut cmd = weir();
    cmd.arg("read").arg(ds).arg("-q").arg("-w").arg(out);
    if let Some(f) = from {
        cmd.args(["--from", &store::time::format_ns(f)]);
    }
    if let Some(t) = to {
        cmd.args(["--to", &store::time::format_ns(t)]);
    }
    if !filter.is_empty() {
        cmd.arg(filter);
    }
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    tcpdump_frames(out)
}

/// How a query came by its slot (`X-Weir-Query-Slot`): `free`, `waited N
/// ms` or `busy`.
fn query_slot(r: &common::web::Response) -> String {
    r.head
        .lines()
        .find_map(|l| l.strip_prefix("x-weir-query-slot: "))
        .unwrap_or("")
        .to_string()
}

fn stop(bg: common::background::Background) {
    bg.signal(libc::SIGTERM);
    bg.wait(Duration::from_secs(20));
}

#[test]
fn api_answers_and_refuses() {
    let s = Scratch::new("serve-api");
    let ds = dataset(&s);
    let d = ds.to_str().unwrap();

    // Another address than the loopback, without a token: refused at start.
    let mut cmd = weir();
    cmd.args(["serve", d, "--listen", "0.0.0.0:0"]);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("--token FILE"), "{}", r.stderr());
    // A token too short to be one.
    std::fs::write(s.join("short"), "abc\n").unwrap();
    let mut cmd = weir();
    cmd.args(["serve", d, "--token"]).arg(s.join("short"));
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("at least 16"), "{}", r.stderr());

    let token = "s3cret-token-for-the-test-0123";
    std::fs::write(s.join("token"), format!("{token}\n")).unwrap();
    let (srv, addr) = serve(&[d, "--token", s.join("token").to_str().unwrap()]);
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    let get_auth = |target: &str| http(addr, "GET", target, &auth, b"");

    // No token, a wrong one, the right one.
    let r = get(addr, "/api/datasets");
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["kind"], "auth");
    let r = http(
        addr,
        "GET",
        "/api/datasets",
        &[("Authorization", "Bearer s3cret-token-for-the-test-0124")],
        b"",
    );
    assert_eq!(r.status, 401);
    let r = get_auth("/api/datasets");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["datasets"][0]["frames"], 20000);
    // The page's address carries it once; then a cookie does.
    let r = get(addr, &format!("/?token={}", enc(token)));
    assert_eq!(r.status, 303);
    assert!(r.head.contains("set-cookie: weir_token="), "{}", r.head);
    assert!(r.head.contains("httponly"), "{}", r.head);
    let cookie = format!("weir_token={token}");
    let r = http(addr, "GET", "/", &[("Cookie", cookie.as_str())], b"");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("<script src=\"/app.js\""));
    // No inline or remote script, on every response.
    let csp = r
        .head
        .lines()
        .find(|l| l.starts_with("content-security-policy:"))
        .expect("a CSP header")
        .to_string();
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("http"),
        "{csp}"
    );

    // No path reaches the file system.
    for p in [
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/../../etc/passwd",
        "/etc/passwd",
    ] {
        let r = get_auth(p);
        assert!(r.status == 404 || r.status == 405, "{p}: {}", r.status);
        assert!(!r.text().contains("root:"), "{p}");
    }

    // The SQL box takes queries only.
    let sql = |q: &str| {
        let body = json!({ "sql": q }).to_string();
        http(
            addr,
            "POST",
            "/api/sql",
            &[auth[0], ("Content-Type", "application/json")],
            body.as_bytes(),
        )
    };
    let r = sql("SELECT count(*) AS n FROM packets WHERE ip_proto = 6");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["rows"][0]["n"].as_i64().unwrap() > 0);
    let copied = s.join("copied.csv");
    for q in [
        "CREATE TABLE t AS SELECT 1".to_string(),
        "DROP VIEW packets".to_string(),
        "INSERT INTO stats SELECT * FROM stats".to_string(),
        format!("COPY (SELECT 1) TO '{}'", copied.display()),
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
        "SELECT * FROM '/etc/passwd'".to_string(),
    ] {
        let r = sql(&q);
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert_eq!(r.json()["kind"], "sql", "{q}: {}", r.text());
    }
    assert!(!copied.exists());
    let r = get_auth("/api/sql");
    assert_eq!(r.status, 405);
    let r = http(
        addr,
        "POST",
        "/api/sql",
        &[auth[0], ("Content-Type", "text/plain")],
        b"SELECT 1",
    );
    assert_eq!(r.status, 415);
    // Addresses as text, lists of them too, with each column's unit and
    // rank (the terminal's) for the page.
    let r = sql("SELECT * FROM dns WHERE answer_count > 0 LIMIT 5");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let row = &v["rows"][0];
    // IPv4 dotted, IPv6 in RFC 5952 form (as Rust writes it).
    let text = |v: &serde_json::Value| {
        let s = v.as_str().unwrap_or_default();
        s.parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.to_string() == s)
    };
    assert!(text(&row["client"]) && text(&row["server"]), "{row}");
    let answers = row["answer_addrs"].as_array().expect("a list");
    assert!(!answers.is_empty() && answers.iter().all(text), "{row}");
    let unit_of = |c: &str| {
        let i = v["columns"]
            .as_array()
            .unwrap()
            .iter()
            .position(|x| x == c)
            .unwrap();
        (v["units"][i].clone(), v["ranks"][i].clone())
    };
    assert_eq!(unit_of("latency_ns").0, "duration");
    let r =
        sql("SELECT ip_proto, count(*) AS frames, sum(wire_len) AS bytes FROM packets GROUP BY 1");
    let v = r.json();
    assert_eq!(v["units"], json!(["protocol", "count", "bytes"]), "{v}");
    assert_eq!(v["ranks"][2], 0);
    // The row limit holds.
    let r = sql("SELECT * FROM packets");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["rows"].as_array().unwrap().len(), 10_000);
    assert_eq!(r.json()["truncated"], true);

    // A filter libpcap does not compile: libpcap's own error, as a filter
    // error; one it compiles: fine.
    let r = get_auth(&format!("/api/check?filter={}", enc("tcp port")));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["kind"], "filter");
    assert!(r.json()["error"].as_str().unwrap().contains("syntax error"));
    let r = get_auth(&format!("/api/check?filter={}", enc("tcp port 80")));
    assert_eq!(r.status, 200, "{}", r.text());

    // Analyses by their registry names; an unknown one is refused by name.
    let r = get_auth("/api/analysis?name=top&what=ports&limit=5");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["tables"][0]["rows"].as_array().unwrap().len(), 5);
    let r = get_auth("/api/analysis?name=flowz");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("unknown analysis"));

    // Flows sorted both ways, paged.
    let r = get_auth("/api/flows?sort=fwd_frames&order=asc&per=40");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let col: Vec<i64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fwd_frames"].as_i64().unwrap())
        .collect();
    assert_eq!(col.len(), 40);
    assert!(col.windows(2).all(|w| w[0] <= w[1]), "{col:?}");
    assert!(v["total"].as_u64().unwrap() > 40);

    // The pcap of a selection is what weir read writes for it.
    let span = get_auth("/api/datasets").json()["span"].clone();
    let first = span["first_ns"].as_i64().unwrap();
    let (from, to) = (first + 1_000_000_000, first + 2_000_000_000);
    let r = get_auth(&format!(
        "/api/pcap?from={from}&to={to}&filter={}",
        enc("tcp")
    ));
    assert_eq!(r.status, 200);
    assert!(r.head.contains("attachment"));
    let got = s.join("got.pcap");
    std::fs::write(&got, &r.body).unwrap();
    let want = s.join("want.pcap");
    let n = weir_read(&ds, Some(from), Some(to), "tcp", &want);
    assert!(n > 1000, "{n}");
    assert_eq!(tcpdump_frames(&got), n);
    assert_eq!(std::fs::read(&want).unwrap(), r.body);
    // A bad filter before any byte: an error, not a broken pcap.
    let r = get_auth(&format!("/api/pcap?filter={}", enc("tcp port")));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["kind"], "filter");
    stop(srv);

    // Without a token, only requests to the loopback by name are answered
    // (a page whose name was rebound to 127.0.0.1 cannot read the API).
    let (srv, addr) = serve(&[d, "--time-limit", "2s", "--max-queries", "1"]);
    let r = http(
        addr,
        "GET",
        "/api/datasets",
        &[("Host", "rebound.example:80")],
        b"",
    );
    assert_eq!(r.status, 421);
    let r = http(addr, "GET", "/api/datasets", &[("Host", "localhost")], b"");
    assert_eq!(r.status, 200);
    // A query past its time limit (a sum over 10^15 rows, streamed in
    // constant memory) is stopped, and frees its slot.
    let body = json!({"sql": "SELECT sum(value % 7) FROM range(1000000000000000)"}).to_string();
    let r = http(
        addr,
        "POST",
        "/api/sql",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["kind"], "interrupted");
    assert!(r.text().contains("time limit"), "{}", r.text());
    // It found the one slot free: it ran, and was stopped running.
    assert_eq!(query_slot(&r), "free", "{}", r.head);
    // The slot is free again: the next query gets it without waiting (and
    // answers, or on a loaded machine meets its own 2-s limit, running).
    let r = get(addr, "/api/overview");
    assert_eq!(query_slot(&r), "free", "{}", r.head);
    assert!(
        r.status == 200 || r.json()["kind"] == "interrupted",
        "{}",
        r.text()
    );
    // Two queries for the one slot at once: the one that gets it runs to
    // its limit; the other waits for the slot and says so, stopped at its
    // own limit after the slot came free, or refused as busy if none did.
    let ask = || {
        http(
            addr,
            "POST",
            "/api/sql",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    };
    let (a, b) = std::thread::scope(|s| {
        let (a, b) = (s.spawn(ask), s.spawn(ask));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (ran, waited) = if query_slot(&a) == "free" {
        (a, b)
    } else {
        (b, a)
    };
    let both = format!(
        "{}\n{}\n{}\n{}",
        ran.head,
        ran.text(),
        waited.head,
        waited.text()
    );
    assert_eq!(query_slot(&ran), "free", "{both}");
    assert_eq!(ran.status, 503, "{both}");
    assert_eq!(ran.json()["kind"], "interrupted", "{both}");
    assert_eq!(waited.status, 503, "{both}");
    let how = query_slot(&waited);
    let kind = waited.json()["kind"].clone();
    assert!(
        (kind == "interrupted" && how.starts_with("waited ")) || (kind == "busy" && how == "busy"),
        "{both}"
    );
    stop(srv);

    // A query whose client goes away is stopped then, not at its limit.
    let (mut srv, addr) = serve(&[d, "--time-limit", "10min", "--max-queries", "1"]);
    {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        write!(
            c,
            "POST /api/sql HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        // The client stays until the server has read its request and a
        // handler runs it: one that leaves sooner is gone before its
        // query starts, and nothing runs to be stopped.
        assert!(
            handler_running(srv.pid(), Duration::from_secs(60)),
            "no handler thread: {:?}",
            srv.lines_seen()
        );
    }
    assert!(
        srv.wait_for_line("the client went away", Duration::from_secs(60)),
        "{:?}",
        srv.lines_seen()
    );
    let r = get(addr, "/api/overview");
    assert_eq!(r.status, 200, "{}", r.text());
    stop(srv);
}

/// The page in headless Chromium: it loads, zooms by a drag, shows
/// libpcap's error for a bad filter, sorts the flows, opens a flow's
/// packets, and downloads their pcap, which holds what `weir read` writes
/// for the same window and filter.
#[test]
fn page_in_headless_chromium() {
    let s = Scratch::new("serve-page");
    let ds = dataset(&s);
    let (srv, addr) = serve(&[ds.to_str().unwrap()]);
    let downloads = s.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let b = Browser::start("page", &downloads);
    b.goto(&format!("http://{addr}/"));
    b.settle();
    assert!(
        b.text("#facts").contains("ds (convert"),
        "{}",
        b.text("#facts")
    );
    b.wait_until(
        "verify the dataset",
        "return document.querySelector('#integrity [data-ok=true]') !== null;",
        Duration::from_secs(60),
    );
    let bars = b.exec(
        "return document.querySelectorAll('#overview rect.bar').length;",
        json!([]),
    );
    assert!(bars.as_u64().unwrap() > 50, "{bars}");
    let shots = std::env::var_os("WEIR_SCREENSHOTS").map(PathBuf::from);
    if let Some(dir) = &shots {
        b.screenshot(&dir.join("serve-overview.png"));
    }
    readable_at_1280(&b);

    // Zoom: drag across the middle of the overview.
    b.drag("#overview svg", 0.3, 0.6);
    b.settle();
    let search = b.exec("return location.search;", json!([]));
    let search = search.as_str().unwrap().to_string();
    assert!(
        search.contains("from=") && search.contains("to="),
        "{search}"
    );

    // A filter libpcap refuses: its message on the page.
    b.type_into("#filter", "tcp port");
    b.click("#apply");
    b.wait_until(
        "show the filter error",
        "return !document.querySelector('#filter-error').hidden;",
        Duration::from_secs(60),
    );
    assert!(b.text("#filter-error").contains("syntax error"));
    b.type_into("#filter", "tcp");
    b.click("#apply");
    b.settle();
    assert!(
        b.exec(
            "return document.querySelector('#filter-error').hidden;",
            json!([])
        ) == true
    );

    // Sort the flows by frames, both ways.
    let column = |name: &str| -> Vec<i64> {
        b.exec(
            "const i = [...document.querySelectorAll('#flows th')].findIndex(th => th.dataset.col === arguments[0]);
             return [...document.querySelectorAll('#flows tbody tr')].map(tr => tr.children[i].dataset.value);",
            json!([name]),
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().parse().unwrap())
        .collect()
    };
    b.click("#flows th[data-col=fwd_frames]");
    b.settle();
    let desc = column("fwd_frames");
    assert!(
        desc.len() > 5 && desc.windows(2).all(|w| w[0] >= w[1]),
        "{desc:?}"
    );
    b.click("#flows th[data-col=fwd_frames]");
    b.settle();
    let asc = column("fwd_frames");
    assert!(asc.windows(2).all(|w| w[0] <= w[1]), "{asc:?}");
    if let Some(dir) = &shots {
        b.screenshot(&dir.join("serve-flows.png"));
    }

    // Open the busiest flow's packets.
    b.click("#flows th[data-col=fwd_frames]");
    b.settle();
    b.click("#flows tbody tr");
    b.settle();
    let search = b.exec("return location.search;", json!([]));
    let params = serve_params(search.as_str().unwrap());
    let filter = params["filter"].clone();
    assert!(filter.starts_with("tcp and host "), "{filter}");
    let packets = b.exec(
        "return document.querySelectorAll('#packets tbody tr').length;",
        json!([]),
    );
    assert!(packets.as_u64().unwrap() > 0);
    if let Some(dir) = &shots {
        b.exec(
            "document.querySelector('#flows-box').scrollIntoView();",
            json!([]),
        );
        b.screenshot(&dir.join("serve-flow.png"));
    }

    // Download its pcap; tcpdump counts what weir read writes for the
    // same window and filter.
    b.click("#download");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let got = loop {
        let done: Vec<PathBuf> = std::fs::read_dir(&downloads)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
            .collect();
        if let Some(p) = done.first() {
            break p.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no download finished");
        std::thread::sleep(Duration::from_millis(100));
    };
    let from = params["from"].parse().ok();
    let to = params["to"].parse().ok();
    let n = weir_read(&ds, from, to, &filter, &s.join("want.pcap"));
    assert!(n > 0);
    assert_eq!(tcpdump_frames(&got), n);
    assert_eq!(
        std::fs::read(&got).unwrap(),
        std::fs::read(s.join("want.pcap")).unwrap()
    );
    // The page's own count of the selection agrees.
    let total = b.text("#packets-pager");
    assert!(
        total.contains(&format!("({} rows)", util::fmt::group_digits(n as u64))),
        "{total} vs {n}"
    );
    readable_at_1280(&b);

    // The SQL box.
    b.type_into("#sql", "SELECT count(*) AS n FROM packets");
    b.click("#sql-run");
    b.settle();
    assert_eq!(b.text("#sql-result td").trim(), n.to_string());
    b.type_into("#sql", "DROP VIEW packets");
    b.click("#sql-run");
    b.settle();
    assert!(b.text("#sql-error").contains("only queries"));
    drop(b);
    stop(srv);
}

/// The page at 1,280 x 800 as a person reads it: no table wider than the
/// window (the columns left out behind "more columns"), no raw counts or
/// nanosecond times, addresses as text, protocols by name, a flow as
/// `a:p → b:q`, and every panel saying how long its answer took.
fn readable_at_1280(b: &Browser) {
    let width = b.exec("return window.innerWidth;", json!([]));
    assert_eq!(width, 1280, "the window's width");
    let wide = b.exec(
        "return [...document.querySelectorAll('table')]
           .filter(t => t.offsetParent !== null)
           .map(t => [t.closest('[id]').id, t.getBoundingClientRect().right, t.closest('.table').scrollWidth - t.closest('.table').clientWidth])
           .filter(([, right, over]) => right > window.innerWidth || over > 0);",
        json!([]),
    );
    assert_eq!(wide, json!([]), "tables wider than the window");
    let page = b.exec("return document.documentElement.scrollWidth;", json!([]));
    assert!(
        page.as_i64().unwrap() <= 1280,
        "the page scrolls sideways: {page}"
    );
    // Every shown cell: no run of 7 digits (a raw count or time), no
    // address as hex digits.
    let raw = b.exec(
        "return [...document.querySelectorAll('td')]
           .filter(td => !td.hidden && td.offsetParent !== null)
           .map(td => td.textContent)
           .filter(t => /\\d{7,}/.test(t) || /[0-9a-f]{12,}/i.test(t));",
        json!([]),
    );
    assert_eq!(raw, json!([]), "raw numbers or hex on the page");
    let flows = b.exec(
        "return [...document.querySelectorAll('#flows tbody tr')].map(tr => tr.children[0].textContent);",
        json!([]),
    );
    let first = flows[0].as_str().unwrap();
    assert!(first.contains(" → ") && first.contains(':'), "{flows}");
    let protocols = b.exec(
        "const i = [...document.querySelectorAll('#flows th')].findIndex(th => th.dataset.col === 'proto');
         return [...document.querySelectorAll('#flows tbody tr')].map(tr => tr.children[i].textContent);",
        json!([]),
    );
    assert!(
        protocols
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p == "tcp" || p == "udp"),
        "{protocols}"
    );
    // Times are seconds after the window's start, the full time on hover.
    let time = b.exec(
        "const i = [...document.querySelectorAll('#flows th')].findIndex(th => th.dataset.col === 'first_ns');
         const td = document.querySelector('#flows tbody tr').children[i];
         return [td.textContent, td.title];",
        json!([]),
    );
    assert!(time[0].as_str().unwrap().ends_with(" s"), "{time}");
    assert!(time[1].as_str().unwrap().starts_with("20"), "{time}");
    // The least telling columns wait behind a button, which shows them.
    let shown = |b: &Browser| {
        b.exec(
            "return [...document.querySelectorAll('#flows th')].filter(th => !th.hidden).length;",
            json!([]),
        )
        .as_u64()
        .unwrap()
    };
    let before = shown(b);
    assert!(b.text("#flows .more-columns").starts_with("more columns"));
    b.click("#flows .more-columns");
    assert!(shown(b) > before);
    b.click("#flows .more-columns");
    assert_eq!(shown(b), before);
    let took = b.exec(
        "return [...document.querySelectorAll('.took')]
           .filter(s => s.offsetParent !== null && s.id !== 'sql-result-took')
           .map(s => [s.id, s.textContent]);",
        json!([]),
    );
    for t in took.as_array().unwrap() {
        assert!(t[1].as_str().unwrap().starts_with("answered in "), "{t}");
    }
}

/// The page's selection from its address.
/// Whether the server `pid` runs a request's handler (a thread of its
/// named weir-serve) within `limit`.
fn handler_running(pid: i32, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        if threads.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "weir-serve")
        }) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn serve_params(search: &str) -> std::collections::HashMap<String, String> {
    serve::parse_query(search.trim_start_matches('?'))
        .expect("a query")
        .into_iter()
        .collect()
}

/// While a capture writes the dataset, the page follows it: new seconds
/// reach the window and the overview without a reload.
#[test]
fn live_page_follows_a_capture() {
    use common::live::{capture, send};
    use common::netns::VethPair;
    let net = VethPair::new("serve-live");
    let s = Scratch::new("serve-live");
    let ds = s.join("live");
    let cap = capture(
        &net.b,
        &["-o", ds.to_str().unwrap(), "-j", "1", "--duration", "90s"],
    );
    let traffic = [
        "--count", "2000", "--rate", "1000", "--size", "200", "--flows", "4",
    ];
    send(&net.a, &traffic);
    // The manifest, rewritten every second, has the frames' span.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while manifest(&ds)["time_span"].is_null() {
        assert!(
            std::time::Instant::now() < deadline,
            "no span in the manifest"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (srv, addr) = serve(&[ds.to_str().unwrap()]);
    let downloads = s.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let b = Browser::start("live", &downloads);
    b.goto(&format!("http://{addr}/"));
    b.settle();
    assert!(
        b.text("#facts").contains("capture running"),
        "{}",
        b.text("#facts")
    );
    assert!(b.exec("return document.querySelector('#live').checked;", json!([])) == true);
    let window = b.text("#window-text");
    let legend = b.text("#overview-legend");
    send(&net.a, &traffic);
    b.wait_until(
        "follow the capture's new seconds",
        &format!(
            "return document.querySelector('#window-text').textContent !== {} && \
             document.querySelector('#overview-legend').textContent !== {} && \
             document.body.dataset.pending === '0';",
            json!(window),
            json!(legend)
        ),
        Duration::from_secs(60),
    );
    drop(b);
    stop(srv);
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    assert_eq!(r.code(), 0, "{}", r.stderr());
}
