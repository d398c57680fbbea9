//! Supervising one run of an external training program (`referee run
//! --exec`): the program runs in its own process group with stdin closed;
//! its stdout and stderr are captured unmodified (the program writes them
//! to files in the run directory itself, as under a batch system, and the
//! harness follows the files as they grow); MLLOG lines are read live from
//! both streams and from the MLLOG file the program appends to
//! (`COMPLIANCE_FILE`), each line counted once; the run ends when every
//! process of the program's group has; the harness witnesses the
//! clock ([`crate::witness`]), runs the ruleset's rules when `init_stop`
//! arrives (a closed-division violation stops the run at once), enforces
//! the init and run budgets (SIGTERM to the group, SIGKILL after a grace
//! period), and finalises the result file atomically: the program's whole
//! output with every MLLOG line, `result_i.txt.partial` renamed at the end.
//! The result file is parsed for the closing check as it is written: each
//! line is parsed once, when the harness writes it, by the per-line half of
//! the reader that `referee check` uses ([`mllog::LineParser`]), so the
//! check's input is the file's bytes by construction, the witness reads
//! keys and times from the same records, and a program that floods its log
//! does not wait for a second pass at the end.

use crate::witness::{WITNESSED_KEYS, Witness, WitnessedLine};
use referee_rules::diag::Diagnostic;
use referee_rules::mllog::{self, KeepFn, LineParser, ParsedLog};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One run of the program, as the session prepared it.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Variables added to the harness's environment.
    pub env: Vec<(String, String)>,
    /// The program's working directory.
    pub cwd: PathBuf,
    /// A fresh directory for this run: raw captures and the MLLOG file.
    pub run_dir: PathBuf,
    /// The MLLOG file the program appends to (`COMPLIANCE_FILE`).
    pub compliance_file: PathBuf,
    /// The result file (written through `PATH.partial`).
    pub result: PathBuf,
    /// MLLOG lines of the harness's own that open the result file.
    pub opening_lines: Vec<String>,
    /// `init_stop` must arrive within this time of the spawn.
    pub init_budget: Duration,
    /// The whole run must end within this time of the spawn.
    pub run_budget: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    pub tolerance_ms: u64,
}

/// The ruleset's rules, run on the MLLOG lines read so far.
pub trait LiveRules: Sync {
    /// Errors that are final once `init_stop` has been logged (fixed
    /// hyperparameters, required keys of the initialisation). `so_far`:
    /// the result file up to and including `init_stop`, as parsed while it
    /// was written (records slim as [`LiveRules::kept_keys`] says).
    fn at_init_stop(&self, so_far: ParsedLog) -> Vec<Diagnostic>;

    /// The keys whose values the closing check reads (`None`: all): the
    /// result file is parsed with this filter as it is written.
    fn kept_keys(&self) -> Option<Arc<KeepFn>> {
        None
    }
}

/// How a supervised run ended.
#[derive(Debug)]
pub struct Supervised {
    /// `success` (the program logged run_stop with status success),
    /// otherwise `aborted`.
    pub status: String,
    /// Why it is aborted (the program's own status, or what the harness did).
    pub reason: Option<String>,
    /// The program's exit code, or the signal that ended it.
    pub exit: String,
    pub witness: Witness,
    /// Live findings: the init-time rule violations, the witness's.
    pub diagnostics: Vec<Diagnostic>,
    /// Claimed run_stop − run_start.
    pub time_to_train_ms: Option<f64>,
    /// Files written for this run → sha256.
    pub files: BTreeMap<String, String>,
    /// Milliseconds from reading the line that made the harness stop the
    /// program to sending SIGTERM (the live-check delay).
    pub stop_delay_ms: Option<f64>,
    /// Seconds from the spawn to the result file renamed into place.
    pub supervised_seconds: f64,
    /// The result file as the rules' reader reads it (parsed while it was
    /// written, with [`LiveRules::kept_keys`]).
    pub parsed: ParsedLog,
}

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    Stdout = 0,
    Stderr = 1,
    File = 2,
}

enum Msg {
    /// Complete lines (terminators kept), read together at one moment.
    Lines(Source, Vec<u8>, Instant),
    /// The program (the process the harness started) has exited.
    Exited(std::io::Result<std::process::ExitStatus>),
    /// Every followed file is read to its end.
    Closed,
}

/// Chunks in flight between the follower and the supervisor: when the
/// supervisor falls behind, the follower waits (the files hold the rest;
/// memory stays bounded, and the program never waits).
const CHANNEL_CHUNKS: usize = 64;

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Split off the complete lines of `pending` (up to its last newline).
fn complete_lines(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    let last = memchr::memrchr(b'\n', pending)?;
    let rest = pending.split_off(last + 1);
    Some(std::mem::replace(pending, rest))
}

/// A file written and hashed on a thread of its own: the supervisor hands
/// it bytes in batches and gets the sha256 of everything at the end.
/// Written ranges are handed to the disk as they accumulate, so the final
/// `fsync` of a large file has little left to do.
struct Tee {
    batch: Vec<u8>,
    tx: Option<mpsc::SyncSender<Vec<u8>>>,
    done: Option<std::thread::JoinHandle<std::io::Result<String>>>,
    /// The file, for reading back what was written (records' text).
    file: Arc<File>,
    /// Bytes handed over so far.
    len: u64,
    /// The writer's answer to an empty batch: everything before it is in
    /// the file.
    synced: mpsc::Receiver<()>,
}

const TEE_BATCH: usize = 256 * 1024;

/// Bytes between two hand-overs of written data to the disk.
const WRITEBACK_WINDOW: u64 = 8 << 20;

/// Give the calling thread a lower scheduling priority than the program's
/// (Linux: a thread's own nice value). The harness's bulk work — writing,
/// hashing and parsing the result — then runs on what the program leaves
/// idle instead of taking turns with it on a busy machine; when it falls
/// behind it reads the program's output later (the files keep it), and the
/// program never waits for it. Lines are witnessed when read, and budgets
/// are enforced, at the same priority: a program that keeps every core
/// busy delays them by at most the scheduler's share for a nice-10 thread
/// (the witness's tolerance is for such delays; a late read never makes a
/// line look written early).
pub(crate) fn yield_to_the_program() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; failure leaves the
    // priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

