//! `pcapio::TraceReader` on arbitrary bytes: pcap, pcapng, and (since the
//! compression is sniffed from the first bytes) gzip and zstd streams. Reads
//! every chunk until the end or an error and checks that each frame lies
//! inside its chunk, that chunk numbering and frame counts add up, and that
//! the reader stays finished after the end or an error. Every frame is also
//! decoded with `wire::decode`, as ingest does.

#![no_main]

use std::io::Cursor;
use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use pcapio::{Container, ReaderOptions, TraceReader};
use wire::PacketRecord;

/// The smallest chunk the reader uses.
const CHUNK_BYTES: usize = 64 * 1024;
/// Bounds the work for one input: a tiny compressed input can expand to a
/// long stream, and all of it would be read otherwise.
const MAX_CHUNKS: u64 = 64;

fuzz_target!(|data: &[u8]| {
    let input = Box::new(Cursor::new(data.to_vec()));
    let options = ReaderOptions {
        chunk_bytes: CHUNK_BYTES,
        ..Default::default()
    };
    let mut reader = match TraceReader::from_read(PathBuf::from("fuzz-input"), input, options) {
        Ok(r) => r,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    if let Container::Pcap { .. } = reader.container() {
        assert_eq!(reader.interfaces().len(), 1);
    }

    let mut seq = 0u64;
    let mut frames = 0u64;
    let mut last_offset: Option<u64> = None;
    let mut last_bytes_read = reader.bytes_read();
    while seq < MAX_CHUNKS {
        match reader.next_chunk() {
            Ok(Some(chunk)) => {
                assert_eq!(chunk.seq, seq);
                assert_eq!(chunk.first_frame, frames);
                assert!(!chunk.frames.is_empty(), "empty chunk handed out");
                let interfaces = reader.interfaces();
                for f in &chunk.frames {
                    let end = f.start as u64 + f.cap_len as u64;
                    assert!(
                        end <= chunk.data.len() as u64,
                        "frame {f:?} outside chunk of {} bytes",
                        chunk.data.len()
                    );
                    let info = interfaces
                        .get(f.iface as usize)
                        .unwrap_or_else(|| panic!("frame {f:?} on an unknown interface"));
                    assert_eq!(f.link, info.link);
                    if let Some(prev) = last_offset {
                        assert!(f.record_offset > prev, "record offsets go backwards");
                    }
                    last_offset = Some(f.record_offset);
                    assert!(f.record_offset >= last_bytes_read);
                }
                for (f, bytes) in chunk.iter() {
                    assert_eq!(bytes.len(), f.cap_len as usize);
                    let mut rec = PacketRecord::new(f.ts_ns, f.wire_len, f.cap_len);
                    wire::decode(f.link, bytes, &mut rec);
                    assert_eq!(rec.cap_len, f.cap_len);
                }
                frames += chunk.frames.len() as u64;
                assert_eq!(reader.frames_read(), frames);
                assert!(reader.bytes_read() > last_bytes_read);
                assert!(last_offset.unwrap() < reader.bytes_read());
                last_bytes_read = reader.bytes_read();
                seq += 1;
                if let Some(b) = chunk.data.into_buffer() {
                    reader.recycle(b);
                }
            }
            Ok(None) => {
                assert!(matches!(reader.next_chunk(), Ok(None)));
                break;
            }
            Err(e) => {
                let _ = e.to_string();
                // Every frame before the error's offset was handed out.
                assert!(
                    e.offset >= last_bytes_read,
                    "error before the last chunk's end"
                );
                if let Some(prev) = last_offset {
                    assert!(e.offset > prev);
                }
                // After an error the reader is finished.
                assert!(matches!(reader.next_chunk(), Ok(None)));
                break;
            }
        }
    }
    assert_eq!(reader.frames_read(), frames);
});
