//! `weir gen --encap`: generated traffic carried through a tunnel converts
//! to the same inner flows as without it, with the tunnel in the tunnel
//! columns, and a conversion deals each inner flow to one worker.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use common::*;
use wire::ip::v4_mapped;
use wire::{Has, PacketRecord, ParseError, Tunnel, TunnelHas};

fn generate(path: &Path, encap: Option<&str>) {
    let mut cmd = weir();
    cmd.args(["gen", "-w"]).arg(path).args([
        "--model", "imix", "--flows", "40", "--count", "3000", "--seed", "5",
    ]);
    if let Some(e) = encap {
        cmd.args(["--encap", e]);
    }
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
}

fn convert(pcap: &Path, ds: &Path, workers: &str) -> Vec<PacketRecord> {
    let mut cmd = weir();
    cmd.arg("convert")
        .arg(pcap)
        .arg("-o")
        .arg(ds)
        .args(["-j", workers, "--order", "arrival", "-q"]);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    records(ds)
}

#[test]
fn generated_tunnels_convert_to_their_inner_flows() {
    let s = Scratch::new("gen-tunnels");
    let plain = s.join("plain.pcap");
    generate(&plain, None);
    let want = convert(&plain, &s.join("plain"), "1");
    assert_eq!(want.len(), 3000);
    assert!(want.iter().all(|r| r.tunnel.depth == 0 && r.has(Has::FLOW)));
    for (encap, kind, id) in [
        ("vxlan:4242", Tunnel::Vxlan, Some(4242)),
        ("gre:7", Tunnel::Gre, Some(7)),
        ("gre", Tunnel::Gre, None),
        ("gtpu:123456", Tunnel::Gtpu, Some(123456)),
        ("wccp:89", Tunnel::Wccp, Some(89)),
        ("vxlan-gpe:77", Tunnel::VxlanGpe, Some(77)),
        ("pim", Tunnel::Pim, None),
    ] {
        let pcap = s.join(&format!("{encap}.pcap"));
        generate(&pcap, Some(encap));
        let got = convert(&pcap, &s.join(encap), "1");
        assert_eq!(got.len(), want.len(), "{encap}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.parse_error, ParseError::None, "{encap}: {g:?}");
            // The inner packet, field for field, and its flow.
            assert_eq!(
                (g.ip_src, g.ip_dst, g.src_port, g.dst_port, g.ip_proto),
                (w.ip_src, w.ip_dst, w.src_port, w.dst_port, w.ip_proto),
                "{encap}"
            );
            assert_eq!(
                (g.tcp_seq, g.tcp_win, g.payload_len),
                (w.tcp_seq, w.tcp_win, w.payload_len)
            );
            assert_eq!(g.flow_hash, w.flow_hash, "{encap}");
            // The tunnel.
            assert_eq!((g.tunnel.kind, g.tunnel.depth), (kind, 1), "{encap}");
            assert_eq!(g.tunnel.has & TunnelHas::ID != 0, id.is_some(), "{encap}");
            assert_eq!(g.tunnel.id, id.unwrap_or(0), "{encap}");
            assert_eq!(g.tunnel.outer_src, v4_mapped(traffic::TUNNEL_SRC));
            assert_eq!(g.tunnel.outer_dst, v4_mapped(traffic::TUNNEL_DST));
        }
    }
}

/// GRE between two endpoints is one outer flow: dealt by the outer header,
/// every frame would go to one worker.
#[test]
fn a_conversion_deals_inner_flows_to_workers() {
    let s = Scratch::new("gen-tunnels-deal");
    let pcap = s.join("gre.pcap");
    generate(&pcap, Some("gre:1"));
    let recs = convert(&pcap, &s.join("ds"), "2");
    assert_eq!(recs.len(), 3000);
    let mut workers_of: HashMap<u32, HashSet<u16>> = HashMap::new();
    for r in &recs {
        assert_eq!(r.tunnel.kind, Tunnel::Gre);
        workers_of.entry(r.flow_hash).or_default().insert(r.worker);
    }
    assert!(workers_of.len() >= 10, "{} flows", workers_of.len());
    assert!(
        workers_of.values().all(|w| w.len() == 1),
        "a flow split across workers"
    );
    let used: HashSet<u16> = workers_of.values().flatten().copied().collect();
    assert_eq!(used.len(), 2, "workers used: {used:?}");
}
