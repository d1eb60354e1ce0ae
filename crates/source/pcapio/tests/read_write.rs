use std::io::Write;
use std::path::PathBuf;

use pcapio::{Compression, Container, PcapWriter, ReadErrorKind, ReaderOptions, TraceReader};
use wire::LinkType;

/// A file in this test binary's directory under the target directory (not
/// /tmp, where each run left its own directory behind), emptied once per run.
fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pcapio-read_write");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    dir.join(name)
}

fn frames(n: usize) -> Vec<(i64, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let len = 60 + (i * 37) % 1400;
            let data = (0..len).map(|b| (b + i) as u8).collect();
            (1_700_000_000_123_456_789 + i as i64 * 1_001, data)
        })
        .collect()
}

/// (ts_ns, cap_len, wire_len, record_offset, bytes) of one frame.
type Got = (i64, u32, u32, u64, Vec<u8>);

fn read_all(path: &PathBuf, opts: ReaderOptions) -> (TraceReader, Vec<Got>) {
    let mut r = TraceReader::open(path, opts).unwrap();
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().unwrap() {
        for (f, bytes) in c.iter() {
            out.push((
                f.ts_ns,
                f.cap_len,
                f.wire_len,
                f.record_offset,
                bytes.to_vec(),
            ));
        }
        if let Some(b) = c.data.into_buffer() {
            r.recycle(b);
        }
    }
    (r, out)
}

/// Writes `input` as a pcap file (each frame cut 4 bytes short of the
/// wire); returns each record's offset.
fn write_trace(path: &PathBuf, input: &[(i64, Vec<u8>)]) -> Vec<u64> {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(file, LinkType::ETHERNET, 65535).unwrap();
    let offsets = input
        .iter()
        .map(|(ts, d)| w.write_frame(*ts, d.len() as u32 + 4, d).unwrap())
        .collect();
    w.into_inner().unwrap();
    offsets
}

#[test]
fn writer_round_trip_in_small_chunks() {
    let path = tmp("rt.pcap");
    let input = frames(3000);
    let offsets = write_trace(&path, &input);
    let small = |mmap| ReaderOptions {
        chunk_bytes: 64 * 1024,
        mmap,
    };
    let (r, got) = read_all(&path, small(true));
    let (_, streamed) = read_all(&path, small(false));
    assert_eq!(got, streamed, "a mapped and a streamed read agree");
    assert_eq!(r.compression(), Compression::None);
    assert!(matches!(
        r.container(),
        Container::Pcap {
            nanosecond: true,
            big_endian: false,
            ..
        }
    ));
    assert_eq!(got.len(), input.len());
    for (i, ((ts, d), g)) in input.iter().zip(&got).enumerate() {
        assert_eq!(g.0, *ts);
        assert_eq!(g.1 as usize, d.len());
        assert_eq!(g.2 as usize, d.len() + 4);
        assert_eq!(g.3, offsets[i]);
        assert_eq!(&g.4, d);
    }
}

/// Resident kB of the mappings of `path` in this process (`/proc/self/smaps`).
fn mapped_kb(path: &std::path::Path) -> u64 {
    let path = std::fs::canonicalize(path).unwrap();
    let name = path.to_str().unwrap();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: "start-end perms offset dev inode path".
            inside = line.ends_with(name);
        } else if inside && first == "Rss:" {
            kb += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    kb
}

#[test]
fn mapped_chunks_let_go_of_their_pages() {
    let path = tmp("let-go.pcap");
    write_trace(&path, &frames(6000));
    let file_kb = std::fs::metadata(&path).unwrap().len() / 1024;
    let opts = |mmap| ReaderOptions {
        chunk_bytes: 256 * 1024,
        mmap,
    };
    let (_, streamed) = read_all(&path, opts(false));

    let mut r = TraceReader::open(&path, opts(true)).unwrap();
    let mut chunks = Vec::new();
    while let Some(c) = r.next_chunk().unwrap() {
        chunks.push(c);
    }
    assert!(chunks.len() > 8, "{} chunks", chunks.len());
    let held = mapped_kb(&path);
    assert!(held >= file_kb * 9 / 10, "{held} kB mapped of {file_kb}");

    // Every chunk but one let go, from the last: the one kept still reads
    // its frames, including where its pages meet its neighbours'.
    let kept = chunks.remove(chunks.len() / 2);
    while let Some(c) = chunks.pop() {
        drop(c);
    }
    let first = kept.first_frame as usize;
    for (i, (f, bytes)) in kept.iter().enumerate() {
        let want = &streamed[first + i];
        assert_eq!((f.ts_ns, bytes), (want.0, want.4.as_slice()));
    }
    let left = mapped_kb(&path);
    assert!(
        left < file_kb / 4,
        "{left} kB still mapped of {file_kb} after the chunks were dropped"
    );
    drop(kept);
    drop(r);
    assert_eq!(mapped_kb(&path), 0);
}

