//! The HTTP/1.x decoders: request and response heads and the chunked-body
//! walker on the whole input (and the input cut in two for the walker,
//! which must end in the same place); then the app tracker on the input
//! as segments to port 80 (see app_common.rs).

#![no_main]

use app::http::{Chunked, Request, Response};
use libfuzzer_sys::fuzz_target;

#[path = "app_common.rs"]
mod app_common;

fuzz_target!(|data: &[u8]| {
    if let Ok((r, n)) = Request::parse(data) {
        assert!(n <= data.len());
        let _ = r.body();
    }
    if let Ok((r, n)) = Response::parse(data) {
        assert!(n <= data.len());
        let _ = r.body("GET");
    }
    let walk = |parts: &[&[u8]]| {
        let (mut c, mut size, mut ext) = (Chunked::default(), 0u64, false);
        let mut used = 0;
        for p in parts {
            match c.advance(p, &mut size, &mut ext) {
                Ok(n) => {
                    assert!(n <= p.len());
                    used += n;
                    if c == Chunked::Done {
                        break;
                    }
                }
                Err(_) => return None,
            }
        }
        Some((c, used))
    };
    let whole = walk(&[data]);
    let cut = data.len() / 2;
    if let (Some(a), Some(b)) = (whole, walk(&[&data[..cut], &data[cut..]])) {
        assert_eq!(a, b);
    }
    app_common::track(data, 80);
});
