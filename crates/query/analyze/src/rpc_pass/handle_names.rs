//! Scan 3 of the rpc pass: the names the busiest file handles were seen
//! under (reading the name column for those rows alone), and the handles
//! table.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray, UInt64Array};
use foldhash::{HashMap, HashMapExt, HashSet};

use crate::columns::{DataFile, par_map};
use crate::error::AnalyzeError;
use crate::window::TimeWindow;

use super::nfs_io::{HandleIo, op_kind};
use super::tables::HandleRow;
use super::{DictMap, NfsFile, in_window, load, open, times, with_ts};

/// Rows of a file that name a handle in `top`: (row, handle), rows rising;
/// and the rows read.
pub(super) fn naming_rows(
    path: &DataFile,
    getfh: bool,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<(Vec<(usize, u64)>, usize), AnalyzeError> {
    if !getfh {
        return own_handle_rows(path, window, top);
    }
    let cols = with_ts(
        &["rpc_id", "version", "op_index", "op_name", "res_fh"],
        window,
    );
    let mut out = Vec::new();
    let mut row = 0usize;
    // The previous row, if it was an NFSv4 LOOKUP/OPEN/CREATE: (row,
    // rpc_id, op_index); a GETFH right after it gives its handle.
    let mut prev: Option<(usize, u64, u64)> = None;
    let mut kinds = DictMap::default();
    let mut kind = Vec::new();
    let mut s = open(path, &cols, window)?;
    while let Some(n) = s.advance()? {
        load(&mut s, &cols, path)?;
        let (id, version, op_index, res_fh) = (s.column(0), s.column(1), s.column(2), s.column(4));
        let ts = times(&s, &cols);
        kinds.rows(&s.column(3), 0, op_kind, &mut kind);
        let (ids, versions, indexes, fhs) =
            (id.ints(), version.ints(), op_index.ints(), res_fh.ints());
        for i in 0..n {
            let r = row + i;
            let before = prev.take();
            if ts.is_some_and(|t| !in_window(window, t[i])) {
                continue;
            }
            let fh = res_fh.is_valid(i).then(|| fhs[i]);
            let (id, index) = (ids[i], indexes[i]);
            if let Some(fh) = fh.filter(|f| top.contains(f)) {
                if kind[i] == 4
                    && let Some((pr, pid, pindex)) = before
                    && pid == id
                    && pindex.checked_add(1) == Some(index)
                {
                    out.push((pr, fh));
                }
                out.push((r, fh));
            }
            if kind[i] == 3 && version.is_valid(i) && versions[i] == 4 {
                prev = Some((r, id, index));
            }
        }
        row += n;
    }
    out.sort_unstable();
    out.dedup();
    Ok((out, row))
}

/// [`naming_rows`] of a file without GETFH: a row names only its own
/// result handle, and res_fh is all there is to read.
pub(super) fn own_handle_rows(
    path: &DataFile,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<(Vec<(usize, u64)>, usize), AnalyzeError> {
    let cols = with_ts(&["res_fh"], window);
    let mut out = Vec::new();
    let mut row = 0usize;
    let mut s = open(path, &cols, window)?;
    // Most rows name a handle (LOOKUP results): whether it is a top one is
    // asked once per dictionary entry, not once per row.
    s.keep_codes(0);
    let mut in_top = DictMap::default();
    while let Some(n) = s.advance()? {
        load(&mut s, &cols, path)?;
        let ts = times(&s, &cols);
        let res_fh = s.column(0);
        let keep = |i: usize| res_fh.is_valid(i) && ts.is_none_or(|t| in_window(window, t[i]));
        match res_fh.codes() {
            Some(codes) => {
                let d = res_fh.dictionary();
                let top_code = in_top.of(d, |k| d.int(k).is_some_and(|v| top.contains(&v)));
                for (i, &k) in codes.iter().enumerate() {
                    if top_code.get(k as usize) == Some(&true)
                        && keep(i)
                        && let Some(v) = d.int(k as usize)
                    {
                        out.push((row + i, v));
                    }
                }
            }
            None => {
                for (i, &v) in res_fh.ints().iter().enumerate() {
                    if keep(i) && top.contains(&v) {
                        out.push((row + i, v));
                    }
                }
            }
        }
        row += n;
    }
    Ok((out, row))
}

pub(super) fn names_of(
    path: &DataFile,
    getfh: bool,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<Vec<(u64, String)>, AnalyzeError> {
    let (rows, _) = naming_rows(path, getfh, window, top)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut row = 0usize;
    let mut s = open(path, &["name"], window)?;
    // Only the batches that hold a naming row are decoded.
    while at < rows.len()
        && let Some(n) = s.advance()?
    {
        if rows[at].0 >= row + n {
            row += n;
            continue;
        }
        load(&mut s, &["name"], path)?;
        let name = s.column(0);
        while at < rows.len() && rows[at].0 < row + n {
            let (r, fh) = rows[at];
            if let Some(t) = name.text(r - row) {
                out.push((fh, String::from_utf8_lossy(t).into_owned()));
            }
            at += 1;
        }
        row += n;
    }
    Ok(out)
}

/// The handles table: the busiest by bytes (a NULL total first, as SQL's
/// DESC puts it), then their names (scan 3).
pub(super) fn handles_table(
    handles: HashMap<u64, HandleIo>,
    nfs_files: &[NfsFile],
    top_handles: usize,
    threads: usize,
    window: TimeWindow,
) -> Result<Vec<ArrayRef>, AnalyzeError> {
    let total = |h: &HandleIo| (h.read_seen && h.written_seen).then_some(h.read + h.written);
    let order = |a: &HandleRow, b: &HandleRow| {
        match (total(&a.io), total(&b.io)) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp(&x),
        }
        .then(a.fh.cmp(&b.fh))
    };
    let mut hs: Vec<HandleRow> = handles
        .into_iter()
        .map(|(fh, io)| HandleRow { fh, io })
        .collect();
    if top_handles < hs.len() {
        if top_handles > 0 {
            hs.select_nth_unstable_by(top_handles - 1, order);
        }
        hs.truncate(top_handles);
    }
    hs.sort_unstable_by(order);
    let top: HashSet<u64> = hs.iter().map(|h| h.fh).collect();
    let mut names: HashMap<u64, String> = HashMap::new();
    if !top.is_empty() {
        let names_in = |f: &NfsFile| names_of(f.path, f.getfh, window, &top);
        for found in par_map(threads, nfs_files, names_in)? {
            for (fh, name) in found {
                match names.get_mut(&fh) {
                    Some(n) if *n >= name => {}
                    Some(n) => *n = name,
                    None => {
                        names.insert(fh, name);
                    }
                }
            }
        }
    }
    Ok(vec![
        Arc::new(UInt64Array::from_iter_values(hs.iter().map(|h| h.fh))),
        Arc::new(StringArray::from_iter(
            hs.iter().map(|h| names.get(&h.fh).map(String::as_str)),
        )),
        Arc::new(Int64Array::from_iter(
            hs.iter().map(|h| h.io.read_seen.then_some(h.io.read)),
        )),
        Arc::new(Int64Array::from_iter(
            hs.iter().map(|h| h.io.written_seen.then_some(h.io.written)),
        )),
        Arc::new(Int64Array::from_iter_values(hs.iter().map(|h| h.io.ops))),
    ])
}
