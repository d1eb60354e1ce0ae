//! Synthetic traffic: models that produce a stream of timestamped frames.
//!
//! Pure and deterministic (a seed fixes the output), so that benchmarks and
//! tests are reproducible. The same models drive `weir gen`, whether it
//! writes a pcap file or sends on an interface.
//!
//! - [`Flood`]: UDP frames of one size, IMIX or a list of sizes over many
//!   flows, with zero, random or half-random payloads; periodic, so that a
//!   sender builds one cycle and replays it (the packet-rate test).
//! - [`FixedSize`]: frames of one size over a set of UDP flows, evenly
//!   spaced (the classic packet-rate test).
//! - [`Imix`]: the 7:4:1 IMIX sizes over many TCP flows, Poisson arrivals.
//! - [`AppMix`]: TCP and UDP applications as a monitor would see them:
//!   bulk transfers, web-like request/response sessions and DNS
//!   lookups, with handshakes, slow-start rounds, delayed ACKs, round-trip
//!   times and jitter; the DNS messages, TLS handshakes (to port 443) and
//!   HTTP/1.1 requests and response heads (to port 80) are real.
//! - [`Encapsulated`]: any model's frames carried through a tunnel
//!   (VXLAN, GENEVE, GRE, GTP-U, IP in IP, WCCP, VXLAN-GPE, PIM Register).

mod appmix;
mod content;
mod encap;
mod flood;
mod rng;

pub use appmix::AppMix;
pub use encap::{Encap, Encapsulated, TUNNEL_DST, TUNNEL_SRC};
pub use flood::{Flood, FloodSpec, FrameSizes, MAX_FLOWS, PayloadFill, RANDOM_CYCLE_BYTES, Timing};
pub use rng::Rng;

use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

/// A source of frames in time order.
pub trait FrameSource {
    /// Appends the next frame to `out` (after clearing it) and returns its
    /// timestamp in ns, or `None` when the model is exhausted.
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64>;

    /// `Some(p)` if the frames repeat byte for byte every `p` frames
    /// (timestamps aside) for as long as the source runs: a sender may then
    /// build `p` frames once and send them round and round, treating the
    /// source as endless. `None` (the default): every frame must be asked
    /// for.
    fn period(&self) -> Option<u64> {
        None
    }
}

// A boxed model is a model: wrappers take either.
impl<T: FrameSource + ?Sized> FrameSource for Box<T> {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        (**self).next_frame(out)
    }

    fn period(&self) -> Option<u64> {
        (**self).period()
    }
}

/// Base time of generated traces: 2026-01-01T00:00:00Z.
pub const EPOCH_NS: i64 = 1_767_225_600_000_000_000;

/// The client side of flow `i`: an address in 10.0.0.0/8 or fd00::/8 and a
/// port, spread so that flows differ in both.
pub(crate) fn client_v4(i: u32) -> [u8; 4] {
    [10, (i >> 16) as u8 & 0x7f, (i >> 8) as u8, i as u8 | 1]
}

pub(crate) fn mac(i: u32) -> [u8; 6] {
    [0x02, 0x57, 0x45, (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

/// Frames of one length over `flows` UDP flows, `rate_pps` apart.
pub struct FixedSize {
    pub frame_len: usize,
    pub flows: u32,
    pub rate_pps: f64,
    pub count: u64,
    sent: u64,
}

impl FixedSize {
    pub fn new(frame_len: usize, flows: u32, rate_pps: f64, count: u64) -> Self {
        FixedSize {
            frame_len: frame_len.max(wire::build::ETH_MIN_FRAME),
            flows: flows.max(1),
            rate_pps: rate_pps.max(1.0),
            count,
            sent: 0,
        }
    }
}

impl FrameSource for FixedSize {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        if self.sent >= self.count {
            return None;
        }
        let i = self.sent;
        let flow = (i % self.flows as u64) as u32;
        let mut spec = FrameSpec {
            eth_src: mac(flow),
            eth_dst: mac(0xff_ffff),
            vlan: None,
            ip: IpSpec::V4 {
                src: client_v4(flow),
                dst: [10, 200, 0, 1],
                ttl: 64,
                id: i as u16,
                dscp: 0,
                frag: 0x4000,
            },
            transport: TransportSpec::Udp {
                sport: 1024 + (flow % 60000) as u16,
                dport: 9000,
            },
            payload: Payload::Zeros(0),
        };
        spec.payload = Payload::Zeros(spec.payload_for_frame_len(self.frame_len));
        out.clear();
        spec.build(out);
        self.sent += 1;
        Some(EPOCH_NS + (i as f64 * 1e9 / self.rate_pps) as i64)
    }
}

/// IMIX (7 × 60, 4 × 590, 1 × 1514 bytes, without FCS) over `flows` TCP
/// flows, each advancing its own sequence numbers; Poisson arrivals at
/// `rate_pps`, flows chosen with a skew (a few heavy hitters).
pub struct Imix {
    rng: Rng,
    flows: u32,
    rate_pps: f64,
    count: u64,
    sent: u64,
    now_ns: f64,
    seq: Vec<u32>,
}

impl Imix {
    pub fn new(flows: u32, rate_pps: f64, count: u64, seed: u64) -> Self {
        let flows = flows.max(1);
        let mut rng = Rng::new(seed);
        let seq = (0..flows).map(|_| rng.next_u32()).collect();
        Imix {
            rng,
            flows,
            rate_pps: rate_pps.max(1.0),
            count,
            sent: 0,
            now_ns: 0.0,
            seq,
        }
    }
}

impl FrameSource for Imix {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        if self.sent >= self.count {
            return None;
        }
        self.now_ns += self.rng.exponential(1e9 / self.rate_pps);
        // Skewed flow choice: squaring a uniform favours low flow numbers.
        let u = self.rng.unit();
        let flow = ((u * u) * self.flows as f64) as u32 % self.flows;
        let frame_len = match self.rng.below(12) {
            0..=6 => 60,
            7..=10 => 590,
            _ => 1514,
        };
        let seq = self.seq[flow as usize];
        let mut spec = FrameSpec {
            eth_src: mac(flow),
            eth_dst: mac(0xff_fffe),
            vlan: None,
            ip: IpSpec::V4 {
                src: client_v4(flow),
                dst: [10, 200, (flow % 16) as u8, 1],
                ttl: 63,
                id: self.sent as u16,
                dscp: 0,
                frag: 0x4000,
            },
            transport: TransportSpec::Tcp {
                sport: 1024 + (flow % 60000) as u16,
                dport: 443,
                seq,
                ack: 1,
                flags: wire::transport::tcp_flags::ACK,
                window: 512,
            },
            payload: Payload::Zeros(0),
        };
        let payload = spec.payload_for_frame_len(frame_len);
        spec.payload = Payload::Zeros(payload);
        self.seq[flow as usize] = seq.wrapping_add(payload as u32);
        out.clear();
        spec.build(out);
        self.sent += 1;
        Some(EPOCH_NS + self.now_ns as i64)
    }
}
