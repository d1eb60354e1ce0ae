//! `weir collect --kafka BROKERS --topic T --group G -o DATASET`: the
//! consumer side of `weir capture --kafka` (stream::collector).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::units::parse_duration;

#[derive(Args)]
pub struct CollectArgs {
    /// Kafka brokers (host:port[,host:port]).
    #[arg(long, value_name = "BROKERS")]
    kafka: String,
    #[arg(long, value_name = "TOPIC")]
    topic: String,
    /// Consumer group: collectors of one group share the partitions.
    #[arg(long, value_name = "GROUP")]
    group: String,
    /// The dataset to write; an existing one made by weir collect (same
    /// topic and group) is taken up again after a stop or a crash.
    #[arg(short = 'o', long = "output", value_name = "DATASET")]
    output: PathBuf,
    /// Stop after this long.
    #[arg(short, long, value_parser = parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Stop when no batch came for this long (counted from the first).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    idle: Option<Duration>,
    /// Make what was read durable, and commit its offsets, this often.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    flush_every: Duration,
    /// How long the group waits for a collector that stopped answering
    /// before giving its partitions to the others (a collector restarted
    /// on its dataset within this time gets its own back).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    session_timeout: Duration,
    #[command(flatten)]
    sign: crate::verify_cmd::SignKeyArg,
    #[command(flatten)]
    upload: crate::upload_args::UploadArg,
    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: CollectArgs) -> Result<ExitCode, String> {
    // A collector takes its dataset up again from its local files: they
    // are kept; what the bucket already holds is not sent again.
    let resumed = a.output.join(store::dataset::MANIFEST).is_file();
    let mut upload = a.upload.clone();
    upload.keep_local = true;
    let uploader = upload.start(&a.output, resumed, "weir collect")?;
    if let (Some(u), Some(url)) = (&uploader, &a.upload.upload)
        && resumed
    {
        crate::upload_args::seed(u, url)?;
    }
    let opts = stream::collector::CollectOptions {
        brokers: a.kafka.clone(),
        topic: a.topic.clone(),
        group: a.group.clone(),
        duration: a.duration,
        idle: a.idle,
        flush_every: a.flush_every,
        session_timeout: a.session_timeout,
        sign_key: a.sign.load()?,
        publisher: uploader.map(|u| u as std::sync::Arc<dyn util::storage::Publisher>),
        publish_wait: crate::upload_args::CAPTURE_WAIT,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    crate::signals::install();
    if !a.quiet {
        eprintln!(
            "weir: collecting topic {} (group {}) from {}; Ctrl-C to stop",
            a.topic, a.group, a.kafka
        );
    }
    let r = stream::collector::collect(&opts, &a.output, &crate::signals::STOP)?;
    if !a.quiet {
        let k = r.manifest.kafka.clone().unwrap_or_default();
        println!(
            "weir collect: dataset {}{}: {} batches read, {} records written, {} skipped as \
             already written ({:.1} s)",
            a.output.display(),
            if r.resumed { " (taken up again)" } else { "" },
            k.messages,
            k.records,
            k.duplicates_skipped,
            r.elapsed.as_secs_f64()
        );
        print!("{}", crate::describe::describe(&r.manifest));
    }
    Ok(ExitCode::SUCCESS)
}
