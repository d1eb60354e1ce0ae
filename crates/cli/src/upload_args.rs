//! `--upload s3://BUCKET/PREFIX`, for every command that writes a dataset
//! as it goes (capture, convert, stack, collect): the files go up as they
//! are sealed, the manifest last (`objects::upload`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use util::storage::Storage;

/// How long a writer waits at its end for the uploads still to go.
const FINISH_LIMIT: Duration = Duration::from_secs(120);
/// A capture's wait: a service's stop allows it 90 s in all.
pub const CAPTURE_WAIT: Duration = Duration::from_secs(30);

#[derive(Args, Clone)]
pub struct UploadArg {
    /// Copy the dataset to an S3-compatible object store as it is written:
    /// each file once it is sealed (checked against its digest), the
    /// manifest last; a file's local copy is deleted once it is in the
    /// bucket. When the store cannot be reached the dataset goes on
    /// locally and is uploaded when it answers again.
    #[arg(long, value_name = "s3://BUCKET/PREFIX")]
    pub upload: Option<String>,
    /// Keep the local copies of uploaded files.
    #[arg(long, requires = "upload")]
    pub keep_local: bool,
    /// Files larger than this go up as multipart uploads of parts this
    /// size (at least 5Mi, as S3 requires).
    #[arg(long, value_parser = crate::units::parse_size, default_value = "16Mi",
          value_name = "SIZE", hide = true)]
    pub upload_part_size: u64,
}

