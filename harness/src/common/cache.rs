//! Cache clearing before a run: MLPerf requires caches to be flushed (or the
//! machine restarted) before benchmarking. Dropping the page cache needs
//! root; where it is not permitted referee says so — in the log metadata and
//! on stderr — instead of pretending.

use referee_rules::value::Value;

/// What happened to the page cache.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheClear {
    /// `sync` then `echo 3 > /proc/sys/vm/drop_caches` succeeded.
    Dropped,
    /// Not possible here; the reason.
    NotPermitted(String),
    /// Skipped on request (`--set harness.cache_clear=false`).
    Skipped,
}

impl CacheClear {
    /// Metadata for the `cache_clear` event.
    pub fn metadata(&self) -> Vec<(&'static str, Value)> {
        match self {
            CacheClear::Dropped => vec![(
                "method",
                Value::str("sync; echo 3 > /proc/sys/vm/drop_caches"),
            )],
            CacheClear::NotPermitted(why) => vec![
                ("method", Value::str("none")),
                ("reason", Value::str(why.clone())),
            ],
            CacheClear::Skipped => vec![
                ("method", Value::str("none")),
                ("reason", Value::str("skipped on request")),
            ],
        }
    }
    /// The logged value: whether the cache was actually dropped.
    pub fn dropped(&self) -> bool {
        matches!(self, CacheClear::Dropped)
    }
}

/// Flush dirty pages and drop the page cache, dentries and inodes.
pub fn drop_page_cache() -> CacheClear {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    match std::fs::write("/proc/sys/vm/drop_caches", b"3\n") {
        Ok(()) => CacheClear::Dropped,
        Err(e) => CacheClear::NotPermitted(format!(
            "cannot write /proc/sys/vm/drop_caches: {e} (needs root)"
        )),
    }
}
