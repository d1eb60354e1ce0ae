//! `weir merge --link`: a merged dataset that names its inputs' files
//! instead of copying them.

use std::time::Instant;

use store::StoreError;
use store::manifest::{Manifest, MergeInfo, MergeInput, RunInfo, TimeSpan};

use super::MergeReport;

/// Merges datasets that lie in one object store (or one file system)
/// without copying a byte: `out` gets a manifest that names each input by
/// its path relative to `out` (`merge.linked`) and whose chain holds every
/// file of every input, with the size and digest the input's own chain
/// gave it, under that path (`../site/a/packets/...`), and each input's
/// manifest. Readers read the inputs; `weir verify` of `out` reads their
/// files. Every frame of every input is kept (no duplicate is looked for:
/// that would need a copy to leave it out of).
pub fn link(
    inputs: &[util::storage::Root],
    out: &util::storage::Root,
    command: &str,
    key: Option<&store::integrity::SigningKey>,
) -> Result<MergeReport, StoreError> {
    let started = Instant::now();
    let invalid = |root: &dyn util::storage::Storage, message: String| StoreError::Invalid {
        path: root.name().into(),
        message,
    };
    if inputs.len() < 2 {
        return Err(invalid(
            &**out,
            "give at least two datasets to merge".into(),
        ));
    }
    let mut chain_inputs = Vec::new();
    let mut merge_inputs = Vec::new();
    let mut entries: Vec<(String, u64, String)> = Vec::new();
    let mut manifest = Manifest::new(
        "merge",
        "each input's own, as captured (merge.inputs: their clocks)",
        store::RowOrder::Flow,
    );
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut seen = Vec::new();
    for root in inputs {
        let rel = util::storage::relative(&out.name(), &root.name()).ok_or_else(|| {
            invalid(
                &**root,
                format!(
                    "is not in the same store as {}: a merge without copying names its inputs \
                     by their place beside it; merge into a directory to copy them",
                    out.name()
                ),
            )
        })?;
        if rel.is_empty() || rel.split('/').all(|p| p != "..") {
            return Err(invalid(
                &**root,
                format!(
                    "is {} or inside it; write the merge beside its inputs",
                    out.name()
                ),
            ));
        }
        if seen.contains(&rel) {
            return Err(invalid(
                &**root,
                "is given twice; give each dataset once".into(),
            ));
        }
        seen.push(rel.clone());
        let raw = root
            .read(store::dataset::MANIFEST)
            .map_err(|e| store::location::io_error(&**root, store::dataset::MANIFEST, e))?;
        let m = Manifest::from_json(&root.name_of(store::dataset::MANIFEST), &raw)?;
        if m.merge.as_ref().is_some_and(|g| g.linked) {
            return Err(invalid(
                &**root,
                "is itself a merge without copies: give its inputs instead".into(),
            ));
        }
        let Some(chain) = &m.integrity else {
            return Err(invalid(
                &**root,
                "has no integrity record (an older weir's): its files cannot be named by digest"
                    .into(),
            ));
        };
        for (path, e) in chain.live() {
            if let (Some(n), Some(d)) = (e.bytes, &e.blake3) {
                entries.push((format!("{rel}/{path}"), n, d.clone()));
            }
        }
        let mut digest = util::digest::Hasher::new();
        digest.update(&raw);
        let d = digest.finish();
        entries.push((
            format!("{rel}/{}", store::dataset::MANIFEST),
            d.bytes,
            d.hex(),
        ));
        chain_inputs.push(store::integrity::Integrity::input_from("merge", &rel, &m));
        if let Some(t) = &m.time_span {
            first = first.min(t.first_ns);
            last = last.max(t.last_ns);
        }
        let c = &mut manifest.counts;
        c.frames += m.counts.frames;
        c.wire_bytes += m.counts.wire_bytes;
        c.captured_bytes += m.counts.captured_bytes;
        for (k, v) in &m.counts.parse_errors {
            *c.parse_errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &m.counts.protocols {
            *c.protocols.entry(k.clone()).or_default() += v;
        }
        merge_inputs.push(MergeInput {
            path: rel,
            kind: m.kind.clone(),
            clock: m.clock.clone(),
            shard: m.capture.as_ref().and_then(|c| c.shard.clone()),
            frames: m.counts.frames,
            iface_base: manifest.interfaces.len() as u16,
            ..Default::default()
        });
        manifest.interfaces.extend(m.interfaces.iter().cloned());
        manifest.sources.extend(m.sources.iter().cloned());
    }
    let mut chain = store::integrity::Integrity::new(chain_inputs);
    for (path, bytes, blake3) in &entries {
        chain.add_file(path, *bytes, blake3);
    }
    let elapsed = started.elapsed();
    manifest.time_span = (first <= last).then(|| TimeSpan::new(first, last));
    manifest.merge = Some(MergeInfo {
        linked: true,
        dedup_window_ns: None,
        duplicates_removed: 0,
        inputs: merge_inputs,
    });
    manifest.run = Some(RunInfo {
        command: command.to_string(),
        workers: 1,
        elapsed_s: elapsed.as_secs_f64(),
        frames_per_s: 0.0,
    });
    manifest.integrity = Some(chain);
    let manifest = store::location::write_sealed(&**out, &manifest, key)?;
    Ok(MergeReport {
        manifest,
        elapsed,
        warnings: Vec::new(),
    })
}
