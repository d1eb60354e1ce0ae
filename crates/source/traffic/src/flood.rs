//! The flood model: UDP/IPv4 frames of chosen sizes over many flows, as a
//! packet-rate test sends them (TICKET's flood mode, the driverdump
//! paper's traffic script).
//!
//! The frame sequence is periodic: frame `i` is frame `i % period()` of one
//! cycle, so a sender can build one cycle once and send it round and round
//! without any per-frame work, and a pcap file written with the same
//! settings holds exactly the frames sent. With random payloads a cycle
//! holds at least [`RANDOM_CYCLE_BYTES`] of frames whose random bytes are
//! all their own, so that a compressor finds no repeats within its window.

use std::fmt;
use std::str::FromStr;

use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

use crate::{EPOCH_NS, FrameSource, Rng, mac};

/// Frame lengths without FCS, in the order they are used: a flood cycles
/// through the list (it does not draw from it at random), so any window of
/// `len()` consecutive frames has exactly this mix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSizes(Vec<usize>);

impl FrameSizes {
    /// The smallest frame: Ethernet's minimum without the FCS.
    pub const MIN: usize = wire::build::ETH_MIN_FRAME;
    /// The largest frame (a 9000-byte jumbo frame's worth).
    pub const MAX: usize = 9000;

    /// One size.
    pub fn fixed(len: usize) -> Result<Self, String> {
        Self::list(vec![len])
    }

    /// Simple IMIX: 7 × 60, 4 × 590 and 1 × 1514 bytes, interleaved so that
    /// large frames do not come in runs.
    pub fn imix() -> Self {
        FrameSizes(vec![60, 590, 60, 60, 1514, 60, 590, 60, 60, 590, 60, 590])
    }

    /// These sizes, cycled in this order.
    pub fn list(sizes: Vec<usize>) -> Result<Self, String> {
        if sizes.is_empty() {
            return Err("no frame sizes given".into());
        }
        if sizes.len() > 4096 {
            return Err(format!("{} frame sizes: at most 4096", sizes.len()));
        }
        if let Some(bad) = sizes.iter().find(|s| !(Self::MIN..=Self::MAX).contains(*s)) {
            return Err(format!(
                "a frame size of {bad} bytes is outside {}..={} (lengths are without the 4-byte FCS)",
                Self::MIN,
                Self::MAX
            ));
        }
        Ok(FrameSizes(sizes))
    }

    /// The cycle of lengths.
    pub fn cycle(&self) -> &[usize] {
        &self.0
    }

    pub fn max(&self) -> usize {
        self.0.iter().copied().max().unwrap_or(Self::MIN)
    }

    /// Mean frame length over one cycle.
    pub fn mean(&self) -> f64 {
        self.0.iter().sum::<usize>() as f64 / self.0.len() as f64
    }
}

impl FromStr for FrameSizes {
    type Err = String;

    /// `64`, `imix`, or a comma list such as `64,512,1514`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Self::imix());
        }
        let sizes = s
            .split(',')
            .map(|w| {
                w.trim().parse::<usize>().map_err(|_| {
                    format!(
                        "{w:?} is not a frame size: use a length in bytes ({}..={}), imix, or a comma list such as 64,512,1514",
                        Self::MIN,
                        Self::MAX
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::list(sizes)
    }
}

impl fmt::Display for FrameSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::imix() {
            return f.write_str("imix");
        }
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// What fills the UDP payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadFill {
    /// All zero bytes.
    Zero,
    /// Random bytes (incompressible).
    Random,
    /// The first half of each payload random, the second half zero: frames
    /// compress about 2:1, like real traffic.
    HalfRandom,
}

impl FromStr for PayloadFill {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "zero" => Ok(PayloadFill::Zero),
            "random" => Ok(PayloadFill::Random),
            "half-random" => Ok(PayloadFill::HalfRandom),
            _ => Err(format!(
                "{s:?} is not a payload fill: use zero, random or half-random"
            )),
        }
    }
}

/// Frames per second and an optional on/off schedule; only timestamps
/// depend on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub rate_pps: f64,
    /// Send for `on_ns`, pause for `off_ns`, repeat.
    pub burst: Option<(u64, u64)>,
}

impl Timing {
    /// Offset from the start of frame `i`, in ns.
    pub fn offset_ns(&self, i: u64) -> i64 {
        let on_time = i as f64 * 1e9 / self.rate_pps.max(1e-9);
        let t = match self.burst {
            Some((on, off)) if on > 0 => {
                let cycles = (on_time / on as f64).floor();
                cycles * (on + off) as f64 + (on_time - cycles * on as f64)
            }
            _ => on_time,
        };
        t as i64
    }
}

/// What a flood sends.
#[derive(Clone, Debug)]
pub struct FloodSpec {
    pub sizes: FrameSizes,
    /// Distinct UDP 5-tuples, used round-robin (1..=16,777,214).
    pub flows: u32,
    pub payload: PayloadFill,
    pub seed: u64,
    /// Frames before the model ends (`u64::MAX`: never).
    pub count: u64,
    pub timing: Timing,
}

