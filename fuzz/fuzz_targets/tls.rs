//! The TLS decoders: the ClientHello (split over records or not), its JA3
//! and JA4, the server's hello and certificate, and the X.509 walk, each
//! on the whole input; then the app tracker on the input as segments to
//! port 443 (see app_common.rs).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "app_common.rs"]
mod app_common;

fuzz_target!(|data: &[u8]| {
    let mut scratch = Vec::new();
    let mut hello = app::tls::ClientHello::default();
    if hello.parse_stream(data, &mut scratch).is_ok() {
        assert_eq!(hello.ja3().len(), 32);
        assert_eq!(hello.ja4().len(), 36);
        let _ = hello.ja3_string();
    }
    // The body alone, as a message.
    let mut body = app::tls::ClientHello::default();
    let _ = body.parse(data);
    let _ = app::tls::server_side(data, &mut scratch);
    let _ = app::tls::ServerHello::parse(data);
    let _ = app::x509::summary(data);
    app_common::track(data, 443);
});