/// Bytes written to a file, handed to the disk a window at a time (so
/// that an `fsync` — of this file, or of another on the same file system,
/// which may have to flush this one's data first — has little left to do).
#[derive(Default)]
struct WriteBack {
    written: u64,
    /// Handed to the disk up to here (writing started).
    handed: u64,
}

impl WriteBack {
    /// `n` more bytes written to `file`: the end of a window handed to the
    /// disk, if one was.
    fn wrote(&mut self, file: &File, n: usize) -> Option<u64> {
        self.written += n as u64;
        if self.written - self.handed < WRITEBACK_WINDOW {
            return None;
        }
        write_back(file, self.handed, self.written, false);
        self.handed = self.written;
        Some(self.handed)
    }
}

/// Start writing back `[from, to)` of `file`, and with `wait` wait until
/// it is written (Linux; elsewhere the final `fsync` does it all). Data
/// only: the file's metadata is made durable by the final `fsync`, in one
/// journal commit rather than one per window.
fn write_back(file: &File, from: u64, to: u64, wait: bool) {
    #[cfg(target_os = "linux")]
    if to > from {
        use std::os::fd::AsRawFd;
        let flags = if wait {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER
        } else {
            libc::SYNC_FILE_RANGE_WRITE
        };
        // SAFETY: sync_file_range on a descriptor this process owns, over
        // a range already written; failure only leaves the work to fsync.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                from as libc::off64_t,
                (to - from) as libc::off64_t,
                flags,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, to, wait);
}

/// Makes a growing file's data durable as it grows: a thread of its own
/// waits until each window handed to the disk is written, so the final
/// `fsync` — on the way to the result's rename — has only the last window
/// and the file's metadata left (one journal commit; an `fdatasync` per
/// window would commit the journal each time). No other thread ever waits
/// for it: a slow disk delays the end of the supervision, never the
/// program.
struct Settler {
    tx: Option<mpsc::SyncSender<u64>>,
    done: Option<std::thread::JoinHandle<()>>,
}

impl Settler {
    fn start(file: &File) -> Settler {
        let Ok(f) = file.try_clone() else {
            // Without a second handle the final fsync does it all.
            return Settler {
                tx: None,
                done: None,
            };
        };
        // A few windows pending at most: the ends only grow, so a window
        // not sent is covered by the next one that is.
        let (tx, rx) = mpsc::sync_channel::<u64>(4);
        let done = std::thread::spawn(move || {
            yield_to_the_program();
            let mut durable = 0;
            for end in rx {
                write_back(&f, durable, end, true);
                durable = end;
            }
        });
        Settler {
            tx: Some(tx),
            done: Some(done),
        }
    }

    /// The file is handed to the disk up to `end`.
    fn handed(&self, end: u64) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(end);
        }
    }

    fn stop(mut self) {
        self.tx = None;
        if let Some(h) = self.done.take() {
            let _ = h.join();
        }
    }
}

impl Tee {
    fn create(path: &Path) -> Result<Tee, String> {
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(err)?;
        let reader = Arc::new(file.try_clone().map_err(err)?);
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(16);
        let (sync_tx, synced) = mpsc::sync_channel::<()>(1);
        let done = std::thread::spawn(move || {
            yield_to_the_program();
            let mut h = Sha256::new();
            let mut written = WriteBack::default();
            let settler = Settler::start(&file);
            for b in rx {
                if b.is_empty() {
                    let _ = sync_tx.send(());
                    continue;
                }
                h.update(&b);
                file.write_all(&b)?;
                if let Some(end) = written.wrote(&file, b.len()) {
                    settler.handed(end);
                }
            }
            settler.stop();
            file.sync_all()?;
            Ok(hex::encode(h.finalize()))
        });
        Ok(Tee {
            batch: Vec::with_capacity(TEE_BATCH),
            tx: Some(tx),
            done: Some(done),
            file: reader,
            len: 0,
            synced,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.len += bytes.len() as u64;
        self.batch.extend_from_slice(bytes);
        if self.batch.len() >= TEE_BATCH {
            self.send()?;
        }
        Ok(())
    }

    /// Wait until everything handed over so far is in the file.
    fn sync(&mut self) -> std::io::Result<()> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        match &self.tx {
            Some(tx) if tx.send(Vec::new()).is_ok() && self.synced.recv().is_ok() => Ok(()),
            _ => Err(std::io::Error::other("the writer stopped")),
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        let b = std::mem::replace(&mut self.batch, Vec::with_capacity(TEE_BATCH));
        match &self.tx {
            Some(tx) if tx.send(b).is_ok() => Ok(()),
            _ => Err(self
                .join()
                .err()
                .unwrap_or_else(|| std::io::Error::other("the writer stopped"))),
        }
    }

    fn join(&mut self) -> std::io::Result<String> {
        self.tx = None;
        match self.done.take() {
            Some(h) => h
                .join()
                .map_err(|_| std::io::Error::other("the writer panicked"))?,
            None => Err(std::io::Error::other("the writer already ended")),
        }
    }

    /// Everything written, flushed and synced: its sha256.
    fn finish(mut self) -> std::io::Result<String> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        self.join()
    }
}

/// Bytes read from a followed file at a time.
const READ_BYTES: usize = 1 << 20;

/// A file the program writes — its stdout, its stderr or the MLLOG file —
/// read as it grows, and hashed as it is read.
struct Followed {
    src: Source,
    path: PathBuf,
    file: File,
    pending: Vec<u8>,
    hash: Sha256,
    /// What was read is handed to the disk a window at a time.
    handed: WriteBack,
}

impl Followed {
    fn open(src: Source, path: &Path) -> Result<Followed, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Followed {
            src,
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
            hash: Sha256::new(),
            handed: WriteBack::default(),
        })
    }

    /// Read what has been appended (up to [`READ_BYTES`]) and send its
    /// complete lines, or with `last` everything left; false when nothing
    /// was new.
    fn read_some(
        &mut self,
        buf: &mut [u8],
        tx: &mpsc::SyncSender<Msg>,
        last: bool,
    ) -> Result<bool, ()> {
        let n = loop {
            match self.file.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Read as nothing new this time (tried again on the next
                // pass; the file keeps the bytes).
                Err(_) => break 0,
            }
        };
        let at = Instant::now();
        self.hash.update(&buf[..n]);
        // The program's output is handed to the disk as it grows, so that
        // the result's fsync has little of it left to flush.
        self.handed.wrote(&self.file, n);
        self.pending.extend_from_slice(&buf[..n]);
        let lines = if last && !self.pending.is_empty() {
            Some(std::mem::take(&mut self.pending))
        } else {
            complete_lines(&mut self.pending)
        };
        if let Some(lines) = lines {
            tx.send(Msg::Lines(self.src, lines, at)).map_err(|_| ())?;
        }
        Ok(n > 0)
    }
}

