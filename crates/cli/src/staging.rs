//! Datasets in an object store copied beside a command's output, for the
//! commands that rewrite a dataset's files rather than read them in place
//! (a copying `weir merge`, `weir anonymize`); removed when the command
//! is done.

use std::path::{Path, PathBuf};

/// A directory of downloaded inputs beside `output`, removed when dropped.
pub struct Staging {
    dir: PathBuf,
    count: usize,
}

impl Staging {
    /// `.OUT.inputs` beside `output` (on its file system, whose space the
    /// command needs anyway).
    pub fn beside(output: &Path) -> Staging {
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let dir = output.with_file_name(format!(".{name}.inputs"));
        Staging { dir, count: 0 }
    }

    /// The dataset `word` names, as a local directory: itself, or its copy
    /// here when it is `s3://...` (the files `want` picks, each checked
    /// against its digest).
    pub fn local(&mut self, word: &str, want: &dyn Fn(&str) -> bool) -> Result<PathBuf, String> {
        if !objects::is_url(word) {
            return Ok(PathBuf::from(word));
        }
        let root = objects::open(word).map_err(|e| format!("{word}: {e}"))?;
        let to = self.dir.join(self.count.to_string());
        self.count += 1;
        if to.exists() {
            std::fs::remove_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        }
        std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        store::location::download(&*root, &to, want).map_err(|e| e.to_string())?;
        Ok(to)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.count > 0 {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
