//! Datasets where readers find them: a directory, or a prefix of an object
//! store (a [`Root`]). A directory's tables are what its table
//! directories hold; a bucket is never listed to find a dataset's files:
//! they are planned from the manifest, whose integrity chain names every
//! finished file with its size.
//!
//! A root that holds no manifest of its own but datasets below it (the
//! shards of one link, the days of one sensor: `s3://b/site/`) is read as
//! all of them ([`datasets_under`]), and a dataset that `weir merge`
//! linked instead of copying ([`crate::manifest::MergeInfo::linked`]) as
//! its inputs.

use std::collections::BTreeSet;

use util::storage::{Root, Storage};

use crate::dataset::MANIFEST;
use crate::error::StoreError;
use crate::manifest::Manifest;

/// A dataset opened for reading: where it is, and its manifest.
#[derive(Clone, Debug)]
pub struct Located {
    pub root: Root,
    pub manifest: Manifest,
}

/// A file of one of a dataset's tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFile {
    /// Relative to the dataset's root.
    pub rel: String,
    /// Its size, when the manifest says it.
    pub bytes: Option<u64>,
}

/// An I/O error on `rel` under `root`, naming it.
pub fn io_error(root: &dyn Storage, rel: &str, e: std::io::Error) -> StoreError {
    StoreError::io(root.name_of(rel), e)
}

/// The manifest of the dataset at `root`.
pub fn read_manifest(root: &dyn Storage) -> Result<Manifest, StoreError> {
    let bytes = match root.read(MANIFEST) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let message = match root.local_dir() {
                Some(d) if d.is_dir() => {
                    "is not a weir dataset (no manifest.json); make one with `weir convert` or \
                     `weir capture`"
                }
                Some(_) => {
                    "does not exist; give the directory of a dataset made by `weir convert` or \
                     `weir capture`"
                }
                None => {
                    "holds no weir dataset (no manifest.json under the prefix, nor below it); \
                     check the bucket and prefix"
                }
            };
            return Err(StoreError::Invalid {
                path: root.name().into(),
                message: message.into(),
            });
        }
        Err(e) => return Err(io_error(root, MANIFEST, e)),
    };
    Manifest::from_json(&root.name_of(MANIFEST), &bytes)
}

/// The datasets `root` names: itself when it holds a manifest, else every
/// dataset below it (found by one listing), in order of their paths; a
/// linked merge stands for its inputs. An error when there is none.
pub fn datasets_under(root: &Root) -> Result<Vec<Located>, StoreError> {
    let own = root
        .exists(MANIFEST)
        .map_err(|e| io_error(&**root, MANIFEST, e))?;
    let roots = if own {
        vec![root.clone()]
    } else {
        let listed = root.list("").map_err(|e| io_error(&**root, "", e))?;
        let dirs: BTreeSet<String> = listed
            .iter()
            .filter_map(|l| l.path.strip_suffix(&format!("/{MANIFEST}")))
            .map(str::to_string)
            .collect();
        if dirs.is_empty() {
            // Said as for a directory without a manifest.
            read_manifest(&**root)?;
        }
        // A dataset inside another's directory is not one of the set (a
        // merge's copy is beside its inputs, not in them).
        let outer: Vec<&String> = dirs
            .iter()
            .filter(|d| {
                !dirs
                    .iter()
                    .any(|o| o != *d && d.starts_with(&format!("{o}/")))
            })
            .collect();
        outer.into_iter().map(|d| root.at(d)).collect()
    };
    let mut out = Vec::new();
    for r in roots {
        let manifest = read_manifest(&*r)?;
        match manifest.merge.as_ref().filter(|m| m.linked) {
            Some(m) => {
                for i in &m.inputs {
                    let at = r.at(&i.path);
                    let manifest = read_manifest(&*at)?;
                    out.push(Located { root: at, manifest });
                }
            }
            None => out.push(Located { root: r, manifest }),
        }
    }
    Ok(out)
}

/// The files of the table directory `dir` (`packets`, `stats`, ...) of
/// a dataset, in order of their names: what the directory holds, for a
/// local dataset (a running capture's newest files are there before its
/// next manifest names them); else the Parquet files the manifest's chain
/// holds (or, for a manifest without one, those the store lists).
pub fn table_files(
    root: &dyn Storage,
    manifest: &Manifest,
    dir: &str,
) -> Result<Vec<TableFile>, StoreError> {
    let prefix = format!("{dir}/");
    let parquet = |p: &str| {
        p.strip_prefix(&prefix)
            .is_some_and(|n| n.ends_with(".parquet") && !n.starts_with('.') && !n.contains('/'))
    };
    if root.local_dir().is_none()
        && let Some(chain) = &manifest.integrity
    {
        return Ok(chain
            .live()
            .into_iter()
            .filter(|(p, _)| parquet(p))
            .map(|(p, e)| TableFile {
                rel: p.to_string(),
                bytes: e.bytes,
            })
            .collect());
    }
    let listed = root.list(dir).map_err(|e| io_error(root, dir, e))?;
    Ok(listed
        .into_iter()
        .filter(|l| parquet(&l.path))
        .map(|l| TableFile {
            rel: l.path,
            bytes: Some(l.bytes),
        })
        .collect())
}