/// Wakes the follower when a followed file grows (inotify) or when the
/// supervisor tells it to finish (an eventfd); without inotify (elsewhere
/// than Linux, or where the system's inotify limits are reached) it looks
/// every [`POLL_MS`] milliseconds.
struct Wakeup {
    /// Set once every process of the program has ended: the files are
    /// complete.
    done: AtomicBool,
    #[cfg(target_os = "linux")]
    inotify: Option<std::os::fd::OwnedFd>,
    #[cfg(target_os = "linux")]
    event: Option<std::os::fd::OwnedFd>,
    #[cfg(not(target_os = "linux"))]
    thread: std::sync::OnceLock<std::thread::Thread>,
}

/// How often the follower looks at the files when nothing wakes it.
const POLL_MS: u64 = 5;

impl Wakeup {
    #[cfg(target_os = "linux")]
    fn new(paths: &[&Path]) -> Wakeup {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain system calls; each descriptor is owned at once.
        let own = |fd: libc::c_int| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: as above.
        let event = own(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) });
        // SAFETY: as above.
        let inotify = own(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })
            .filter(|fd| {
                paths.iter().all(|p| {
                    std::ffi::CString::new(p.as_os_str().as_bytes()).is_ok_and(|c| {
                        // SAFETY: a valid descriptor and a NUL-terminated path.
                        unsafe {
                            libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), libc::IN_MODIFY)
                                >= 0
                        }
                    })
                })
            });
        Wakeup {
            done: AtomicBool::new(false),
            inotify,
            event,
        }
    }

    /// A wake-up that only looks every [`POLL_MS`] (and on [`Wakeup::wake`]).
    #[cfg(all(test, target_os = "linux"))]
    fn polling() -> Wakeup {
        let mut w = Wakeup::new(&[]);
        w.inotify = None;
        w
    }

    #[cfg(not(target_os = "linux"))]
    fn new(_: &[&Path]) -> Wakeup {
        Wakeup {
            done: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
        }
    }

    /// Wait until a file grows, [`Wakeup::wake`] is called, or `limit`.
    #[cfg(target_os = "linux")]
    fn wait(&self, limit: Duration) {
        use std::os::fd::AsRawFd;
        // Without either wake-up, look often.
        let limit = if self.inotify.is_some() && self.event.is_some() {
            limit
        } else {
            limit.min(Duration::from_millis(POLL_MS))
        };
        let mut fds: Vec<libc::pollfd> = [&self.inotify, &self.event]
            .into_iter()
            .flatten()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut drain = [0u8; 4096];
        // SAFETY: poll over descriptors this struct owns, then non-blocking
        // reads that empty them into a local buffer.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                limit.as_millis() as libc::c_int,
            );
            for f in &fds {
                if f.revents != 0 {
                    while libc::read(f.fd, drain.as_mut_ptr().cast(), drain.len()) > 0 {}
                }
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn wait(&self, limit: Duration) {
        let _ = self.thread.set(std::thread::current());
        std::thread::park_timeout(limit.min(Duration::from_millis(POLL_MS)));
    }

    /// The files are complete: the follower reads them to their ends and
    /// stops.
    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        self.wake();
    }

    fn finishing(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn wake(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let one = 1u64;
            if let Some(event) = &self.event {
                // SAFETY: an 8-byte write to the eventfd this struct owns.
                unsafe {
                    libc::write(event.as_raw_fd(), (&one as *const u64).cast(), 8);
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Follow the program's output files until told to finish
/// ([`Wakeup::finish`], once every process of the program has ended), then
/// read what remains and send [`Msg::Closed`]. Joins to each file's sha256.
///
/// The program writes its output straight to files, as it would under a
/// batch system: it never waits for the harness (a pipe would make it wait
/// whenever the harness has not yet read the last megabyte), and a harness
/// that falls behind a flood of lines only reads them later.
fn follow_files(
    mut files: Vec<Followed>,
    tx: mpsc::SyncSender<Msg>,
    wakeup: Arc<Wakeup>,
) -> std::thread::JoinHandle<Vec<(PathBuf, String)>> {
    std::thread::spawn(move || {
        yield_to_the_program();
        let mut buf = vec![0u8; READ_BYTES];
        let mut gone = false;
        loop {
            // Read after asking: once finishing, the files are complete and
            // one more pass to their ends reads everything.
            let finishing = wakeup.finishing();
            let mut grew = false;
            for f in &mut files {
                match f.read_some(&mut buf, &tx, false) {
                    Ok(g) => grew |= g,
                    Err(()) => gone = true,
                }
            }
            if gone {
                break;
            }
            if grew {
                continue;
            }
            if finishing {
                for f in &mut files {
                    let _ = f.read_some(&mut buf, &tx, true);
                }
                let _ = tx.send(Msg::Closed);
                break;
            }
            wakeup.wait(Duration::from_millis(100));
        }
        files
            .into_iter()
            .map(|f| (f.path, hex::encode(f.hash.finalize())))
            .collect()
    })
}

/// The MLLOG payloads seen (as their 128-bit XXH3): the same line arriving
/// twice — on stdout and in the MLLOG file, with or without a rank prefix —
/// counts once. Not a cryptographic digest: a program that made two of its
/// lines collide could only hide one of its own lines from the result file,
/// which it could as well not print (the raw captures keep every byte).
///
/// The digests are kept per *time key* (the text after the payload's first
/// `"time_ms":`; identical payloads have identical keys): lines arrive in
/// time order, so the bucket a line is looked up in is the one the lines
/// before it used, already in the cache, where a single set of a million
/// digests would cost a cache miss or two per line.
#[derive(Default)]
struct Arrivals(HashMap<u64, Bucket, BuildHasherDefault<DigestHasher>>);

/// The digests of one time key: most keys hold a line or two.
enum Bucket {
    One(u128),
    Many(HashSet<u128, BuildHasherDefault<DigestHasher>>),
}

impl Bucket {
    fn insert(&mut self, d: u128) -> bool {
        match self {
            Bucket::One(x) if *x == d => false,
            Bucket::One(x) => {
                let mut set = HashSet::with_capacity_and_hasher(4, Default::default());
                set.insert(*x);
                set.insert(d);
                *self = Bucket::Many(set);
                true
            }
            Bucket::Many(set) => set.insert(d),
        }
    }
}

/// The set's hash of a digest (or of a time key's digest): its low 64 bits
/// (already uniform).
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8).take(1) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 ^= u64::from_le_bytes(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
    fn write_u128(&mut self, v: u128) {
        self.0 ^= v as u64;
    }
}

/// The time key of a payload: a digest of the text after its first
/// `"time_ms":` (up to the next `,` or `}`); 0 without one.
fn time_key(payload: &[u8]) -> u64 {
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"time_ms\":"));
    let Some(at) = FINDER.find(payload) else {
        return 0;
    };
    let rest = &payload[at + 10..];
    let end = memchr::memchr2(b',', b'}', rest).unwrap_or(rest.len());
    // Never 0, so that a line without a time has a key of its own.
    xxhash_rust::xxh3::xxh3_64(&rest[..end]) | 1
}

impl Arrivals {
    /// Is this line's payload new?
    fn is_new(&mut self, payload: &[u8]) -> bool {
        use std::collections::hash_map::Entry;
        let d = xxhash_rust::xxh3::xxh3_128(payload);
        match self.0.entry(time_key(payload)) {
            Entry::Vacant(e) => {
                e.insert(Bucket::One(d));
                true
            }
            Entry::Occupied(mut e) => e.get_mut().insert(d),
        }
    }
}

/// The state of one supervision, from spawn to the final rename.
struct Run<'a> {
    spec: &'a ChildSpec,
    live: &'a dyn LiveRules,
    /// The program's process (and group) id.
    pid: u32,
    spawned: Instant,
    result: Tee,
    /// The result file as the rules' reader reads it, parsed as written.
    lines: LineParser,
    parsed: ParsedLog,
    /// MLLOG payloads seen, per source.
    seen: Arrivals,
    witness: Witness,
    diagnostics: Vec<Diagnostic>,
    init_stop_seen: bool,
    /// The program's run_stop status, when it logged one.
    run_stop: Option<String>,
    run_start_ms: Option<f64>,
    run_stop_ms: Option<f64>,
    /// Why the harness stopped the program, and when it sent SIGTERM.
    stopped: Option<(String, Instant)>,
    stop_delay_ms: Option<f64>,
    killed: bool,
}

