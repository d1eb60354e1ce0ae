//! A Kafka message as `weir collect` reads it: any bytes either decode to
//! a batch that encodes back to the same records, or are refused; nothing
//! panics and a hostile record count allocates nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, records)) = batch::decode(data) {
        let again = batch::encode(&h, &records, 1);
        let (h2, back) = batch::decode(&again).expect("a re-encoded batch decodes");
        assert_eq!(h2, h);
        assert_eq!(back, records);
    }
    // The same bytes as a compressed body behind a valid header, of
    // either version.
    for magic in [batch::MAGIC, batch::MAGIC_V1] {
        let mut m = Vec::with_capacity(batch::HEADER_BYTES + data.len());
        m.extend_from_slice(magic);
        m.extend_from_slice(&[0; 24]);
        let n = (data.len() / batch::RECORD_BYTES) as u32;
        m.extend_from_slice(&n.to_le_bytes());
        m.extend_from_slice(data);
        let _ = batch::decode(&m);
    }
});
