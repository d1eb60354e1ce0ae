//! OpenSSH's formats as `weir verify` and `--sign-key` read them: any text
//! as a signature, a key file, a public key line or an allowed-signers
//! file, and any bytes as the binary inside a signature's or a key's
//! armor, either parse or are refused; nothing panics, and a signature
//! that parses prints back to text that parses to the same signature.
#![no_main]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use libfuzzer_sys::fuzz_target;

fn check_signature(text: &str) {
    if let Ok(sig) = sshsig::Signature::from_armored(text) {
        let again = sshsig::Signature::from_armored(&sig.to_armored())
            .expect("a printed signature parses");
        assert_eq!(again, sig);
        let _ = sig.verify("weir-dataset", b"seal\n");
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    check_signature(&text);
    let _ = sshsig::PrivateKey::from_openssh(&text);
    let _ = sshsig::PublicKey::from_openssh(&text);
    if let Ok(signers) = sshsig::AllowedSigners::parse(&text) {
        for s in &signers.signers {
            let _ = signers.find(&s.key, "weir-dataset");
        }
    }
    // The bytes as the binary inside each armor.
    let b64 = STANDARD.encode(data);
    check_signature(&format!(
        "-----BEGIN SSH SIGNATURE-----\n{b64}\n-----END SSH SIGNATURE-----\n"
    ));
    let _ = sshsig::PrivateKey::from_openssh(&format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{b64}\n-----END OPENSSH PRIVATE KEY-----\n"
    ));
});