/// The payload of an MLLOG line (from its last marker, trimmed).
fn payload(line: &[u8]) -> Option<&[u8]> {
    let pos = mllog::rfind_marker(line)?;
    let p = &line[pos..];
    let end = p
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |e| e + 1);
    Some(&p[..end])
}

impl Run<'_> {
    /// Write one line (terminated, as the file keeps it) to the result and
    /// parse it as a read of the file will: its records and problems join
    /// [`Run::parsed`]. `cr`: the line may hold a `\r` (which also ends a
    /// line for the reader); without one it is a single physical line.
    fn write_result(&mut self, bytes: &[u8], cr: bool) -> std::io::Result<()> {
        let Run {
            result,
            lines,
            parsed,
            ..
        } = self;
        let offset = result.len;
        result.write(bytes)?;
        let ended = bytes.ends_with(b"\n");
        if !ended {
            result.write(b"\n")?;
        }
        // Slim records keep where their text is in the result file.
        let at = Some(mllog::At {
            file: &result.file,
            offset,
        });
        let mut add = |item| parsed.push(item);
        if !cr && let Some(line) = bytes.strip_suffix(b"\n") {
            if let Some(item) = lines.line_in(line, at) {
                add(item);
            }
        } else if ended {
            lines.chunk_in(bytes, &mut add, at);
        } else {
            lines.chunk_in(&[bytes, b"\n"].concat(), &mut add, at);
        }
        Ok(())
    }

    /// One line read from the program (`cr`: as for [`Run::write_result`]).
    fn take(&mut self, src: Source, line: &[u8], at: Instant, cr: bool) -> std::io::Result<()> {
        let Some(p) = payload(line) else {
            // Framework output, kept as it is (the MLLOG file holds only MLLOG).
            if src != Source::File {
                self.write_result(line, cr)?;
            }
            return Ok(());
        };
        if !self.seen.is_new(p) {
            return Ok(());
        }
        let (records, problems) = (self.parsed.records.len(), self.parsed.problems.len());
        self.write_result(line, cr)?;
        self.witness.mllog_lines +=
            (self.parsed.records.len() - records + self.parsed.problems.len() - problems) as u64;
        for i in records..self.parsed.records.len() {
            self.on_record(i, at);
        }
        Ok(())
    }

    /// A new MLLOG record (`parsed.records[i]`): witness it, and act on the
    /// lifecycle keys.
    fn on_record(&mut self, i: usize, at: Instant) {
        let rec = &self.parsed.records[i];
        let (Some(key), time_ms) = (rec.key.as_deref(), rec.timestamp) else {
            return;
        };
        let mono = at.duration_since(self.spawned).as_millis() as u64;
        let read_wall_ms = self.witness.spawn_wall_ms + mono;
        let witnessed = WITNESSED_KEYS.contains(&key);
        if witnessed || !self.witness.plausible(time_ms, read_wall_ms) {
            let line = WitnessedLine {
                index: rec.index as usize,
                key: key.to_string(),
                time_ms,
                read_wall_ms,
                read_mono_ms: mono,
            };
            self.diagnostics.extend(self.witness.check_line(&line));
            if witnessed {
                self.witness.lines.push(line);
            }
        }
        let status = (key == "run_stop" && self.run_stop.is_none()).then(|| {
            let v = rec.full_v();
            let status = v.get("metadata").and_then(|m| m.get("status"));
            status.and_then(|s| s.as_str()).unwrap_or("").to_string()
        });
        match key {
            "init_stop" if !self.init_stop_seen => {
                self.init_stop_seen = true;
                // The text of the records so far is in the file before the
                // rules may read it.
                if let Err(e) = self.result.sync() {
                    self.diagnostics
                        .push(Diagnostic::error("io", format!("writing the result: {e}")));
                }
                let mut so_far = self.parsed.clone();
                so_far.count_lines(self.lines.lines_read());
                let errors = self.live.at_init_stop(so_far);
                if !errors.is_empty() {
                    let why = errors
                        .iter()
                        .map(|d| d.message.clone())
                        .collect::<Vec<_>>()
                        .join("; ");
                    self.diagnostics.extend(errors);
                    self.stop(format!("the rules fail at init_stop: {why}"));
                    self.stop_delay_ms = Some(at.elapsed().as_secs_f64() * 1e3);
                }
            }
            "run_start" if self.run_start_ms.is_none() => self.run_start_ms = Some(time_ms),
            "run_stop" if self.run_stop.is_none() => {
                self.run_stop_ms = Some(time_ms);
                self.run_stop = status;
            }
            _ => {}
        }
    }

    /// SIGTERM to the program's group (once), with the reason.
    fn stop(&mut self, reason: String) {
        if self.stopped.is_some() {
            return;
        }
        signal_group(self.pid, libc::SIGTERM);
        self.stopped = Some((reason, Instant::now()));
    }

    /// Budgets and the grace period.
    fn enforce(&mut self) {
        let elapsed = self.spawned.elapsed();
        if !self.init_stop_seen && elapsed > self.spec.init_budget {
            self.stop(format!(
                "no init_stop within the init budget of {}",
                minutes(self.spec.init_budget)
            ));
        }
        if elapsed > self.spec.run_budget {
            self.stop(format!(
                "the run exceeded its budget of {}",
                minutes(self.spec.run_budget)
            ));
        }
        if let Some((_, at)) = &self.stopped
            && !self.killed
            && at.elapsed() > self.spec.grace
        {
            signal_group(self.pid, libc::SIGKILL);
            self.killed = true;
        }
    }
}

