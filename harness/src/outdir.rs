//! What a new output folder is called and what a session draws before it
//! starts: the UTC stamp of default folder names, the count of results a
//! folder already holds (a log is never overwritten), the default system
//! name, and a base seed from the OS. Shared by referee's own sessions
//! ([`crate::session`]) and supervised ones ([`crate::exec`]).

use crate::system::HostFacts;
use std::path::Path;

/// `YYYYMMDD-HHMMSS` in UTC: names of default output directories.
pub fn utc_stamp() -> String {
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}

/// How many result files `dir` holds already (a log is never overwritten).
pub fn result_count(dir: &Path) -> usize {
    if !dir.is_dir() {
        return 0;
    }
    referee_rules::layout::result_files(dir)
        .map(|f| f.len())
        .unwrap_or(0)
}

/// `HOSTNAME_Ncpu`: the system name when none is given.
pub fn default_system_name() -> String {
    let host = HostFacts::probe();
    sanitize(&format!("{}_{}cpu", host.hostname, host.logical_cpus))
}

/// A base seed from the OS (when none is given).
pub fn os_seed() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    u64::from_le_bytes(b) ^ t
}

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() { "local".into() } else { t }
}