/// Whether `rel` is one of the dataset's files: on the disk for a local
/// dataset, in the chain for one in an object store.
pub fn has_file(root: &dyn Storage, manifest: &Manifest, rel: &str) -> Result<bool, StoreError> {
    if root.local_dir().is_none()
        && let Some(chain) = &manifest.integrity
    {
        return Ok(chain.live().contains_key(rel));
    }
    root.exists(rel).map_err(|e| io_error(root, rel, e))
}

/// Writes `manifest` to the dataset at `root` with its `integrity` chain
/// sealed (and signed with `key`), and its signature file when signed: for
/// a dataset made in an object store by one write (a linked merge).
pub fn write_sealed(
    root: &dyn Storage,
    manifest: &Manifest,
    key: Option<&crate::integrity::SigningKey>,
) -> Result<Manifest, StoreError> {
    let mut m = manifest.clone();
    let mut chain =
        (m.integrity.take()).unwrap_or_else(|| crate::integrity::Integrity::new(Vec::new()));
    chain.seal(&m, key);
    m.integrity = Some(chain);
    let mut json = serde_json::to_vec_pretty(&m).map_err(|e| StoreError::Invalid {
        path: root.name_of(MANIFEST).into(),
        message: e.to_string(),
    })?;
    json.push(b'\n');
    root.write(MANIFEST, &json)
        .map_err(|e| io_error(root, MANIFEST, e))?;
    if let Some(sig) = m.integrity.as_ref().and_then(|i| i.signature.as_ref()) {
        let name = crate::integrity::SIGNATURE_FILE;
        root.write(name, sig.sshsig.as_bytes())
            .map_err(|e| io_error(root, name, e))?;
    }
    Ok(m)
}

/// Copies the dataset at `root` (in an object store) into the new
/// directory `to`, for the commands that rewrite a dataset's files rather
/// than read them in place (a copying `weir merge`, `weir anonymize`):
/// the files its chain holds that `want` picks, each checked against the
/// chain's BLAKE3 as it is written, then its manifest and signature file
/// as they are. A linked merge is refused: its files are its inputs'.
pub fn download(
    root: &dyn Storage,
    to: &std::path::Path,
    want: &dyn Fn(&str) -> bool,
) -> Result<Manifest, StoreError> {
    use std::io::Write;
    let m = read_manifest(root)?;
    if m.merge.as_ref().is_some_and(|g| g.linked) {
        return Err(StoreError::Invalid {
            path: root.name().into(),
            message: "names its inputs' files (a merge in the object store): give its inputs \
                      instead"
                .into(),
        });
    }
    let Some(chain) = &m.integrity else {
        return Err(StoreError::Invalid {
            path: root.name_of(MANIFEST).into(),
            message: "has no integrity chain to say which files are the dataset's".into(),
        });
    };
    const CHUNK: u64 = 8 << 20;
    for (rel, e) in chain.live() {
        if !want(rel) {
            continue;
        }
        let bad = |message: String| StoreError::Invalid {
            path: root.name_of(rel).into(),
            message,
        };
        let (Some(bytes), Some(blake3)) = (e.bytes, e.blake3.as_deref()) else {
            continue;
        };
        if util::storage::normalize(rel).is_none_or(|n| n != rel) {
            return Err(bad(
                "leaves the dataset's prefix; give the dataset it names".into(),
            ));
        }
        let path = to.join(rel);
        if let Some(dir) = path.parent() {
            crate::files::create_dirs(dir)?;
        }
        let src = root.open(rel).map_err(|e| io_error(root, rel, e))?;
        let size = src.size().map_err(|e| io_error(root, rel, e))?;
        if size != bytes {
            return Err(bad(format!(
                "is {size} bytes, not the {bytes} (BLAKE3 {blake3}) its manifest's chain sealed: \
                 the object was altered (`weir verify {}` says which)",
                root.name()
            )));
        }
        let mut out = std::fs::File::create(&path).map_err(|e| StoreError::io(&path, e))?;
        let mut digest = util::digest::Hasher::new();
        let mut buf = vec![0u8; CHUNK.min(bytes) as usize];
        let mut at = 0;
        while at < bytes {
            let n = (bytes - at).min(CHUNK) as usize;
            src.read_exact_at(&mut buf[..n], at)
                .map_err(|e| io_error(root, rel, e))?;
            digest.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| StoreError::io(&path, e))?;
            at += n as u64;
        }
        let got = digest.finish().hex();
        if got != blake3 {
            return Err(bad(format!(
                "its BLAKE3 is {got}, not the {blake3} its manifest's chain sealed: the object \
                 was altered (`weir verify {}` says which)",
                root.name()
            )));
        }
    }
    for name in [MANIFEST, crate::integrity::SIGNATURE_FILE] {
        match root.read(name) {
            Ok(data) => std::fs::write(to.join(name), &data)
                .map_err(|e| StoreError::io(to.join(name), e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(root, name, e)),
        }
    }
    Ok(m)
}