/// `2 min`, `0.05 min`: a budget as the user gave it.
fn minutes(d: Duration) -> String {
    let m = d.as_secs_f64() / 60.0;
    format!("{} min", (m * 1000.0).round() / 1000.0)
}

fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals the process group the
    // child leads (it was spawned with process_group(0)).
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

/// Spawn the program in its own process group with the run's variables,
/// its stdout and stderr written to the files `out` and `err`.
fn spawn(spec: &ChildSpec, out: &Path, err: &Path) -> Result<Child, String> {
    let (prog, args) = spec
        .command
        .split_first()
        .ok_or("--exec needs a command after `--`")?;
    let create = |p: &Path| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    Command::new(prog)
        .args(args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(create(out)?)
        .stderr(create(err)?)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `{prog}`: {e}"))
}

/// Is any process of the group that `pid` leads still there?
fn group_alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only asks whether the group exists.
    let r = unsafe { libc::kill(-(pid as libc::pid_t), 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The harness's `run_stop` for a run the program did not end itself.
fn aborted_line(reason: &str) -> String {
    let meta = [
        ("status", referee_rules::value::Value::str("aborted")),
        (
            "reason",
            referee_rules::value::Value::str(reason.to_string()),
        ),
    ];
    crate::logger::MlLogger::render(
        "",
        &crate::logger::Event {
            time_ms: wall_ms(),
            event_type: crate::logger::INTERVAL_END,
            key: "run_stop",
            value: &referee_rules::value::Value::None,
            meta: &meta,
        },
        "referee",
        0,
    )
}

/// Run the program once under supervision; `on_spawn` is called once the
/// program has started (for work that should not delay its start).
pub fn supervise(
    spec: &ChildSpec,
    live: &dyn LiveRules,
    on_spawn: &mut dyn FnMut(),
) -> Result<Supervised, String> {
    std::fs::create_dir_all(&spec.run_dir)
        .map_err(|e| format!("{}: {e}", spec.run_dir.display()))?;
    File::create(&spec.compliance_file)
        .map_err(|e| format!("{}: {e}", spec.compliance_file.display()))?;
    let partial = crate::logger::partial_path(&spec.result);
    let result = Tee::create(&partial)?;
    let (out, err) = (
        spec.run_dir.join("stdout.txt"),
        spec.run_dir.join("stderr.txt"),
    );
    let spawn_wall_ms = wall_ms();
    let spawned = Instant::now();
    let mut child = spawn(spec, &out, &err).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    let pid = child.id();
    let (tx, rx) = mpsc::sync_channel(CHANNEL_CHUNKS);
    let followed = [
        (Source::Stdout, out.as_path()),
        (Source::Stderr, err.as_path()),
        (Source::File, spec.compliance_file.as_path()),
    ];
    let opened = followed
        .iter()
        .map(|&(src, p)| Followed::open(src, p))
        .collect::<Result<Vec<_>, _>>()
        .map(|files| {
            let paths: Vec<&Path> = followed.iter().map(|f| f.1).collect();
            (files, Wakeup::new(&paths))
        });
    let (files, wakeup) = match opened {
        Ok(x) => x,
        Err(e) => {
            signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let wakeup = Arc::new(wakeup);
    let follower = follow_files(files, tx.clone(), wakeup.clone());
    // The program's exit, the moment it happens.
    std::thread::spawn(move || {
        let _ = tx.send(Msg::Exited(child.wait()));
    });
    on_spawn();
    // The rule files are read once, here, while the program starts (its
    // first lines wait in the channel).
    let lines = LineParser::new(live.kept_keys());
    let mut run = Run {
        spec,
        live,
        pid,
        spawned,
        result,
        lines,
        parsed: ParsedLog::default(),
        seen: Arrivals::default(),
        witness: Witness {
            tolerance_ms: spec.tolerance_ms,
            spawn_wall_ms,
            exit_wall_ms: 0,
            exit_mono_ms: 0,
            mllog_lines: 0,
            lines: Vec::new(),
        },
        diagnostics: Vec::new(),
        init_stop_seen: false,
        run_stop: None,
        run_start_ms: None,
        run_stop_ms: None,
        stopped: None,
        stop_delay_ms: None,
        killed: false,
    };
    for l in &spec.opening_lines {
        run.take(
            Source::File,
            format!("{l}\n").as_bytes(),
            Instant::now(),
            true,
        )
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    }
    // The program inherits the priority of the thread that spawns it: the
    // supervision runs on a thread of its own that yields to the program.
    let exit = std::thread::scope(|s| {
        s.spawn(|| {
            yield_to_the_program();
            follow(&mut run, rx, &wakeup)
        })
        .join()
        .map_err(|_| "the supervisor panicked".to_string())
    })??;
    let captures = follower
        .join()
        .map_err(|_| format!("{}: the reader panicked", spec.run_dir.display()))?
        .into_iter()
        .map(|(p, h)| (p.display().to_string(), h))
        .collect();
    finish(run, exit, &partial, captures)
}

/// Read until the program and every process of its group have ended and
/// the follower (told through `follower`) has read their output to its end.
fn follow(
    run: &mut Run,
    rx: mpsc::Receiver<Msg>,
    follower: &Wakeup,
) -> Result<std::process::ExitStatus, String> {
    let label = run_label(run);
    let io = |e: std::io::Error| format!("writing the result of {label}: {e}");
    // The program's exit status, and when it was seen.
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    let mut finishing = false;
    let mut last_poll = Instant::now();
    loop {
        // Once the program has exited, look for the rest of its group
        // often (usually there is none left).
        let wait = if exited.is_some() && !finishing {
            1
        } else {
            50
        };
        match rx.recv_timeout(Duration::from_millis(wait)) {
            Ok(Msg::Lines(src, lines, at)) => {
                // Lines without a `\r` are one physical line each: asked
                // once per chunk rather than once per line.
                let cr = memchr::memchr(b'\r', &lines).is_some();
                let mut start = 0;
                for end in memchr::memchr_iter(b'\n', &lines) {
                    run.take(src, &lines[start..=end], at, cr).map_err(io)?;
                    start = end + 1;
                }
                if start < lines.len() {
                    run.take(src, &lines[start..], at, cr).map_err(io)?;
                }
            }
            Ok(Msg::Exited(status)) => {
                let status = status.map_err(|e| format!("waiting for the program: {e}"))?;
                exited = Some((status, Instant::now()));
            }
            Ok(Msg::Closed) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Budgets and the program's group, at most every 20 ms while it
        // runs.
        if exited.is_none() && last_poll.elapsed() < Duration::from_millis(20) {
            continue;
        }
        last_poll = Instant::now();
        run.enforce();
        let Some((_, at)) = exited else { continue };
        if finishing {
            continue;
        }
        // A process the program left behind may still write its output:
        // once the grace period has passed since the program exited, end
        // its group, and read what was written up to then.
        let lingering = group_alive(run.pid);
        if lingering && at.elapsed() > run.spec.grace && !run.killed {
            signal_group(run.pid, libc::SIGKILL);
            run.killed = true;
        }
        if !lingering || (run.killed && at.elapsed() > run.spec.grace * 2) {
            finishing = true;
            follower.finish();
        }
    }
    exited
        .map(|(status, _)| status)
        .ok_or_else(|| format!("{label}: the program's exit was not seen"))
}

fn run_label(run: &Run) -> String {
    run.spec.result.display().to_string()
}

/// End the result file (the harness's `run_stop` when the program did not
/// end the run), rename it into place; the sha256 of every file written
/// (`captures`: stdout, stderr and the MLLOG file, hashed as they were read);
/// the result as parsed while it was written.
fn finish(
    mut run: Run,
    exit: std::process::ExitStatus,
    partial: &Path,
    captures: Vec<(String, String)>,
) -> Result<Supervised, String> {
    use std::os::unix::process::ExitStatusExt;
    run.witness.exit_mono_ms = run.spawned.elapsed().as_millis() as u64;
    run.witness.exit_wall_ms = run.witness.spawn_wall_ms + run.witness.exit_mono_ms;
    let exit_text = match (exit.code(), exit.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    };
    let (status, reason) = match (&run.stopped, &run.run_stop) {
        (Some((why, _)), _) => ("aborted", Some(format!("stopped by referee: {why}"))),
        (None, Some(s)) if s == "success" => ("success", None),
        (None, Some(s)) => (
            "aborted",
            Some(format!("the program logged run_stop with status {s:?}")),
        ),
        (None, None) => (
            "aborted",
            Some(format!("the program ended ({exit_text}) without run_stop")),
        ),
    };
    if run.run_stop.is_none() || run.stopped.is_some() {
        let line = aborted_line(reason.as_deref().unwrap_or(""));
        run.write_result(line.as_bytes(), true)
            .map_err(|e| e.to_string())?;
    }
    let io = |e: std::io::Error| format!("{}: {e}", partial.display());
    let result_sha = run.result.finish().map_err(io)?;
    std::fs::rename(partial, &run.spec.result).map_err(io)?;
    let supervised_seconds = run.spawned.elapsed().as_secs_f64();
    let mut parsed = std::mem::take(&mut run.parsed);
    parsed.count_lines(run.lines.lines_read());
    let mut files: BTreeMap<String, String> = captures.into_iter().collect();
    files.insert(run.spec.result.display().to_string(), result_sha);
    run.diagnostics.extend(run.witness.check_duration());
    Ok(Supervised {
        status: status.into(),
        reason,
        exit: exit_text,
        time_to_train_ms: run.run_start_ms.zip(run.run_stop_ms).map(|(a, b)| b - a),
        witness: run.witness,
        diagnostics: run.diagnostics,
        files,
        stop_delay_ms: run.stop_delay_ms,
        supervised_seconds,
        parsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_counts_once_whichever_way_it_arrives() {
        let mut a = Arrivals::default();
        let l = payload(b"0: :::MLLOG {\"key\": \"x\"}\n").unwrap();
        assert!(a.is_new(l));
        assert!(!a.is_new(payload(b":::MLLOG {\"key\": \"x\"}\n").unwrap()));
        assert!(!a.is_new(payload(b"[rank0]: :::MLLOG {\"key\": \"x\"}\n").unwrap()));
        assert!(a.is_new(payload(b":::MLLOG {\"key\": \"y\"}\n").unwrap()));
    }

    #[test]
    fn time_keys_are_the_text_after_the_first_time_ms() {
        let k = |p: &[u8]| time_key(p);
        assert_eq!(
            k(br#"{"time_ms": 17, "key": "a"}"#),
            k(br#"{"time_ms": 17}"#)
        );
        assert_ne!(k(br#"{"time_ms": 17}"#), k(br#"{"time_ms": 18}"#));
        // The first occurrence decides; a line without one has key 0, and
        // no line with one does.
        assert_eq!(
            k(br#"{"time_ms":5,"value":"\"time_ms\":6"}"#),
            k(br#"{"time_ms":5}"#)
        );
        assert_eq!(k(br#"{"key": "x"}"#), 0);
        assert_ne!(k(br#"{"time_ms": }"#), 0);
        assert_ne!(k(br#"{"time_ms":"#), 0);
    }

    /// Against a plain set of the payloads: lines of a few times, in an
    /// order that mostly advances and sometimes goes back (the MLLOG file
    /// read behind stdout), with and without times, repeated at random.
    #[test]
    fn arrivals_agree_with_a_set_of_the_payloads() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut a = Arrivals::default();
        let mut seen = HashSet::new();
        let (mut new, mut again) = (0, 0);
        let mut t = 1_000u64;
        for _ in 0..20_000 {
            t += next(3);
            let time = t.saturating_sub(next(4) * next(2) * 25);
            let line = match next(10) {
                0 => format!(r#"{{"key": "k{}"}}"#, next(50)),
                _ => format!(r#"{{"time_ms": {time}, "key": "k{}"}}"#, next(6)),
            };
            let expect = seen.insert(line.clone());
            assert_eq!(a.is_new(line.as_bytes()), expect, "{line}");
            if expect { new += 1 } else { again += 1 }
        }
        // Both answers were asked for many times.
        assert!(new > 2_000 && again > 2_000, "{new} new, {again} again");
    }

    #[test]
    fn the_payload_is_read_from_the_last_marker_as_the_official_parser_does() {
        assert_eq!(
            payload(b"0: :::MLLOG {\"a\": 1}  \n"),
            Some(&b":::MLLOG {\"a\": 1}"[..])
        );
        assert_eq!(
            payload(b"[rank0]: :::MLLOG {\"a\": 1}\n"),
            payload(b":::MLLOG {\"a\": 1}\n")
        );
        assert_eq!(payload(b"loss 0.5\n"), None);
    }

    /// Live rules that keep the values of every key but `train_loss`.
    struct SlimLoss;
    impl LiveRules for SlimLoss {
        fn at_init_stop(&self, _: ParsedLog) -> Vec<Diagnostic> {
            Vec::new()
        }
        fn kept_keys(&self) -> Option<Arc<KeepFn>> {
            Some(Arc::new(|k: &str| k != "train_loss"))
        }
    }

    fn spec_in(dir: &Path, command: Vec<String>) -> ChildSpec {
        ChildSpec {
            command,
            env: Vec::new(),
            cwd: dir.to_path_buf(),
            run_dir: dir.join("run"),
            compliance_file: dir.join("run/mllog.txt"),
            result: dir.join("result.txt"),
            opening_lines: Vec::new(),
            init_budget: Duration::from_secs(60),
            run_budget: Duration::from_secs(60),
            grace: Duration::from_secs(1),
            tolerance_ms: 2000,
        }
    }

    #[test]
    fn the_result_parsed_as_written_equals_a_read_of_the_finished_file() {
        // \r\n, lone \r before a marker and after one, a rank prefix, a
        // duplicate (dropped from the result), a broken line, a slim key,
        // no final newline.
        let log: &[u8] = b"framework says hi\r\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": 1.5, \"metadata\": {\"lineno\": 1}}\n\
            [rank0]: :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": 1.5, \"metadata\": {\"lineno\": 1}}\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": 1, \"metadata\": {}}\rtail\n\
            progress 10%\rprogress 20%\r\
            0: :::MLLOG {\"namespace\": \"\", \"time_ms\": 6, \"event_type\": \"INTERVAL_END\", \"key\": \"run_stop\", \"value\": null, \"metadata\": {\"status\": \"success\"}}\n\
            :::MLLOG {\"key\": broken\n\
            :::MLLOG {\"namespace\": \"\", \"time_ms\": 7, \"event_type\": \"POINT_IN_TIME\", \"key\": \"eval_accuracy\", \"value\": 0.9, \"metadata\": {}}";
        let run = |log: &[u8]| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("log.txt"), log).unwrap();
            let spec = spec_in(dir.path(), vec!["cat".into(), "log.txt".into()]);
            let s = supervise(&spec, &SlimLoss, &mut || {}).unwrap();
            let keep = SlimLoss.kept_keys().unwrap();
            let file = std::fs::File::open(&spec.result).unwrap();
            let reader = mllog::Reader::new(std::io::BufReader::new(file)).keep_values(keep);
            let read = mllog::collect(reader).unwrap();
            assert_eq!(format!("{:?}", s.parsed), format!("{read:?}"));
            (s, read)
        };
        // Output without any `\r` takes the one-line-per-line path.
        let plain: Vec<u8> = log
            .iter()
            .map(|&b| if b == b'\r' { b' ' } else { b })
            .collect();
        let (_, read) = run(&plain);
        let keys: Vec<&str> = read.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["train_loss", "run_stop", "eval_accuracy"]);
        assert_eq!((read.problems.len(), read.lines), (2, 6));
        let (s, read) = run(log);
        let keys: Vec<&str> = read.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["train_loss", "seed", "run_stop", "eval_accuracy"]);
        assert_eq!(read.problems.len(), 1);
        assert!(read.records[0].slim && !read.records[2].slim);
        assert_eq!(read.lines, 9);
        // The witness read the lifecycle line from the same record.
        assert_eq!(s.status, "success");
        let stop = s
            .witness
            .lines
            .iter()
            .find(|l| l.key == "run_stop")
            .unwrap();
        assert_eq!((stop.index, stop.time_ms), (2, 6.0));
        assert_eq!(s.witness.mllog_lines, 5);
    }

    /// Live rules that keep what the check at init_stop was given.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<(String, usize, bool)>>);
    impl LiveRules for Recorder {
        fn at_init_stop(&self, so_far: ParsedLog) -> Vec<Diagnostic> {
            let mut seen = self.0.lock().unwrap();
            for r in &so_far.records {
                seen.push((r.key().to_string(), r.line, r.slim));
            }
            assert_eq!(so_far.mllog_lines, so_far.records.len() + 1);
            assert_eq!(so_far.problems.len(), 1);
            Vec::new()
        }
        fn kept_keys(&self) -> Option<Arc<KeepFn>> {
            Some(Arc::new(|k: &str| k != "train_loss"))
        }
    }

    #[test]
    fn the_check_at_init_stop_gets_the_records_parsed_so_far() {
        let line = |t: u32, key: &str, ty: &str| {
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {t}, \"event_type\": \"{ty}\", \"key\": \"{key}\", \"value\": null, \"metadata\": {{}}}}\n"
            )
        };
        let log = [
            "framework says hello\n".to_string(),
            line(1, "init_start", "INTERVAL_START"),
            line(2, "train_loss", "POINT_IN_TIME"),
            ":::MLLOG {broken\n".to_string(),
            format!("0: {}", line(3, "init_stop", "INTERVAL_END")),
            line(4, "run_start", "INTERVAL_START"),
        ]
        .concat();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("log.txt"), log).unwrap();
        let spec = spec_in(dir.path(), vec!["cat".into(), "log.txt".into()]);
        let live = Recorder::default();
        let mut spawned = 0;
        supervise(&spec, &live, &mut || spawned += 1).unwrap();
        assert_eq!(spawned, 1);
        // Up to and including init_stop, with the result file's line
        // numbers and the value filter of the closing check.
        assert_eq!(
            *live.0.lock().unwrap(),
            [
                ("init_start".to_string(), 2, false),
                ("train_loss".to_string(), 3, true),
                ("init_stop".to_string(), 5, false),
            ]
        );
    }

    struct NoRules;
    impl LiveRules for NoRules {
        fn at_init_stop(&self, _: ParsedLog) -> Vec<Diagnostic> {
            Vec::new()
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_program_keeps_the_harness_priority_while_the_supervision_yields() {
        let dir = tempfile::tempdir().unwrap();
        // The program prints its own nice value and that of the thread that
        // reads its output (one of the harness's threads, by name).
        let spec = spec_in(
            dir.path(),
            vec!["sh".into(), "-c".into(), "nice; echo done".into()],
        );
        // SAFETY: getpriority of this thread.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        assert_eq!(out, format!("{own}\ndone\n"));
        // The result keeps the output; no run_stop, so the harness's own.
        let result = std::fs::read_to_string(&spec.result).unwrap();
        assert!(result.starts_with(&out), "{result}");
        assert_eq!(s.status, "aborted");
        assert_eq!(s.parsed.records.len(), 1);
        assert_eq!(s.parsed.records[0].key(), "run_stop");
        // The supervision's threads did yield: a thread that calls
        // yield_to_the_program runs at a higher nice value than its parent.
        let niced = std::thread::spawn(|| {
            yield_to_the_program();
            // SAFETY: getpriority of this thread.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        })
        .join()
        .unwrap();
        assert!(niced > own || own >= 10, "{niced} vs {own}");
    }

    #[test]
    fn the_output_is_a_file_the_program_writes_itself_and_is_hashed_as_read() {
        let dir = tempfile::tempdir().unwrap();
        // `stat -L` of the program's own stdout and stderr: regular files
        // (never a pipe, which would make it wait for the harness).
        let spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                "stat -L -c %F /dev/stdout; stat -L -c %F /dev/stderr >&2".into(),
            ],
        );
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        let out = dir.path().join("run/stdout.txt");
        let err = dir.path().join("run/stderr.txt");
        // (empty when `stat` looks: nothing is written yet)
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "regular empty file\n"
        );
        assert_eq!(
            std::fs::read_to_string(&err).unwrap(),
            "regular empty file\n"
        );
        // The captures' and the MLLOG file's digests are of the files as
        // they stand.
        for p in [&out, &err, &spec.compliance_file] {
            assert_eq!(
                s.files.get(&p.display().to_string()),
                crate::fsutil::file_sha256(p).as_ref(),
                "{}",
                p.display()
            );
        }
        // The result keeps both streams' lines.
        let result = std::fs::read_to_string(&spec.result).unwrap();
        assert!(result.starts_with("regular"), "{result}");
        assert_eq!(result.matches("regular").count(), 2, "{result}");
    }

    #[test]
    fn output_of_a_process_the_program_left_behind_is_read_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        // The program exits at once; a process of its group writes an
        // MLLOG line 0.3 s later.
        let late = r#":::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "late", "value": null, "metadata": {}}"#;
        let spec = spec_in(
            dir.path(),
            vec![
                "sh".into(),
                "-c".into(),
                format!("(sleep 0.3; echo '{late}') & echo early"),
            ],
        );
        let t = Instant::now();
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        assert_eq!(out, format!("early\n{late}\n"));
        let keys: Vec<&str> = s.parsed.records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["late", "run_stop"]);
    }

    #[test]
    fn a_process_left_behind_past_the_grace_period_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec_in(
            dir.path(),
            vec!["sh".into(), "-c".into(), "sleep 30 & echo left".into()],
        );
        spec.grace = Duration::from_millis(200);
        let t = Instant::now();
        let s = supervise(&spec, &NoRules, &mut || {}).unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // The program itself exited normally; its group was ended.
        assert_eq!(s.exit, "exit code 0");
        let out = std::fs::read_to_string(dir.path().join("run/stdout.txt")).unwrap();
        assert_eq!(out, "left\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_follower_wakes_when_a_file_grows_or_when_told_and_polls_without_inotify() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        File::create(&path).unwrap();
        let w = Wakeup::new(&[path.as_path()]);
        assert!(w.inotify.is_some() && w.event.is_some());
        // Nothing happens: the wait lasts its limit.
        let t = Instant::now();
        w.wait(Duration::from_millis(150));
        assert!(
            t.elapsed() >= Duration::from_millis(140),
            "{:?}",
            t.elapsed()
        );
        // An append wakes it long before its limit.
        let p = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"line\n").unwrap();
        });
        let t = Instant::now();
        w.wait(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        writer.join().unwrap();
        // So does wake().
        w.wake();
        let t = Instant::now();
        w.wait(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // Without inotify (its limits reached) it looks every POLL_MS.
        let t = Instant::now();
        Wakeup::polling().wait(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn complete_lines_keep_a_partial_tail_for_later() {
        let mut p = b"a\nb\nc".to_vec();
        assert_eq!(complete_lines(&mut p).unwrap(), b"a\nb\n");
        assert_eq!(p, b"c");
        assert_eq!(complete_lines(&mut p), None);
    }
}
