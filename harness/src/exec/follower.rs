//! The file follower: the program's stdout, stderr and MLLOG file read as
//! they grow (woken by inotify, or every few milliseconds without it),
//! hashed as they are read, and handed to the supervisor as batches of
//! complete lines through a bounded channel.

use super::writeback::WriteBack;
use crate::common::harness_process::yield_to_the_program;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Source {
    Stdout = 0,
    Stderr = 1,
    File = 2,
}

pub(super) enum Msg {
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
pub(super) const CHANNEL_CHUNKS: usize = 64;

/// Split off the complete lines of `pending` (up to its last newline).
fn complete_lines(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    let last = memchr::memrchr(b'\n', pending)?;
    let rest = pending.split_off(last + 1);
    Some(std::mem::replace(pending, rest))
}

/// The bytes of a followed file not yet sent as lines. A line longer than
/// the rules read ([`referee_rules::mllog::MAX_LINE`]) is not held: a
/// program that writes without a newline (a stranger's, in an audit's
/// re-run) would otherwise grow the harness's memory without end. Its
/// bytes stay in the file (and its hash); the harness reads past them to
/// the next newline.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Reading past an over-long line, up to its newline.
    skipping: bool,
}

impl Pending {
    /// Add what was read; the complete lines it ends, if any.
    fn push(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let data = if self.skipping {
            match memchr::memchr(b'\n', data) {
                Some(i) => {
                    self.skipping = false;
                    &data[i + 1..]
                }
                None => return None,
            }
        } else {
            data
        };
        self.bytes.extend_from_slice(data);
        let lines = complete_lines(&mut self.bytes);
        if self.bytes.len() > referee_rules::mllog::MAX_LINE {
            self.bytes = Vec::new();
            self.skipping = true;
        }
        lines
    }

    /// Everything left (the file is complete).
    fn take(&mut self) -> Option<Vec<u8>> {
        (!self.bytes.is_empty()).then(|| std::mem::take(&mut self.bytes))
    }
}

/// Bytes read from a followed file at a time.
const READ_BYTES: usize = 1 << 20;

/// A file the program writes — its stdout, its stderr or the MLLOG file —
/// read as it grows, and hashed as it is read.
pub(super) struct Followed {
    src: Source,
    path: PathBuf,
    file: File,
    pending: Pending,
    hash: Sha256,
    /// What was read is handed to the disk a window at a time.
    handed: WriteBack,
}

impl Followed {
    pub(super) fn open(src: Source, path: &Path) -> Result<Followed, super::error::ExecError> {
        let file = File::open(path).map_err(|e| super::error::ExecError::io(path, e))?;
        Ok(Followed {
            src,
            path: path.to_path_buf(),
            file,
            pending: Pending::default(),
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
        let mut lines = self.pending.push(&buf[..n]);
        if last && let Some(rest) = self.pending.take() {
            lines = Some(match lines {
                Some(mut l) => {
                    l.extend_from_slice(&rest);
                    l
                }
                None => rest,
            });
        }
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
pub(super) struct Wakeup {
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
    pub(super) fn new(paths: &[&Path]) -> Wakeup {
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
    pub(super) fn new(_: &[&Path]) -> Wakeup {
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
    pub(super) fn finish(&self) {
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
pub(super) fn follow_files(
    mut files: Vec<Followed>,
    tx: mpsc::SyncSender<Msg>,
    wakeup: Arc<Wakeup>,
) -> std::thread::JoinHandle<Vec<(PathBuf, String)>> {
    std::thread::spawn(move || {
        yield_to_the_program(c"referee-follow");
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
    fn a_line_past_the_rules_cap_is_read_past_not_held() {
        let cap = referee_rules::mllog::MAX_LINE;
        let mut p = Pending::default();
        assert_eq!(p.push(b"first\nsec").unwrap(), b"first\n");
        // A line without end: never more than the cap held.
        let block = vec![b'x'; 1 << 20];
        for _ in 0..(cap >> 20) + 2 {
            assert_eq!(p.push(&block), None);
            assert!(p.bytes.len() <= cap, "{}", p.bytes.len());
        }
        assert!(p.skipping);
        // Its end, then the lines after it, as written.
        assert_eq!(p.push(b"xx\nnext\nla").unwrap(), b"next\n");
        assert_eq!(p.take().unwrap(), b"la");
        assert_eq!(p.take(), None);
    }

    #[test]
    fn complete_lines_keep_a_partial_tail_for_later() {
        let mut p = b"a\nb\nc".to_vec();
        assert_eq!(complete_lines(&mut p).unwrap(), b"a\nb\n");
        assert_eq!(p, b"c");
        assert_eq!(complete_lines(&mut p), None);
    }
}
