//! The dns, tls and http tables against tshark's reading of the same
//! frames, message by message: DNS question names, rcodes and A answers;
//! TLS SNIs and JA3s; HTTP methods, hosts and status codes. On the app
//! mix `weir gen` makes (real DNS, TLS 1.2 and 1.3 hellos with several
//! SNIs and ALPNs, HTTP/1.1) and on tcpdump's test captures that hold
//! DNS or HTTP (none of them holds a TLS handshake). Every disagreement
//! must fall under a rule written here, or the test fails.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;

fn convert(pcap: &Path, ds: &Path) {
    let mut c = weir();
    c.arg("convert").arg(pcap).arg("-o").arg(ds).arg("-q");
    let r = run_bounded(c, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir convert: {}", r.stderr());
}

fn sql(ds: &Path, q: &str) -> Vec<Value> {
    let mut c = weir();
    c.arg("sql").arg(ds).arg(q).arg("--json");
    let r = run_bounded(c, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir sql {q}: {}", r.stderr());
    serde_json::from_str::<Value>(&r.stdout())
        .unwrap()
        .as_array()
        .cloned()
        .unwrap()
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `tshark -T fields` of the frames matching `filter`, first occurrence
/// of each field but `all` (every occurrence, comma-joined).
fn tshark(pcap: &Path, filter: &str, fields: &[&str], all: &[&str]) -> Vec<Vec<String>> {
    let mut t = tool("tshark");
    t.args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", filter, "-T", "fields"]);
    t.args([
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in fields {
        t.args(["-e", f]);
    }
    let r = run_bounded(t, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "tshark: {}", r.stderr());
    r.stdout()
        .lines()
        .map(|l| {
            fields
                .iter()
                .zip(l.split('\t').chain(std::iter::repeat("")))
                .map(|(f, v)| {
                    if all.contains(f) {
                        v.to_string()
                    } else {
                        v.split(',').next().unwrap_or("").to_string()
                    }
                })
                .collect()
        })
        .collect()
}

/// A message as both sides see it: (kind, client port, server port, key
/// fields...) -> how many.
type Messages = BTreeMap<Vec<String>, i64>;

fn add(m: &mut Messages, k: Vec<String>, n: i64) {
    *m.entry(k).or_default() += n;
}

/// Keys on one side only, with their surplus (positive: weir's).
fn difference(weir: &Messages, tshark: &Messages) -> Vec<(Vec<String>, i64)> {
    let mut d = weir.clone();
    for (k, n) in tshark {
        *d.entry(k.clone()).or_default() -= n;
    }
    d.into_iter().filter(|(_, n)| *n != 0).collect()
}

/// DNS messages of the dns table: a query and a response per row (each
/// when seen): [Q|R, transport, client port, server port, id, qname,
/// rcode, sorted A answers].
fn weir_dns(ds: &Path) -> Messages {
    let rows = sql(
        ds,
        "SELECT d.transport, d.client_port, d.server_port, d.id, d.qname, d.rcode, \
         d.status <> 'response_only' AS q, d.response_ts IS NOT NULL AS r, x.a \
         FROM dns d LEFT JOIN \
         (SELECT xts, xfh, xid, string_agg(t, ',') AS a FROM \
          (SELECT xts, xfh, xid, ip_text(addr) AS t FROM \
           (SELECT ts AS xts, flow_hash AS xfh, id AS xid, unnest(answer_addrs) AS addr FROM dns)) \
          WHERE t NOT LIKE '%:%' GROUP BY xts, xfh, xid) x \
         ON d.ts = x.xts AND d.flow_hash = x.xfh AND d.id = x.xid",
    );
    let mut m = Messages::new();
    for r in rows {
        let base = [
            text(&r["transport"]),
            text(&r["client_port"]),
            text(&r["server_port"]),
            text(&r["id"]),
            text(&r["qname"]),
        ];
        if r["q"] == Value::Bool(true) {
            let mut k = vec!["Q".to_string()];
            k.extend(base.iter().cloned());
            k.extend([String::new(), String::new()]);
            add(&mut m, k, 1);
        }
        if r["r"] == Value::Bool(true) {
            let mut k = vec!["R".to_string()];
            k.extend(base.iter().cloned());
            let mut a: Vec<String> = text(&r["a"])
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            a.sort();
            k.extend([text(&r["rcode"]), a.join(",")]);
            add(&mut m, k, 1);
        }
    }
    m
}

/// tshark's DNS messages on ports 53 and 5353 (weir's), keyed as weir's.
fn tshark_dns(pcap: &Path) -> Messages {
    let fields = [
        "udp.srcport",
        "udp.dstport",
        "tcp.srcport",
        "tcp.dstport",
        "dns.id",
        "dns.flags.response",
        "dns.qry.name",
        "dns.flags.rcode",
        "dns.a",
        "dns.count.answers",
        "dns.resp.type",
    ];
    let mut m = Messages::new();
    for f in tshark(
        pcap,
        "dns && (udp.port == 53 || udp.port == 5353 || tcp.port == 53 || tcp.port == 5353)",
        &fields,
        &[
            "dns.a",
            "dns.id",
            "dns.flags.response",
            "dns.qry.name",
            "dns.flags.rcode",
            "dns.count.answers",
            "dns.resp.type",
        ],
    ) {
        let udp = !f[0].is_empty();
        let (sp, dp) = if udp { (&f[0], &f[1]) } else { (&f[2], &f[3]) };
        // Several messages in one TCP segment: one key each.
        let ids: Vec<&str> = f[4].split(',').collect();
        let resp: Vec<&str> = f[5].split(',').collect();
        let names: Vec<&str> = f[6].split(',').collect();
        let rcodes: Vec<&str> = f[7].split(',').collect();
        for (i, id) in ids.iter().enumerate() {
            let response = resp.get(i).is_some_and(|r| *r == "1" || *r == "True");
            let (client, server) = if response { (dp, sp) } else { (sp, dp) };
            let id = u16::from_str_radix(id.trim_start_matches("0x"), 16)
                .map_or(String::new(), |v| v.to_string());
            let name = names.get(i).copied().unwrap_or("");
            let name = if name == "<Root>" { "" } else { name };
            let mut k = vec![
                if response { "R" } else { "Q" }.to_string(),
                if udp { "udp" } else { "tcp" }.to_string(),
                client.clone(),
                server.clone(),
                id,
                name.to_string(),
            ];
            if response {
                // Rule: tshark's dns.a lists the A records of every section;
                // the dns table keeps the answer section's: the first of
                // them, as many as the answer section's records of type 1.
                let answers: usize = f[9]
                    .split(',')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let in_answers = f[10].split(',').take(answers).filter(|t| *t == "1").count();
                let mut a: Vec<&str> = if ids.len() == 1 {
                    f[8].split(',')
                        .filter(|s| !s.is_empty())
                        .take(in_answers)
                        .collect()
                } else {
                    Vec::new()
                };
                a.sort();
                k.extend([rcodes.get(i).unwrap_or(&"").to_string(), a.join(",")]);
            } else {
                k.extend([String::new(), String::new()]);
            }
            add(&mut m, k, 1);
        }
    }
    m
}

/// TLS ClientHellos: [client port, server port, SNI, JA3].
fn weir_tls(ds: &Path) -> Messages {
    let mut m = Messages::new();
    for r in sql(ds, "SELECT client_port, server_port, sni, ja3 FROM tls") {
        let k = ["client_port", "server_port", "sni", "ja3"]
            .iter()
            .map(|c| text(&r[*c]))
            .collect();
        add(&mut m, k, 1);
    }
    m
}

fn tshark_tls(pcap: &Path) -> Messages {
    let mut m = Messages::new();
    for f in tshark(
        pcap,
        "tls.handshake.type == 1",
        &[
            "tcp.srcport",
            "tcp.dstport",
            "tls.handshake.extensions_server_name",
            "tls.handshake.ja3",
        ],
        &[],
    ) {
        add(&mut m, f, 1);
    }
    m
}

/// HTTP requests [Q, client port, server port, method, host] and
/// responses [R, client port, server port, status].
fn weir_http(ds: &Path) -> Messages {
    let mut m = Messages::new();
    for r in sql(
        ds,
        "SELECT client_port, server_port, method, host, status FROM http",
    ) {
        let ends = [text(&r["client_port"]), text(&r["server_port"])];
        let mut q = vec!["Q".to_string()];
        q.extend(ends.iter().cloned());
        q.extend([text(&r["method"]), text(&r["host"])]);
        add(&mut m, q, 1);
        if !r["status"].is_null() {
            let mut s = vec!["R".to_string()];
            s.extend(ends.iter().cloned());
            s.extend([text(&r["status"]), String::new()]);
            add(&mut m, s, 1);
        }
    }
    m
}

fn tshark_http(pcap: &Path) -> Messages {
    let mut m = Messages::new();
    for f in tshark(
        pcap,
        // Rule: the http table is HTTP/1.x over TCP; tshark also reads
        // HTTP over UDP (SSDP's M-SEARCH and NOTIFY), which weir does not.
        "(http.request || http.response) && tcp",
        &[
            "tcp.srcport",
            "tcp.dstport",
            "http.request.method",
            "http.host",
            "http.response.code",
        ],
        &[],
    ) {
        if !f[2].is_empty() {
            add(
                &mut m,
                vec![
                    "Q".into(),
                    f[0].clone(),
                    f[1].clone(),
                    f[2].clone(),
                    f[3].clone(),
                ],
                1,
            );
        }
        if !f[4].is_empty() {
            add(
                &mut m,
                vec![
                    "R".into(),
                    f[1].clone(),
                    f[0].clone(),
                    f[4].clone(),
                    String::new(),
                ],
                1,
            );
        }
    }
    m
}

fn counters(ds: &Path) -> BTreeMap<String, u64> {
    let m = manifest(ds);
    m["app"]["counters"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_app_mix_agrees_with_tshark() {
    let s = Scratch::new("tshark_app_mix");
    let pcap = s.join("app.pcap");
    let mut g = weir();
    g.args(["gen", "--model", "app", "-c", "20000", "--seed", "5", "-w"])
        .arg(&pcap);
    assert_eq!(run_bounded(g, Duration::from_secs(60)).code(), 0);
    let ds = s.join("ds");
    convert(&pcap, &ds);
    let c = counters(&ds);

    let (w, t) = (weir_dns(&ds), tshark_dns(&pcap));
    assert!(t.len() > 200, "{}", t.len());
    assert_eq!(difference(&w, &t), [], "dns");
    assert_eq!(c["dns_errors"], 0);

    let (w, t) = (weir_tls(&ds), tshark_tls(&pcap));
    assert!(t.len() > 100, "{}", t.len());
    // Rule: JA3 — weir and tshark 4.0 both leave GREASE out; they agree
    // on every hello the mix makes (GREASE or not, TLS 1.2 and 1.3).
    assert_eq!(difference(&w, &t), [], "tls");
    let snis = sql(
        &ds,
        "SELECT count(DISTINCT sni) AS n, count(DISTINCT ja4) AS j, \
        count(*) FILTER (WHERE version = 772) AS v13, count(*) FILTER (WHERE version = 771) AS v12, \
        count(cert_subject) AS certs FROM tls",
    );
    assert!(snis[0]["n"].as_u64().unwrap() >= 5, "{snis:?}");
    assert!(snis[0]["j"].as_u64().unwrap() >= 4, "{snis:?}");
    assert!(snis[0]["v13"].as_u64().unwrap() > 0, "{snis:?}");
    assert!(snis[0]["v12"].as_u64().unwrap() > 0, "{snis:?}");
    assert!(snis[0]["certs"].as_u64().unwrap() > 0, "{snis:?}");

    let (w, t) = (weir_http(&ds), tshark_http(&pcap));
    assert!(t.len() > 50, "{}", t.len());
    // Rule: a response tshark reports only once its body is complete
    // (it reassembles bodies): where the trace ends inside a body, weir
    // has its status (from the head) and tshark none.
    let d: Vec<_> = difference(&w, &t)
        .into_iter()
        .filter(|(k, n)| !(k[0] == "R" && *n == 1))
        .collect();
    assert_eq!(d, [], "http");
}

/// Rules for tcpdump's DNS captures, checked message by message:
/// - a TCP flow whose SYN is not in the capture is not decoded (counted
///   in flows_without_start): its messages are tshark's only;
/// - a message weir refuses (a bad label, a pointer loop, cut short)
///   is counted in dns_errors: tshark's only, as many as counted.
#[test]
fn tcpdump_dns_captures_agree_with_tshark() {
    let s = Scratch::new("tshark_app_tcpdump");
    let mut agreed = 0;
    for name in [
        "dns_udp.pcap",
        "dns_tcp.pcap",
        "dns-zlip-1.pcap",
        "dns-zlip-2.pcap",
        "dns-zlip-3.pcap",
        "dns_fwdptr.pcap",
        "dnssec.pcap",
        "edns-opts.pcap",
        "dns-uri.pcap",
        "dns-badcookie.pcap",
        "dns-badvers.pcap",
        "dns-badlabel.pcap",
    ] {
        let pcap = tcpdump_capture(name);
        let ds = s.join(name);
        convert(&pcap, &ds);
        let c = counters(&ds);
        let (w, t) = (weir_dns(&ds), tshark_dns(&pcap));
        let d = difference(&w, &t);
        agreed += w.values().sum::<i64>();
        let weirs: Vec<_> = d.iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(
            weirs,
            Vec::<&(Vec<String>, i64)>::new(),
            "{name}: weir only"
        );
        let mut tsharks: i64 = d.iter().filter(|(_, n)| *n < 0).map(|(_, n)| -n).sum();
        // Explained: messages in flows weir did not follow from the start.
        let unfollowed: i64 = d
            .iter()
            .filter(|(k, n)| {
                *n < 0 && k[1] == "tcp" && c.get("flows_without_start").copied().unwrap_or(0) > 0
            })
            .map(|(_, n)| -n)
            .sum();
        tsharks -= unfollowed;
        let errors = c.get("dns_errors").copied().unwrap_or(0) as i64;
        assert!(
            tsharks <= errors,
            "{name}: tshark only {d:?} beyond weir's {errors} counted errors"
        );
    }
    assert!(agreed > 30, "{agreed} messages");
}

/// The HTTP in tcpdump's captures (a request without its response).
#[test]
fn tcpdump_http_agrees_with_tshark() {
    let s = Scratch::new("tshark_app_http");
    for name in ["print-flags.pcap", "eapon1.pcap"] {
        let pcap = tcpdump_capture(name);
        let ds = s.join(name);
        convert(&pcap, &ds);
        let c = counters(&ds);
        let (w, t) = (weir_http(&ds), tshark_http(&pcap));
        let d = difference(&w, &t);
        // Rule: flows whose SYN the capture lacks are not decoded.
        let unexplained: Vec<_> = d
            .iter()
            .filter(|(_, n)| *n > 0 || c.get("flows_without_start").copied().unwrap_or(0) == 0)
            .collect();
        assert_eq!(unexplained, Vec::<&(Vec<String>, i64)>::new(), "{name}");
    }
}

/// `weir anonymize` of the app mix: no name (DNS question or answer, SNI,
/// HTTP host, path or user agent, certificate name) survives in clear,
/// in the tables or in any file's bytes; names are pseudonymised label by
/// label, so names that share a suffix still do; the answers' addresses
/// are mapped as addresses are.
#[test]
fn no_clear_name_survives_anonymize() {
    let s = Scratch::new("tshark_app_anon");
    let pcap = s.join("app.pcap");
    let mut g = weir();
    g.args(["gen", "--model", "app", "-c", "6000", "--seed", "8", "-w"])
        .arg(&pcap);
    assert_eq!(run_bounded(g, Duration::from_secs(60)).code(), 0);
    let ds = s.join("ds");
    convert(&pcap, &ds);
    let key = s.join("key");
    let mut c = weir();
    c.arg("anonymize").arg("--new-key").arg(&key);
    assert_eq!(run_bounded(c, Duration::from_secs(30)).code(), 0);
    let anon = s.join("anon");
    let mut c = weir();
    c.arg("anonymize")
        .arg(&ds)
        .arg("-o")
        .arg(&anon)
        .arg("--key")
        .arg(&key);
    let r = run_bounded(c, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());

    let dump = |d: &Path| {
        let mut all = String::new();
        for q in [
            "SELECT * FROM dns ORDER BY ts, id",
            "SELECT * FROM tls ORDER BY ts",
            "SELECT * FROM http ORDER BY ts",
        ] {
            let mut c = weir();
            c.arg("sql").arg(d).arg(q).arg("--json");
            let r = run_bounded(c, Duration::from_secs(120));
            assert_eq!(r.code(), 0, "{q}: {}", r.stderr());
            all.push_str(&r.stdout());
        }
        all
    };
    let mut secrets: Vec<String> = Vec::new();
    for q in [
        "SELECT DISTINCT qname AS v FROM dns WHERE qname IS NOT NULL",
        "SELECT DISTINCT sni AS v FROM tls WHERE sni IS NOT NULL",
        "SELECT DISTINCT host AS v FROM http",
        "SELECT DISTINCT path AS v FROM http WHERE length(path) > 3",
        "SELECT DISTINCT user_agent AS v FROM http",
        "SELECT DISTINCT cert_subject AS v FROM tls WHERE cert_subject IS NOT NULL",
    ] {
        for r in sql(&ds, q) {
            secrets.push(text(&r["v"]));
        }
    }
    assert!(secrets.len() > 20, "{secrets:?}");
    let (original, copy) = (dump(&ds), dump(&anon));
    for secret in &secrets {
        assert!(
            original.contains(secret.as_str()),
            "{secret} not in the original"
        );
        assert!(
            !copy.contains(secret.as_str()),
            "{secret} survived anonymisation"
        );
    }
    let mut stack = vec![anon.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            for secret in &secrets {
                let hit = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!hit, "{secret} in {}", p.display());
            }
        }
    }
    // The answers' addresses are mapped as addresses are: as many, none
    // the same.
    let addrs = |d: &Path| -> std::collections::BTreeSet<String> {
        sql(
            d,
            "SELECT DISTINCT ip_text(a) AS v FROM (SELECT unnest(answer_addrs) AS a FROM dns)",
        )
        .iter()
        .map(|r| text(&r["v"]))
        .collect()
    };
    let (before, after) = (addrs(&ds), addrs(&anon));
    assert!(before.len() > 10, "{before:?}");
    assert_eq!(before.len(), after.len());
    assert!(before.is_disjoint(&after), "{before:?} {after:?}");
    // Label by label: the pseudonyms of www.example.com and
    // mail.example.com end alike, and differ at the first label.
    let names: Vec<String> = sql(&anon, "SELECT DISTINCT qname AS v FROM dns")
        .iter()
        .map(|r| text(&r["v"]))
        .collect();
    let suffix = |n: &str| n.split_once('.').map(|(_, s)| s.to_string());
    let mut by_suffix: BTreeMap<String, usize> = BTreeMap::new();
    for n in &names {
        assert_eq!(n.split('.').count(), 3, "{n}");
        *by_suffix.entry(suffix(n).unwrap()).or_default() += 1;
    }
    // The mix's names are under three domains.
    assert!(
        by_suffix.len() <= 3 && names.len() > by_suffix.len(),
        "{by_suffix:?}"
    );
    let rows = |d: &Path| sql(d, "SELECT count(*) AS n FROM dns")[0]["n"].clone();
    assert_eq!(rows(&ds), rows(&anon));
}
