//! The result file's write-back: a file written and hashed on a thread of
//! its own ([`Tee`]), its data handed to the disk a window at a time
//! ([`WriteBack`]) and made durable as it grows ([`Settler`]), so that the
//! final `fsync` before the rename has little left to do.

use crate::common::harness_process::yield_to_the_program;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, mpsc};

/// A file written and hashed on a thread of its own: the supervisor hands
/// it bytes in batches and gets the sha256 of everything at the end.
/// Written ranges are handed to the disk as they accumulate, so the final
/// `fsync` of a large file has little left to do.
pub(super) struct Tee {
    batch: Vec<u8>,
    tx: Option<mpsc::SyncSender<Vec<u8>>>,
    done: Option<std::thread::JoinHandle<std::io::Result<String>>>,
    /// The file, for reading back what was written (records' text).
    pub(super) file: Arc<File>,
    /// Bytes handed over so far.
    pub(super) len: u64,
    /// The writer's answer to an empty batch: everything before it is in
    /// the file.
    synced: mpsc::Receiver<()>,
}

const TEE_BATCH: usize = 256 * 1024;

/// Bytes between two hand-overs of written data to the disk.
const WRITEBACK_WINDOW: u64 = 8 << 20;

/// Bytes written to a file, handed to the disk a window at a time (so
/// that an `fsync` — of this file, or of another on the same file system,
/// which may have to flush this one's data first — has little left to do).
#[derive(Default)]
pub(super) struct WriteBack {
    written: u64,
    /// Handed to the disk up to here (writing started).
    handed: u64,
}

impl WriteBack {
    /// `n` more bytes written to `file`: the end of a window handed to the
    /// disk, if one was.
    pub(super) fn wrote(&mut self, file: &File, n: usize) -> Option<u64> {
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
            yield_to_the_program(c"referee-sync");
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
    pub(super) fn create(path: &Path) -> Result<Tee, super::error::ExecError> {
        let err = |e: std::io::Error| super::error::ExecError::io(path, e);
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
            yield_to_the_program(c"referee-hash");
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

    pub(super) fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.len += bytes.len() as u64;
        self.batch.extend_from_slice(bytes);
        if self.batch.len() >= TEE_BATCH {
            self.send()?;
        }
        Ok(())
    }

    /// Wait until everything handed over so far is in the file.
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
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
    pub(super) fn finish(mut self) -> std::io::Result<String> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        self.join()
    }
}
