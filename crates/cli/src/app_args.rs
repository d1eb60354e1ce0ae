//! The DNS/TLS/HTTP stage's flag, shared by `weir convert` and `weir capture`.

use clap::Args;
use ingest::AppOptions;

#[derive(Args, Clone, Debug)]
pub struct AppArgs {
    /// Do not decode DNS, TLS handshakes and HTTP/1.x into the dns, tls and
    /// http tables (they are decoded by default).
    #[arg(long)]
    no_app: bool,
}

impl AppArgs {
    /// The stage's options.
    pub fn options(&self) -> AppOptions {
        AppOptions {
            on: !self.no_app,
            ..Default::default()
        }
    }
}
