//! The inputs' other tables and files (interfaces, sources, pcap files,
//! stats, stack and app tables) carried into the merged dataset.

use store::manifest::{PcapFileEntry, RemovedPcapEntry};
use store::rewrite::{Rewrite, rewrite_file};
use store::{Dataset, StoreError};

use super::{Input, MergedTables, Numbering, link_or_copy, renamed};

impl MergedTables {
    /// Input `i`'s interfaces, sources, pcap files, stats and stack files.
    pub(super) fn add(
        &mut self,
        s: &Input,
        i: usize,
        numbering: &Numbering,
        out: &Dataset,
    ) -> Result<(), StoreError> {
        let m = &s.manifest;
        let prefix = format!("i{i:02}-");
        for iface in &m.interfaces {
            let mut iface = iface.clone();
            iface.source += self.sources.len() as u32;
            self.interfaces.push(iface);
        }
        self.sources.extend(m.sources.iter().cloned());
        let pcap_base = numbering.pcap_base[i];
        for p in &m.files.pcap {
            let rel = renamed(&p.path, &prefix);
            link_or_copy(&s.root.join(&p.path), &out.root().join(&rel))?;
            self.files.pcap.push(PcapFileEntry {
                id: (p.id as u64 + pcap_base) as u32,
                path: rel,
                ..p.clone()
            });
        }
        for p in &m.files.pcap_removed {
            self.files.pcap_removed.push(RemovedPcapEntry {
                id: (p.id as u64 + pcap_base) as u32,
                // The file that took its space has a new name here.
                overwritten_by: None,
                ..p.clone()
            });
        }
        let base = numbering.iface_base[i] as u16;
        let shift = move |v: u16| v + base;
        for rel in &m.files.stats {
            let to = renamed(rel, &prefix);
            std::fs::create_dir_all(out.root().join(store::dataset::STATS_DIR))
                .map_err(|e| StoreError::io(out.root(), e))?;
            rewrite_file(
                &s.root.join(rel),
                &out.root().join(&to),
                "stats",
                &|_, column| (column == "iface").then_some(Rewrite::U16(&shift)),
            )?;
            self.files.stats.push(to);
        }
        if let Some(st) = &m.stack {
            self.add_stack(s, st, &prefix, out)?;
        }
        if let Some(a) = &m.app {
            // Each row is whole in itself: the files are carried over
            // (a query two boxes both saw is in both, as in the inputs).
            let mut moved = a.clone();
            for list in [
                &mut moved.dns_files,
                &mut moved.tls_files,
                &mut moved.http_files,
            ] {
                for rel in list.iter_mut() {
                    let to = renamed(rel, &prefix);
                    link_or_copy(&s.root.join(&*rel), &out.root().join(&to))?;
                    *rel = to;
                }
            }
            self.app.get_or_insert_with(Default::default).merge(moved);
        }
        if m.rpc.is_some() {
            self.warnings.push(format!(
                "{}: its rpc and nfs tables are not merged (the same call seen by two boxes \
                 cannot be told apart there yet); run `weir analyze {} rpc` on it alone",
                s.root.display(),
                s.root.display()
            ));
        }
        Ok(())
    }

    /// An input's stack event files, its counters added to the others'.
    pub(super) fn add_stack(
        &mut self,
        s: &Input,
        st: &store::manifest::StackInfo,
        prefix: &str,
        out: &Dataset,
    ) -> Result<(), StoreError> {
        let mut moved = Vec::new();
        for rel in &st.files {
            let to = renamed(rel, prefix);
            link_or_copy(&s.root.join(rel), &out.root().join(&to))?;
            moved.push(to);
        }
        let mut intervals = Vec::new();
        for rel in &st.interval_files {
            let to = renamed(rel, prefix);
            link_or_copy(&s.root.join(rel), &out.root().join(&to))?;
            intervals.push(to);
        }
        match self.stack.as_mut() {
            None => {
                self.stack = Some(store::manifest::StackInfo {
                    files: moved,
                    interval_files: intervals,
                    ..st.clone()
                });
            }
            Some(all) => {
                all.files.extend(moved);
                all.interval_files.extend(intervals);
                for (k, v) in &st.events {
                    *all.events.entry(k.clone()).or_default() += v;
                }
                for (k, v) in &st.lost {
                    *all.lost.entry(k.clone()).or_default() += v;
                }
                self.warnings.push(format!(
                    "{}: its stack events are kept, but the manifest's stack settings are \
                     those of the first input that had any",
                    s.root.display()
                ));
            }
        }
        Ok(())
    }
}
