//! The RPC stage's flags, shared by `weir convert` and `weir capture`.

use std::time::Duration;

use clap::Args;
use ingest::{RpcMode, RpcOptions};

use crate::units::parse_duration;

#[derive(Args, Clone, Debug)]
pub struct RpcArgs {
    /// Decode ONC RPC / NFS transactions from every frame into the rpc and
    /// nfs tables. Without it they are decoded from the first frame to or
    /// from port 111 or 2049 on.
    #[arg(long, conflicts_with = "no_rpc")]
    rpc: bool,
    /// Do not decode RPC.
    #[arg(long)]
    no_rpc: bool,
    /// Give up on a call with no reply after this long (capture time).
    #[arg(long, value_parser = parse_duration, default_value = "30s", value_name = "DURATION")]
    rpc_timeout: Duration,
}

impl RpcArgs {
    /// The stage's options.
    pub fn options(&self) -> RpcOptions {
        let mode = if self.no_rpc {
            RpcMode::Off
        } else if self.rpc {
            RpcMode::On
        } else {
            RpcMode::Auto
        };
        let mut o = RpcOptions {
            mode,
            ..Default::default()
        };
        o.tracker.call_timeout_ns = self.rpc_timeout.as_nanos().min(i64::MAX as u128) as i64;
        o
    }
}
