//! The DNS decoder: `app::dns::DnsMessage::parse` on the whole input (names
//! with pointers anywhere: loops, forward jumps, over-long labels and
//! names must be errors, never a panic or a hang; what it accepts hangs
//! together), then the app tracker on the input as segments to port 53
//! (UDP and TCP with its length prefixes; see app_common.rs).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "app_common.rs"]
mod app_common;

fuzz_target!(|data: &[u8]| {
    let mut m = app::dns::DnsMessage::default();
    if m.parse(data).is_ok() {
        assert!(m.answers.len() <= m.ancount as usize);
        for a in &m.answers {
            let name = m.name(&a.name);
            assert!(name.len() <= 255 * 4, "{name}");
            if let Some(t) = &a.target {
                let _ = m.name(t);
            }
        }
        assert_eq!(m.question.is_some(), m.qdcount > 0);
    }
    app_common::track(data, 53);
});