/// A pcap file written by hand in either byte order and resolution.
fn legacy_pcap(big_endian: bool, nanos: bool, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(&w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    f.extend_from_slice(&w16(2));
    f.extend_from_slice(&w16(4));
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&w32(65535));
    f.extend_from_slice(&w32(1));
    for (sec, frac, data) in recs {
        f.extend_from_slice(&w32(*sec));
        f.extend_from_slice(&w32(*frac));
        f.extend_from_slice(&w32(data.len() as u32));
        f.extend_from_slice(&w32(data.len() as u32 + 10));
        f.extend_from_slice(data);
    }
    f
}

#[test]
fn both_byte_orders_and_resolutions() {
    for (be, ns) in [(false, false), (true, false), (false, true), (true, true)] {
        let path = tmp(&format!("bo-{be}-{ns}.pcap"));
        std::fs::write(
            &path,
            legacy_pcap(be, ns, &[(10, 20, b"abc"), (11, 999_999, b"defg")]),
        )
        .unwrap();
        let (_, got) = read_all(&path, ReaderOptions::default());
        let scale = if ns { 1 } else { 1000 };
        assert_eq!(got[0].0, 10_000_000_000 + 20 * scale);
        assert_eq!(got[1].0, 11_000_000_000 + 999_999 * scale);
        assert_eq!((got[1].1, got[1].2), (4, 14));
        assert_eq!(got[1].4, b"defg");
        assert_eq!(got[1].3, 24 + 16 + 3);
    }
}

fn ng_block(be: bool, ty: u32, body: &[u8]) -> Vec<u8> {
    let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut padded = body.to_vec();
    while padded.len() % 4 != 0 {
        padded.push(0);
    }
    let len = 12 + padded.len() as u32;
    let mut b = Vec::new();
    b.extend_from_slice(&w32(ty));
    b.extend_from_slice(&w32(len));
    b.extend_from_slice(&padded);
    b.extend_from_slice(&w32(len));
    b
}

fn ng_option(be: bool, code: u16, val: &[u8]) -> Vec<u8> {
    let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut o = Vec::new();
    o.extend_from_slice(&w16(code));
    o.extend_from_slice(&w16(val.len() as u16));
    o.extend_from_slice(val);
    while o.len() % 4 != 0 {
        o.push(0);
    }
    o
}

fn pcapng(be: bool) -> Vec<u8> {
    let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut f = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&w32(0x1a2b_3c4d));
    shb.extend_from_slice(&w16(1));
    shb.extend_from_slice(&w16(0));
    shb.extend_from_slice(&[0xff; 8]);
    f.extend(ng_block(be, 0x0a0d_0d0a, &shb));
    // Interface 0: Ethernet, nanosecond resolution, named.
    let mut idb = Vec::new();
    idb.extend_from_slice(&w16(1));
    idb.extend_from_slice(&w16(0));
    idb.extend_from_slice(&w32(262144));
    idb.extend(ng_option(be, 2, b"eth0"));
    idb.extend(ng_option(be, 9, &[9]));
    idb.extend(ng_option(be, 0, &[]));
    f.extend(ng_block(be, 1, &idb));
    // Interface 1: raw IP, 2^-20 s resolution, +100 s offset.
    let mut idb = Vec::new();
    idb.extend_from_slice(&w16(101));
    idb.extend_from_slice(&w16(0));
    idb.extend_from_slice(&w32(65535));
    idb.extend(ng_option(be, 9, &[0x80 | 20]));
    let off: [u8; 8] = if be {
        100i64.to_be_bytes()
    } else {
        100i64.to_le_bytes()
    };
    idb.extend(ng_option(be, 14, &off));
    idb.extend(ng_option(be, 0, &[]));
    f.extend(ng_block(be, 1, &idb));
    let epb = |iface: u32, ts: u64, data: &[u8], orig: u32| {
        let mut b = Vec::new();
        b.extend_from_slice(&w32(iface));
        b.extend_from_slice(&w32((ts >> 32) as u32));
        b.extend_from_slice(&w32(ts as u32));
        b.extend_from_slice(&w32(data.len() as u32));
        b.extend_from_slice(&w32(orig));
        b.extend_from_slice(data);
        ng_block(be, 6, &b)
    };
    f.extend(epb(0, 1_500_000_000_000_000_123, b"hello", 5));
    f.extend(epb(1, 3 << 20 | 1 << 19, b"raw!x", 1500));
    // A simple packet block: interface 0, time of the previous packet.
    let mut spb = Vec::new();
    spb.extend_from_slice(&w32(3));
    spb.extend_from_slice(b"abc");
    f.extend(ng_block(be, 3, &spb));
    // Interface statistics for interface 0: 7 dropped by the interface.
    let mut isb = Vec::new();
    isb.extend_from_slice(&w32(0));
    isb.extend_from_slice(&[0; 8]);
    let seven: [u8; 8] = if be {
        7u64.to_be_bytes()
    } else {
        7u64.to_le_bytes()
    };
    isb.extend(ng_option(be, 5, &seven));
    isb.extend(ng_option(be, 0, &[]));
    f.extend(ng_block(be, 5, &isb));
    f
}