/// With random or half-random payloads, a cycle is made at least this long
/// (in frame bytes): longer than the windows of gzip (32 KiB), lz4 (64 KiB)
/// and zstd up to level 19 without `--long` (8 MiB), so the payloads
/// compress as the fill says and no better. (Longer cycles cost a sender
/// speed: a cycle that no longer fits the CPU caches slowed 1514-byte frames
/// by about a tenth per doubling on the test machines.)
pub const RANDOM_CYCLE_BYTES: u64 = 8 << 20;

/// The most flows a flood has: one per source address in 10.0.0.1 ...
/// 10.255.255.254.
pub const MAX_FLOWS: u32 = (1 << 24) - 2;

/// UDP/IPv4 frames over `flows` flows (flow `f` comes from 10.0.0.0 + f + 1,
/// UDP port 1024 + f mod 64512, to 10.200.0.1 port 9000), sizes cycled from
/// a [`FrameSizes`] list so that every flow gets every size, random payload
/// bytes drawn from [`Rng`] seeded by the seed and the frame's place in the
/// cycle (so any frame can be built on its own). Ethernet source
/// 02:57:45:00:00:01, destination 02:57:45:ff:ff:ff (a locally administered
/// address no host has: receivers see the frames as for another host and
/// drop them without replying).
pub struct Flood {
    sizes: Vec<usize>,
    flows: u64,
    fill: PayloadFill,
    scratch: Vec<u8>,
    /// Frames in a cycle: `base` times a whole number.
    period: u64,
    /// flows × sizes: each flow meets each size once in `base` frames.
    base: u64,
    lcm: u64,
    salt: u64,
    count: u64,
    sent: u64,
    timing: Timing,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Flood {
    pub fn new(spec: FloodSpec) -> Result<Self, String> {
        if spec.flows == 0 || spec.flows > MAX_FLOWS {
            return Err(format!("{} flows: use 1..={MAX_FLOWS}", spec.flows));
        }
        let sizes = spec.sizes.cycle().to_vec();
        let flows = spec.flows as u64;
        let s = sizes.len() as u64;
        let mut rng = Rng::new(spec.seed);
        let base = flows * s;
        let repeats = match spec.payload {
            PayloadFill::Zero => 1,
            _ => {
                let base_bytes = spec.sizes.mean() * base as f64;
                (RANDOM_CYCLE_BYTES as f64 / base_bytes).ceil().max(1.0) as u64
            }
        };
        Ok(Flood {
            period: base * repeats,
            base,
            lcm: flows / gcd(flows, s) * s,
            salt: rng.next_u64(),
            sizes,
            flows,
            fill: spec.payload,
            scratch: Vec::with_capacity(FrameSizes::MAX),
            count: spec.count,
            sent: 0,
            timing: spec.timing,
        })
    }

    /// Frames in one cycle: flows × sizes (each flow sends each size once),
    /// repeated with fresh random payloads until the cycle holds
    /// [`RANDOM_CYCLE_BYTES`] if the payloads are random.
    pub fn cycle_frames(&self) -> u64 {
        self.period
    }

    /// Length of frame `i` (without building it).
    pub fn frame_len(&self, i: u64) -> usize {
        let j = i % self.base;
        let s = self.sizes.len() as u64;
        // Within each lcm(flows, sizes) block the sizes cycle; each block
        // shifts the cycle by one, so over a whole period every flow meets
        // every size exactly once.
        self.sizes[((j % s + j / self.lcm) % s) as usize]
    }

    /// Builds frame `i` of the (infinite, periodic) sequence into `out`.
    pub fn build(&mut self, i: u64, out: &mut Vec<u8>) {
        let j = i % self.period;
        let flow = j % self.flows;
        let len = self.frame_len(j);
        let src = (0x0a00_0000u32 + flow as u32 + 1).to_be_bytes();
        let mut spec = FrameSpec {
            eth_src: mac(1),
            eth_dst: mac(0xff_ffff),
            vlan: None,
            ip: IpSpec::V4 {
                src,
                dst: [10, 200, 0, 1],
                ttl: 64,
                id: (j / self.flows) as u16,
                dscp: 0,
                frag: 0x4000,
            },
            transport: TransportSpec::Udp {
                sport: 1024 + (flow % 64512) as u16,
                dport: 9000,
            },
            payload: Payload::Zeros(0),
        };
        let n = spec.payload_for_frame_len(len);
        let random = match self.fill {
            PayloadFill::Zero => 0,
            PayloadFill::Random => n,
            PayloadFill::HalfRandom => n / 2,
        };
        spec.payload = if random == 0 {
            Payload::Zeros(n)
        } else {
            // The frame's own generator: seed and place in the cycle.
            let mut rng = Rng::new(self.salt ^ j.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            self.scratch.clear();
            while self.scratch.len() < random {
                self.scratch
                    .extend_from_slice(&rng.next_u64().to_le_bytes());
            }
            self.scratch.truncate(random);
            self.scratch.resize(n, 0);
            Payload::Bytes(&self.scratch)
        };
        out.clear();
        spec.build(out);
    }
}

impl FrameSource for Flood {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        if self.sent >= self.count {
            return None;
        }
        let i = self.sent;
        self.build(i, out);
        self.sent += 1;
        Some(EPOCH_NS + self.timing.offset_ns(i))
    }

    fn period(&self) -> Option<u64> {
        Some(self.period)
    }
}
