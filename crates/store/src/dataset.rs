//! The dataset directory.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::integrity::{Integrity, SigningKey};
use crate::manifest::Manifest;

pub const MANIFEST: &str = "manifest.json";
pub const PACKETS_DIR: &str = "packets";
pub const PCAP_DIR: &str = "pcap";
pub const STATS_DIR: &str = "stats";

/// A dataset directory on disk.
#[derive(Clone, Debug)]
pub struct Dataset {
    root: PathBuf,
    /// Signs the manifest's seal at every write (`--sign-key`).
    signing_key: Option<std::sync::Arc<SigningKey>>,
    /// Told of every manifest written, to copy the dataset to an object
    /// store as its files are sealed (`--upload`).
    publisher: Option<std::sync::Arc<dyn util::storage::Publisher>>,
}

impl Dataset {
    /// Makes a new, empty dataset at `root`. An existing directory is used
    /// only if it is empty, or if `replace` is set and it is a weir dataset
    /// (its files are removed first); anything else is refused so that no
    /// unrelated files are ever deleted.
    pub fn create(root: &Path, replace: bool) -> Result<Dataset, StoreError> {
        if Self::check_new(root, replace)? {
            Self::clear(root)?;
        }
        let packets = root.join(PACKETS_DIR);
        crate::files::create_dirs(&packets)?;
        Ok(Dataset {
            root: root.to_path_buf(),
            signing_key: None,
            publisher: None,
        })
    }