#[test]
fn pcapng_interfaces_resolutions_and_blocks() {
    for be in [false, true] {
        let path = tmp(&format!("ng-{be}.pcapng"));
        // Two sections: the second redeclares interface 0 as a new interface.
        let mut data = pcapng(be);
        data.extend(pcapng(be));
        std::fs::write(&path, &data).unwrap();
        let mut r = TraceReader::open(&path, ReaderOptions::default()).unwrap();
        let mut got = Vec::new();
        while let Some(c) = r.next_chunk().unwrap() {
            for (f, b) in c.iter() {
                got.push((f.ts_ns, f.iface, f.link, f.wire_len, b.to_vec()));
            }
        }
        assert_eq!(r.container(), Container::PcapNg);
        assert_eq!(got.len(), 6);
        assert_eq!(
            got[0],
            (
                1_500_000_000_000_000_123,
                0,
                LinkType::ETHERNET,
                5,
                b"hello".to_vec()
            )
        );
        assert_eq!(
            got[1].0, 103_500_000_000,
            "2^-20 units plus the 100 s offset"
        );
        assert_eq!((got[1].1, got[1].2, got[1].3), (1, LinkType::RAW, 1500));
        assert_eq!(got[2].0, got[1].0, "a simple packet inherits the last time");
        assert_eq!((got[2].1, got[2].4.as_slice()), (0, &b"abc"[..]));
        assert_eq!(got[3].1, 2, "the second section's interfaces are new ones");
        let ifs = r.interfaces();
        assert_eq!(ifs.len(), 4);
        assert_eq!(ifs[0].name.as_deref(), Some("eth0"));
        assert_eq!(ifs[0].dropped, Some(7));
        assert_eq!(ifs[1].ts_units_per_sec, 1 << 20);
    }
}

#[test]
fn compressed_input_is_detected() {
    let plain = legacy_pcap(false, true, &[(1, 2, b"zz"), (3, 4, b"yyy")]);
    let gz = tmp("c.pcap.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&plain).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let zs = tmp("c.pcap.zst");
    std::fs::write(&zs, zstd::encode_all(plain.as_slice(), 3).unwrap()).unwrap();
    for (p, c) in [(gz, Compression::Gzip), (zs, Compression::Zstd)] {
        let (r, got) = read_all(&p, ReaderOptions::default());
        assert_eq!(r.compression(), c);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].4, b"yyy");
    }
}

fn read_until_error(path: &PathBuf) -> (usize, pcapio::ReadError) {
    // Both ways of reading a file must find the same damage at the same place.
    let mapped = read_until_error_with(path, true);
    let streamed = read_until_error_with(path, false);
    assert_eq!((mapped.0, mapped.1.offset), (streamed.0, streamed.1.offset));
    assert_eq!(mapped.1.to_string(), streamed.1.to_string());
    mapped
}

fn read_until_error_with(path: &PathBuf, mmap: bool) -> (usize, pcapio::ReadError) {
    let opts = ReaderOptions {
        mmap,
        ..Default::default()
    };
    let mut r = TraceReader::open(path, opts).unwrap();
    let mut n = 0;
    loop {
        match r.next_chunk() {
            Ok(Some(c)) => n += c.frames.len(),
            Ok(None) => panic!("expected an error"),
            Err(e) => return (n, e),
        }
    }
}

