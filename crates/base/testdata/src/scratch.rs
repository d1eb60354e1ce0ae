use std::path::PathBuf;

/// A fresh scratch directory for one test (`weir-test-NAME-PID` in the
/// system's temporary directory, emptied of an earlier run's leftovers),
/// removed when dropped, also when the test fails.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("weir-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)
            .unwrap_or_else(|e| panic!("making the scratch directory {}: {e}", p.display()));
        Scratch(p)
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