    /// Whether `root` may become a new dataset (the checks of
    /// [`Dataset::create`], nothing changed on disk): `Ok(true)` when it
    /// is a dataset `replace` allows to be replaced.
    pub fn check_new(root: &Path, replace: bool) -> Result<bool, StoreError> {
        if !root.exists() {
            return Ok(false);
        }
        let entries: Vec<_> = fs::read_dir(root)
            .map_err(|e| StoreError::io(root, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::io(root, e))?;
        if entries.is_empty() {
            return Ok(false);
        }
        let is_dataset = root.join(MANIFEST).is_file();
        if !(replace && is_dataset) {
            let message = if is_dataset {
                "is already a weir dataset; pass --force to replace it, or choose a new \
                 directory"
            } else {
                "exists and is not empty; choose a new or empty directory for the \
                 dataset"
            };
            return Err(StoreError::Invalid {
                path: root.to_path_buf(),
                message: message.into(),
            });
        }
        Ok(true)
    }

    /// Removes a dataset's files (its manifest last).
    fn clear(root: &Path) -> Result<(), StoreError> {
        for sub in [
            PACKETS_DIR,
            crate::flows::FLOWS_DIR,
            PCAP_DIR,
            STATS_DIR,
            crate::stack::STACK_DIR,
            crate::stack_intervals::INTERVALS_DIR,
            crate::rpc::RPC_DIR,
            crate::rpc::NFS_DIR,
        ] {
            let d = root.join(sub);
            if d.exists() {
                fs::remove_dir_all(&d).map_err(|e| StoreError::io(&d, e))?;
            }
        }
        fs::remove_file(root.join(MANIFEST)).map_err(|e| StoreError::io(root, e))
    }

    /// [`Dataset::create`] with its first manifest, so that there is no
    /// moment at which the directory exists without one (a capture killed
    /// at any moment leaves something `weir recover` can put in order). A
    /// new directory is made under a hidden name beside it and renamed into
    /// place whole; an existing empty one gets the manifest before
    /// anything else.
    pub fn create_with_manifest(
        root: &Path,
        replace: bool,
        manifest: &Manifest,
    ) -> Result<Dataset, StoreError> {
        if root.exists() {
            if Self::check_new(root, replace)? {
                Self::clear(root)?;
            }
            let d = Dataset {
                root: root.to_path_buf(),
                signing_key: None,
                publisher: None,
            };
            d.write_manifest(manifest)?;
            d.subdir(PACKETS_DIR)?;
            return Ok(d);
        }
        let name = root.file_name().ok_or_else(|| StoreError::Invalid {
            path: root.to_path_buf(),
            message: "is not a directory name; give a path such as ./capture1".into(),
        })?;
        let parent = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = parent.join(format!(
            ".{}.new-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&tmp);
        crate::files::create_dirs(&tmp.join(PACKETS_DIR))?;
        let staged = Dataset {
            root: tmp.clone(),
            signing_key: None,
            publisher: None,
        };
        let placed = staged
            .write_manifest(manifest)
            .and_then(|_| fs::rename(&tmp, root).map_err(|e| StoreError::io(root, e)));
        if placed.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        placed?;
        Ok(Dataset {
            root: root.to_path_buf(),
            signing_key: None,
            publisher: None,
        })
    }

    /// Opens an existing dataset (it must have a manifest).
    pub fn open(root: &Path) -> Result<Dataset, StoreError> {
        if !root.join(MANIFEST).is_file() {
            let message = if root.is_dir() {
                "is not a weir dataset (no manifest.json); make one with `weir convert` or \
                 `weir capture`"
            } else {
                "does not exist; give the directory of a dataset made by `weir convert` or \
                 `weir capture`"
            };
            return Err(StoreError::Invalid {
                path: root.to_path_buf(),
                message: message.into(),
            });
        }
        Ok(Dataset {
            root: root.to_path_buf(),
            signing_key: None,
            publisher: None,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A subdirectory (`pcap`, `stats`), made if missing.
    pub fn subdir(&self, name: &str) -> Result<PathBuf, StoreError> {
        let d = self.root.join(name);
        crate::files::create_dirs(&d)?;
        Ok(d)
    }

    /// Absolute and dataset-relative path of a worker's packet file.
    pub fn packet_file(&self, worker: u16, seq: u32) -> (PathBuf, String) {
        let rel = format!("{PACKETS_DIR}/w{worker:03}-{seq:05}.parquet");
        (self.root.join(&rel), rel)
    }

    /// The same dataset, its manifest signed with `key` at every write.
    pub fn signed_with(mut self, key: Option<std::sync::Arc<SigningKey>>) -> Dataset {
        self.signing_key = key;
        self
    }

    /// The same dataset, each manifest written handed to `publisher`
    /// (which uploads the files it names, then it).
    pub fn published_to(
        mut self,
        publisher: Option<std::sync::Arc<dyn util::storage::Publisher>>,
    ) -> Dataset {
        self.publisher = publisher;
        self
    }

    /// What the publisher has done, if there is one.
    pub fn publisher(&self) -> Option<&std::sync::Arc<dyn util::storage::Publisher>> {
        self.publisher.as_ref()
    }

    /// At the end of a writer: waits up to `limit` for the publisher to
    /// have everything, writes `manifest` once more with its final figures
    /// and waits for that to go too. The figures, when there is a
    /// publisher.
    pub fn finish_publishing(
        &self,
        manifest: &Manifest,
        limit: std::time::Duration,
    ) -> Result<Option<Manifest>, StoreError> {
        let Some(p) = &self.publisher else {
            return Ok(None);
        };
        let until = std::time::Instant::now() + limit;
        p.drain(limit);
        let m = self.write_manifest(manifest)?;
        p.drain(until.saturating_duration_since(std::time::Instant::now()));
        Ok(Some(m))
    }

    /// Whether the manifest is signed at every write.
    pub fn is_signed(&self) -> bool {
        self.signing_key.is_some()
    }

    /// Writes the manifest atomically (temporary file, sync, rename),
    /// after bringing its integrity chain up to the files on disk and
    /// sealing it (see [`crate::integrity`]), and returns it as written. The chain continued is the
    /// one on disk, unless `manifest` carries a chain of other inputs.
    /// A `stack` section already on disk is kept when `manifest` has none:
    /// `weir stack` may be recording into the same dataset as a capture,
    /// and each writes only its own part.
    pub fn write_manifest(&self, manifest: &Manifest) -> Result<Manifest, StoreError> {
        self.write_manifest_after_removing(manifest, &Default::default())
    }

    /// [`Dataset::write_manifest`] after files of the chain were deleted
    /// on purpose: `removed` gives the reason per dataset-relative path
    /// (pcap files retention removed are read from the manifest itself).
    pub fn write_manifest_after_removing(
        &self,
        manifest: &Manifest,
        removed: &std::collections::HashMap<String, String>,
    ) -> Result<Manifest, StoreError> {
        let path = self.root.join(MANIFEST);
        let on_disk = self.read_manifest().ok();
        let mut m = manifest.clone();
        // The chain on disk is the newest of its line (a caller may hold
        // an older copy); a caller's chain with other inputs is a new one
        // (recover, merge, anonymize start their own).
        let mut chain = match (
            m.integrity.take(),
            on_disk.as_ref().and_then(|d| d.integrity.clone()),
        ) {
            (Some(mine), Some(disk)) if mine.inputs != disk.inputs => mine,
            (_, Some(disk)) => disk,
            (Some(mine), None) => mine,
            (None, None) => Integrity::new(Vec::new()),
        };
        if m.stack.is_none() {
            m.stack = on_disk.and_then(|d| d.stack);
        }
        let known = m
            .files
            .packets
            .iter()
            .filter_map(|f| Some((f.path.clone(), f.digest?)))
            .chain(
                m.files
                    .pcap
                    .iter()
                    .filter_map(|f| Some((f.path.clone(), f.digest?))),
            )
            .collect();
        let mut removed = removed.clone();
        removed.extend(
            m.files
                .pcap_removed
                .iter()
                .map(|f| (f.path.clone(), f.reason.clone())),
        );
        let elsewhere = match &self.publisher {
            Some(p) => {
                m.upload = Some(p.figures().into());
                p.held_elsewhere()
            }
            None => Vec::new(),
        };
        chain.extend(&self.root, &known, &removed, &elsewhere)?;
        chain.seal(&m, self.signing_key.as_deref());
        m.integrity = Some(chain);
        let tmp = self.root.join(format!(".{MANIFEST}.part"));
        let json = serde_json::to_vec_pretty(&m).map_err(|e| StoreError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let written = crate::files::create_file(&tmp).and_then(|mut f| {
            f.write_all(&json).map_err(|e| StoreError::io(&tmp, e))?;
            f.write_all(b"\n").map_err(|e| StoreError::io(&tmp, e))?;
            f.sync_data().map_err(|e| StoreError::io(&tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))
        });
        if let Err(e) = written {
            // A full disk: the manifest before stays whole, and no torn
            // copy is left behind.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // Make the rename itself durable.
        if let Ok(dir) = fs::File::open(&self.root) {
            let _ = dir.sync_all();
        }
        let signature = m.integrity.as_ref().and_then(|i| i.signature.as_ref());
        self.write_signature_file(signature.map(|s| s.sshsig.as_str()))?;
        if let (Some(p), Some(chain)) = (&self.publisher, &m.integrity) {
            let files = chain.live_sealed();
            // Late records are built from the pcap files: their local
            // copies stay while any are pending.
            let pending = m.late_records.is_some_and(|l| l.pending > 0);
            let keep: Vec<String> = files
                .iter()
                .filter(|f| pending && f.path.starts_with(&format!("{PCAP_DIR}/")))
                .map(|f| f.path.clone())
                .collect();
            let mut text = json;
            text.push(b'\n');
            let sig = signature.map(|s| s.sshsig.as_bytes());
            p.published(&files, &text, sig, &keep);
        }
        Ok(m)
    }

    /// The manifest's signature as its own file, for `ssh-keygen -Y
    /// verify -s` (written after the manifest: a crash between the two
    /// leaves an old one, which `weir verify` reports and `weir recover`
    /// replaces); removed when the manifest is no longer signed.
    fn write_signature_file(&self, armored: Option<&str>) -> Result<(), StoreError> {
        let path = self.root.join(crate::integrity::SIGNATURE_FILE);
        let Some(text) = armored else {
            return match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::io(&path, e)),
                _ => Ok(()),
            };
        };
        let tmp = self
            .root
            .join(format!(".{}.part", crate::integrity::SIGNATURE_FILE));
        let written = crate::files::create_file(&tmp).and_then(|mut f| {
            f.write_all(text.as_bytes())
                .map_err(|e| StoreError::io(&tmp, e))?;
            f.sync_data().map_err(|e| StoreError::io(&tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| StoreError::io(&path, e))
        });
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    pub fn read_manifest(&self) -> Result<Manifest, StoreError> {
        let path = self.root.join(MANIFEST);
        let bytes = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        Manifest::from_json(&path.display().to_string(), &bytes)
    }
}

/// A few MiB held in a dataset's directory while a capture writes it, so
/// that the end of the capture always has room: with `--on-full stop` it
/// is given back when the disk fills, so every writer can still close its
/// file; with `--on-full drop` it is kept until the writers are done, so
/// the last stats and the manifest can always be written.
#[derive(Debug)]
pub struct SpaceReserve {
    path: PathBuf,
    released: std::sync::atomic::AtomicBool,
}

impl SpaceReserve {
    /// The reserve file's name in the dataset's directory (hidden: no
    /// reader lists it; `weir recover` removes one a crash left).
    pub const NAME: &'static str = ".space-reserve";

    /// Writes `bytes` of zeros (written, not sparse, so the space is
    /// really taken) to `DIR/.space-reserve`.
    pub fn hold(dir: &Path, bytes: usize) -> Result<SpaceReserve, StoreError> {
        let path = dir.join(Self::NAME);
        let mut f = crate::files::create_file(&path)?;
        let zeros = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(zeros.len());
            f.write_all(&zeros[..n])
                .map_err(|e| StoreError::io(&path, e))?;
            left -= n;
        }
        f.sync_data().map_err(|e| StoreError::io(&path, e))?;
        Ok(SpaceReserve {
            path,
            released: Default::default(),
        })
    }

    /// Gives the space back (once); true the first time.
    pub fn release(&self) -> bool {
        let first = !self
            .released
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        if first {
            let _ = fs::remove_file(&self.path);
        }
        first
    }
}

impl Drop for SpaceReserve {
    fn drop(&mut self) {
        self.release();
    }
}
