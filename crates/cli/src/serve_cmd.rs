//! `weir serve`: wiring to the serve crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::units::parse_duration;

#[derive(Args)]
pub struct ServeArgs {
    /// One or more datasets, served as one (a capture may still be writing
    /// them): directories, or s3://BUCKET/PREFIX (a prefix holding several
    /// datasets serves all of them).
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<String>,
    /// The address and port to listen on; an address other than the
    /// loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7480", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A file holding the bearer token every request must carry (one word
    /// of 16 characters or more: head -c 24 /dev/urandom | base64 > FILE).
    #[arg(long, value_name = "FILE")]
    token: Option<PathBuf>,
    /// Rows a table or a query returns at most.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_rows: usize,
    /// How long a request's queries may run.
    #[arg(long, default_value = "30s", value_name = "D")]
    time_limit: String,
    /// Queries running at once (more wait).
    #[arg(long, default_value_t = 2, value_name = "N")]
    max_queries: usize,
    /// Cores each query uses.
    #[arg(short = 'j', long, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// The server's nice value (0-19): its queries yield to a capture on
    /// the same machine.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=19))]
    nice: i32,
}

pub fn run(a: ServeArgs) -> Result<ExitCode, String> {
    let token = a.token.as_deref().map(serve::load_token).transpose()?;
    let time_limit = parse_duration(&a.time_limit).map_err(|e| format!("--time-limit: {e}"))?;
    let datasets = a
        .datasets
        .iter()
        .map(|d| objects::open(d).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = serve::ServeOptions {
        datasets,
        listen: a.listen,
        token,
        limits: serve::Limits {
            max_rows: a.max_rows,
            time_limit,
            max_queries: a.max_queries,
            query_threads: a.threads.max(1),
            nice: a.nice,
        },
    };
    let n = opts.datasets.len();
    let guarded = opts.token.is_some();
    let token_file = a.token.clone();
    serve::serve(opts, |addr| {
        let host = if addr.ip().is_unspecified() {
            "HOST".to_string()
        } else {
            addr.to_string()
        };
        eprintln!(
            "weir serve: listening on http://{host}/ ({n} dataset{})",
            if n == 1 { "" } else { "s" }
        );
        if guarded {
            eprintln!(
                "weir serve: every request must carry the token in {} (Authorization: Bearer); \
                 open the page once as http://{host}/?token=TOKEN",
                token_file
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
