//! What a server of datasets (`weir serve`) asks of them besides
//! queries: which datasets lie under the roots it was given (with their
//! manifests), the link types a filter must compile for, and `weir
//! verify` of each. The server asks these here, never the store.

use util::storage::Root;
use wire::LinkType;

use crate::AnalyzeError;

pub use store::integrity::Verification;
pub use store::location::Located;

/// Every dataset served: each root given, or each dataset below a prefix
/// given. The store's error names the directory or the URL.
pub fn datasets(roots: &[Root]) -> Result<Vec<Located>, AnalyzeError> {
    let mut out = Vec::new();
    for root in roots {
        out.extend(store::location::datasets_under(root)?);
    }
    Ok(out)
}

/// The link types of the datasets' interfaces, each once, in order of
/// first appearance; Ethernet if they name none.
pub fn link_types(datasets: &[Located]) -> Vec<LinkType> {
    let mut links = Vec::new();
    for d in datasets {
        for i in &d.manifest.interfaces {
            if !links.contains(&i.link_type) {
                links.push(i.link_type);
            }
        }
    }
    if links.is_empty() {
        links.push(LinkType::ETHERNET.0);
    }
    links.into_iter().map(LinkType).collect()
}

/// `weir verify` of one dataset, without a key or a seal.
pub fn verify(dataset: &Located, threads: usize) -> Result<Verification, AnalyzeError> {
    Ok(store::integrity::verify(
        &dataset.root,
        None,
        None,
        threads,
    )?)
}