#[test]
fn hostile_files_fail_clearly_after_keeping_earlier_frames() {
    let good = legacy_pcap(false, false, &[(1, 0, b"first"), (2, 0, b"second")]);
    // Bogus captured length in the third record.
    let mut bogus = good.clone();
    let at = bogus.len() as u64;
    bogus.extend_from_slice(&3u32.to_le_bytes());
    bogus.extend_from_slice(&0u32.to_le_bytes());
    bogus.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
    bogus.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
    let p = tmp("bogus.pcap");
    std::fs::write(&p, &bogus).unwrap();
    let (n, e) = read_until_error(&p);
    assert_eq!(n, 2);
    assert_eq!(e.offset, at);
    assert!(matches!(e.kind, ReadErrorKind::BogusLength { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("bogus.pcap") && msg.contains(&format!("byte {at}")),
        "{msg}"
    );

    // Truncated tail.
    let cut = &good[..good.len() - 3];
    let p = tmp("cut.pcap");
    std::fs::write(&p, cut).unwrap();
    let (n, e) = read_until_error(&p);
    assert_eq!(n, 1);
    assert!(matches!(e.kind, ReadErrorKind::Truncated { .. }), "{e}");

    // A pcapng block claiming 4 GB.
    let mut ng = pcapng(false);
    let at = ng.len() as u64;
    ng.extend_from_slice(&6u32.to_le_bytes());
    ng.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
    ng.extend_from_slice(&[0; 64]);
    let p = tmp("huge.pcapng");
    std::fs::write(&p, &ng).unwrap();
    let (n, e) = read_until_error(&p);
    assert_eq!((n, e.offset), (3, at));
    assert!(matches!(e.kind, ReadErrorKind::BogusLength { .. }), "{e}");

    // Not a trace; empty; too short for a header.
    for (name, bytes) in [
        ("text.pcap", &b"hello world, not a pcap"[..]),
        ("empty.pcap", b""),
        ("short.pcap", b"\xd4\xc3\xb2\xa1\x02"),
    ] {
        let p = tmp(name);
        std::fs::write(&p, bytes).unwrap();
        let e = TraceReader::open(&p, ReaderOptions::default())
            .err()
            .expect("must fail");
        assert!(e.to_string().contains(name), "{e}");
    }
    assert!(TraceReader::open(tmp("missing.pcap"), ReaderOptions::default()).is_err());
}

#[test]
fn record_larger_than_a_chunk() {
    let big = vec![7u8; 200_000];
    let p = tmp("big.pcap");
    std::fs::write(
        &p,
        legacy_pcap(false, false, &[(1, 0, b"x"), (2, 0, &big), (3, 0, b"y")]),
    )
    .unwrap();
    for mmap in [true, false] {
        let (_, got) = read_all(
            &p,
            ReaderOptions {
                chunk_bytes: 64 * 1024,
                mmap,
            },
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].4.len(), 200_000);
    }
}

/// Every file of tcpdump's test corpus either reads to its end or stops
/// with an error that names the file; nothing panics or hangs.
#[test]
fn tcpdump_corpus_reads_or_fails_clearly() {
    let files = testdata::tcpdump_captures();
    assert!(files.len() >= 300, "{} captures", files.len());
    let (mut ok, mut failed) = (0, 0);
    for path in &files {
        let result = TraceReader::open(path, ReaderOptions::default()).and_then(|mut r| {
            let mut n = 0u64;
            while let Some(c) = r.next_chunk()? {
                n += c.frames.len() as u64;
                for (f, b) in c.iter() {
                    assert_eq!(f.cap_len as usize, b.len());
                }
            }
            Ok(n)
        });
        match result {
            Ok(_) => ok += 1,
            Err(e) => {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                assert!(e.to_string().contains(&name), "{e}");
                failed += 1;
            }
        }
    }
    // A few of the captures are damaged on purpose; the rest read whole.
    assert!(
        ok * 100 >= files.len() * 94,
        "only {ok} of {} files read ({failed} failed)",
        files.len()
    );
}

/// A mapped trace cut short while it is being read (another program
/// truncating or rewriting it): the frames handed out before still read
/// (as zeros past the new end, not a SIGBUS), and the next chunk is an
/// error that says the file shrank.
#[test]
fn a_trace_that_shrinks_while_mapped_gives_an_error_not_sigbus() {
    let path = tmp("shrinks.pcap");
    write_trace(&path, &frames(6000));
    let len = std::fs::metadata(&path).unwrap().len();
    let opts = ReaderOptions {
        chunk_bytes: 256 * 1024,
        mmap: true,
    };
    let mut r = TraceReader::open(&path, opts).unwrap();
    let first = r.next_chunk().unwrap().expect("a first chunk");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(64 * 1024)
        .unwrap();
    // The first chunk's frames past 64 KiB now lie past the file's end.
    let touched: u64 = first
        .iter()
        .map(|(_, b)| b.iter().map(|&x| x as u64).sum::<u64>())
        .sum();
    std::hint::black_box(touched);
    let e = match r.next_chunk() {
        Err(e) => e,
        Ok(c) => panic!(
            "read on after the file shrank: {:?}",
            c.map(|c| c.frames.len())
        ),
    };
    assert!(
        matches!(e.kind, ReadErrorKind::Shrank { was, now } if was == len && now == 64 * 1024),
        "{e}"
    );
    assert!(e.to_string().contains("shrank"), "{e}");
}