impl UploadArg {
    /// The destination checked (a bucket that exists, credentials it
    /// takes, no dataset there yet unless `replace`) and the uploader of
    /// the dataset at `local` started; `who` names the command in what
    /// it says. A store that cannot be reached is no reason to stop: the
    /// dataset is uploaded when it answers.
    pub fn start(
        &self,
        local: &Path,
        replace: bool,
        who: &'static str,
    ) -> Result<Option<Arc<objects::Uploader>>, String> {
        let Some(url) = &self.upload else {
            return Ok(None);
        };
        if !objects::is_url(url) {
            return Err(format!(
                "--upload {url}: give the destination as s3://BUCKET/PREFIX"
            ));
        }
        let dest = objects::Prefix::parse(url).map_err(|e| format!("--upload {url}: {e}"))?;
        match dest.exists(store::dataset::MANIFEST) {
            Ok(true) if !replace => {
                return Err(format!(
                    "--upload {url}: a dataset is already there; choose another prefix (or \
                     pass --force to write over it)"
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
                eprintln!(
                    "{who}: warning: --upload {url}: {e}; the dataset is kept locally and uploaded once the store answers"
                );
            }
            Err(e) => return Err(format!("--upload {url}: {e}")),
        }
        if self.upload_part_size < 5 << 20 {
            return Err(format!(
                "--upload-part-size {}: S3 takes parts of 5Mi or more",
                self.upload_part_size
            ));
        }
        let opts = objects::UploadOptions {
            delete_local: !self.keep_local,
            part_bytes: self.upload_part_size as usize,
        };
        let notice: objects::upload::Notice = Box::new(move |m| eprintln!("{who}: upload: {m}"));
        objects::Uploader::start(local, dest, opts, notice)
            .map(Some)
            .map_err(|e| format!("--upload {url}: {e}"))
    }
}

/// At a writer's end: the uploads finished (waiting a while for them), the
/// manifest written once more with the upload's figures, and a line that
/// says where the dataset is.
pub fn finish(
    dataset: &store::Dataset,
    manifest: &store::Manifest,
    who: &str,
) -> Result<Option<store::Manifest>, String> {
    let Some(m) = dataset
        .finish_publishing(manifest, FINISH_LIMIT)
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    say_uploaded(&m, dataset.root(), who);
    Ok(Some(m))
}

/// Says where the dataset is, by the manifest's upload figures.
pub fn say_uploaded(m: &store::Manifest, local: &Path, who: &str) {
    let Some(u) = &m.upload else {
        return;
    };
    if u.backlog_files == 0 {
        eprintln!(
            "{who}: uploaded to {}: {} files, {} (the manifest last)",
            u.destination,
            u.files,
            util::fmt::human_bytes(u.bytes)
        );
    } else {
        eprintln!(
            "{who}: warning: {} files ({}) are not in {} yet ({}); they stay in {}, whose \
             manifest names them",
            u.backlog_files,
            util::fmt::human_bytes(u.backlog_bytes),
            u.destination,
            u.last_error
                .as_deref()
                .unwrap_or("the store did not take them in time"),
            local.display()
        );
    }
}

/// Tells the uploader what the destination's manifest says is there
/// already (a writer taking its dataset up again), so that it is not sent
/// twice, and which of the local files are only there. A destination
/// without a manifest holds nothing; one that cannot be read is an error
/// (what the bucket holds is not known).
pub fn seed(uploader: &objects::Uploader, url: &str) -> Result<(), String> {
    let dest = objects::open(url).map_err(|e| format!("{url}: {e}"))?;
    let unreadable = |e: String| {
        format!(
            "{url}: {e}; what the bucket holds already cannot be known: run this again when \
             the store answers"
        )
    };
    if !dest
        .exists(store::dataset::MANIFEST)
        .map_err(|e| unreadable(e.to_string()))?
    {
        return Ok(());
    }
    let m = store::location::read_manifest(&*dest).map_err(|e| unreadable(e.to_string()))?;
    let Some(chain) = &m.integrity else {
        return Ok(());
    };
    uploader.seed(chain.live_sealed());
    Ok(())
}

/// A dataset its writer was uploading when it was killed (its manifest
/// names the destination): for `weir recover`, its uploader again (the
/// local copies kept), told what the bucket holds, and the bucket's copy
/// to read the files only it has. `None` when the dataset was not
/// uploaded.
pub fn resume(
    dataset: &Path,
    who: &'static str,
) -> Result<Option<ingest::recover::Uploaded>, String> {
    let Ok(m) = store::Dataset::open(dataset).and_then(|d| d.read_manifest()) else {
        return Ok(None);
    };
    let Some(url) = m.upload.map(|u| u.destination) else {
        return Ok(None);
    };
    let arg = UploadArg {
        upload: Some(url.clone()),
        keep_local: true,
        upload_part_size: 16 << 20,
    };
    let uploader = arg.start(dataset, true, who)?.ok_or("no destination")?;
    seed(&uploader, &url)?;
    let remote = objects::open(&url).map_err(|e| format!("{url}: {e}"))?;
    Ok(Some(ingest::recover::Uploaded { uploader, remote }))
}

/// `weir upload DATASET s3://BUCKET/PREFIX`: a finished dataset (or the
/// part of one a writer could not send before it ended) copied to the
/// store, the files its manifest's chain holds first, the manifest last.
#[derive(Args)]
pub struct UploadCmdArgs {
    /// The local dataset.
    dataset: std::path::PathBuf,
    /// Where to: s3://BUCKET/PREFIX (objects already there as sealed are
    /// not sent again).
    #[arg(value_name = "s3://BUCKET/PREFIX")]
    destination: String,
    /// Delete the local copies once they are in the bucket.
    #[arg(long)]
    delete_local: bool,
    /// Files larger than this go up in parts of this size (at least 5Mi).
    #[arg(long, value_parser = crate::units::parse_size, default_value = "16Mi",
          value_name = "SIZE", hide = true)]
    part_size: u64,
}

pub fn run(a: UploadCmdArgs) -> Result<std::process::ExitCode, String> {
    let arg = UploadArg {
        upload: Some(a.destination.clone()),
        keep_local: !a.delete_local,
        upload_part_size: a.part_size,
    };
    let uploader = arg
        .start(&a.dataset, true, "weir upload")?
        .ok_or("no destination")?;
    seed(&uploader, &a.destination)?;
    let ds = store::Dataset::open(&a.dataset)
        .map_err(|e| e.to_string())?
        .published_to(Some(uploader.clone()));
    // Written once to hand the chain's files to the uploader, so that the
    // final manifest carries the figures of their upload.
    let m = ds
        .read_manifest()
        .and_then(|m| ds.write_manifest(&m))
        .map_err(|e| e.to_string())?;
    let done = ds
        .finish_publishing(&m, Duration::from_secs(24 * 3600))
        .map_err(|e| e.to_string())?;
    let ok = done
        .as_ref()
        .and_then(|m| m.upload.as_ref())
        .is_some_and(|u| u.backlog_files == 0);
    if let Some(m) = &done {
        say_uploaded(m, &a.dataset, "weir upload");
    }
    Ok(if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
