//! Opening the files of a package: the one way referee reads a file that a
//! stranger may have written (result logs, power logs, system descriptions,
//! configs beside logs, MANIFEST and its signature).
//!
//! A package is hostile input. A file of it is opened only if it is a
//! regular file no larger than the cap for its kind, and read through a
//! reader that stops at that cap should the file grow while it is read:
//!
//! * a FIFO cannot hang the reader: the file is looked at first (`lstat`,
//!   or `stat` where links are followed) and opened only when it is a
//!   regular file, and the open itself is non-blocking (`O_NONBLOCK`), so a
//!   file swapped for a FIFO in between is opened at once and then refused
//!   by the check of the opened descriptor (`fstat`);
//! * a device (`/dev/zero`, `/dev/urandom`) or a socket is refused the same
//!   way, so it is never read without end;
//! * a file larger than its cap (a sparse 2 GB file costs its author no
//!   disk) is refused by its size before a byte is read.
//!
//! **Links.** A symbolic link *inside* a package is never followed
//! ([`Links::Refuse`], with `O_NOFOLLOW` on the open): a result that is a link
//! into another submitter's folder would otherwise be read, and scored, as
//! this package's own, and a link to `/dev/zero` or a FIFO is a link like
//! any other. A path the user typed on the command line may be a link the
//! user made: following it is the user's choice ([`Links::Follow`]), and
//! its target must still be a regular file within the cap. Only the last
//! component of a path is checked here; directory walks over a package do
//! not follow links either (they look at each entry's own type), so no
//! component of a path they produce is a link.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// What a file is, which sets how large it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// An MLLOG log: a result log, a power log. 1 GiB: the largest log of
    /// the MLPerf Training v5.0 round is 1.8 MB (llama31_405b, 1,024 nodes)
    /// and its longest line 2.9 KB; a log that writes one line per step of
    /// a million-step run stays far below. Memory does not grow with the
    /// cap for unreadable lines (the reader keeps a bounded number of them
    /// and cuts long lines, see [`crate::mllog`]).
    Log,
    /// A YAML or JSON configuration, a system description, a params file,
    /// a reference table: 4 MiB, a thousand times the size of a system
    /// description or a `referee-perf.yaml`.
    Config,
    /// A MANIFEST: 64 MiB, about 400,000 files of a package at 150 bytes a
    /// line (the 1,978 files of the whole v5.0 round take 300 KB).
    Manifest,
    /// A run record (`referee_run.json`): 64 MiB. Its witness holds a line
    /// for each timing event of each run, a few kilobytes a run.
    Record,
    /// A signature (`MANIFEST.sig`, an armoured SSHSIG of a few hundred
    /// bytes): 64 KiB.
    Signature,
    /// A file that is hashed as it is streamed, whatever its size (memory
    /// does not grow with it): no cap.
    Streamed,
}

impl FileKind {
    /// The most bytes a file of this kind may hold.
    pub fn cap(self) -> u64 {
        match self {
            FileKind::Log => GIB,
            FileKind::Config => 4 * MIB,
            FileKind::Manifest | FileKind::Record => 64 * MIB,
            FileKind::Signature => 64 * KIB,
            FileKind::Streamed => u64::MAX,
        }
    }

    /// The kind in words, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            FileKind::Log => "a log",
            FileKind::Config => "a configuration file",
            FileKind::Manifest => "a MANIFEST",
            FileKind::Record => "a run record",
            FileKind::Signature => "a signature",
            FileKind::Streamed => "a file",
        }
    }
}

/// The deepest a walk over a package goes below the folder it starts
/// from. A results tree is 5 levels deep (`results/SYSTEM/BENCHMARK/power/
/// result_N`); a directory nested deeper than this is reported, not
/// walked (10,000 nested directories would otherwise outgrow the stack or
/// the longest path, and be skipped in silence).
pub const MAX_DEPTH: usize = 64;

/// The error of a directory nested deeper than [`MAX_DEPTH`].
pub fn too_deep() -> io::Error {
    io::Error::other(format!(
        "nested more than {MAX_DEPTH} directories deep: not walked further"
    ))
}

/// Whether the last component of a path may be a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A path found in a package (by a directory walk, beside a log, named
    /// in a file of the package): a link is refused.
    Refuse,
    /// A path the user typed: a link is followed to its target, which must
    /// still be a regular file.
    Follow,
}

/// Why a file of a package was not read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UntrustedError {
    /// The path is a symbolic link (not followed inside a package).
    #[error("{}: is a symbolic link; links inside a package are not followed", .path.display())]
    Link { path: PathBuf },
    /// The path is not a regular file (`what`: "a FIFO", "a directory", …).
    #[error("{}: is {what}, not a regular file", .path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    /// The file is larger than the cap for its kind.
    #[error(
        "{}: {size} bytes, more than the {cap} bytes allowed for {}",
        .path.display(), .kind.noun()
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        cap: u64,
        kind: FileKind,
    },
    /// The file grew past the cap while it was being read.
    #[error(
        "{}: grew past the {cap} bytes allowed for {} while it was read",
        .path.display(), .kind.noun()
    )]
    Grew {
        path: PathBuf,
        cap: u64,
        kind: FileKind,
    },
    /// Looking at, opening or reading the file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: Arc<io::Error>,
    },
}

impl UntrustedError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            UntrustedError::Link { path }
            | UntrustedError::NotRegular { path, .. }
            | UntrustedError::TooLarge { path, .. }
            | UntrustedError::Grew { path, .. }
            | UntrustedError::Io { path, .. } => path,
        }
    }

    /// The error as an [`io::Error`] for readers that return one; its text
    /// leaves out the path (callers name it), and a missing file keeps
    /// [`io::ErrorKind::NotFound`].
    pub fn into_io(self) -> io::Error {
        match self {
            UntrustedError::Io { source, .. } => io::Error::new(source.kind(), source.to_string()),
            other => {
                let full = other.to_string();
                let prefix = format!("{}: ", other.path().display());
                let reason = full.strip_prefix(&prefix).unwrap_or(&full).to_string();
                io::Error::new(io::ErrorKind::InvalidData, reason)
            }
        }
    }

    fn io(path: &Path, e: io::Error) -> Self {
        UntrustedError::Io {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }
}

impl From<UntrustedError> for io::Error {
    fn from(e: UntrustedError) -> io::Error {
        e.into_io()
    }
}

/// A file type in words ("a FIFO", "a symbolic link", …).
pub fn type_name(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// A file of a package, opened and checked; read it through [`Opened::reader`].
#[derive(Debug)]
pub struct Opened {
    file: File,
    path: PathBuf,
    size: u64,
    kind: FileKind,
}

impl Opened {
    /// Its size when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// A reader of its bytes that fails, rather than reads on, once the
    /// file has grown past the cap.
    pub fn reader(self) -> Bounded {
        let cap = self.kind.cap();
        Bounded {
            file: self.file,
            path: self.path,
            kind: self.kind,
            size: self.size,
            left: cap,
            cap,
        }
    }

    /// The open file itself (for positioned reads; a caller that reads it
    /// whole should use [`Opened::reader`]).
    pub fn into_file(self) -> File {
        self.file
    }
}

/// A file read up to its kind's cap; a read past it fails with
/// [`UntrustedError::Grew`] (as an [`io::Error`]).
#[derive(Debug)]
pub struct Bounded {
    file: File,
    path: PathBuf,
    kind: FileKind,
    size: u64,
    left: u64,
    cap: u64,
}

impl Bounded {
    /// A read buffer's size for this file: its size when it was opened and
    /// a byte more (to see its end in one read), within 8 KiB..=`max`.
    /// A buffer over a reader of `read` alone is zeroed once before its
    /// first use, so a small file should not get a large one.
    pub fn buffer_size(&self, max: usize) -> usize {
        let want = usize::try_from(self.size.saturating_add(1)).unwrap_or(usize::MAX);
        want.clamp(8 * 1024, max.max(8 * 1024))
    }
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // One byte more than is left, so that growth past the cap is seen.
        let want = buf.len().min(
            usize::try_from(self.left)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        let n = self.file.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(UntrustedError::Grew {
                path: self.path.clone(),
                cap: self.cap,
                kind: self.kind,
            }
            .into_io());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Open a file of a package for reading: a regular file within `kind`'s
/// cap, its last component a link only where `links` allows (see the
/// module doc).
pub fn open(path: &Path, kind: FileKind, links: Links) -> Result<Opened, UntrustedError> {
    // Look before opening: a FIFO or a device is refused without being
    // opened at all (opening some devices acts on them).
    let before = match links {
        Links::Refuse => std::fs::symlink_metadata(path),
        Links::Follow => std::fs::metadata(path),
    }
    .map_err(|e| UntrustedError::io(path, e))?;
    check_type(path, before.file_type())?;
    let file = open_nonblocking(path, links)?;
    // The descriptor's own type: the path may have been swapped since.
    let meta = file.metadata().map_err(|e| UntrustedError::io(path, e))?;
    check_type(path, meta.file_type())?;
    if meta.len() > kind.cap() {
        return Err(UntrustedError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            cap: kind.cap(),
            kind,
        });
    }
    clear_nonblocking(&file).map_err(|e| UntrustedError::io(path, e))?;
    Ok(Opened {
        file,
        path: path.to_path_buf(),
        size: meta.len(),
        kind,
    })
}

/// A file of a package, whole (see [`open`]).
pub fn read(path: &Path, kind: FileKind, links: Links) -> Result<Vec<u8>, UntrustedError> {
    let opened = open(path, kind, links)?;
    let mut out = Vec::with_capacity(opened.size() as usize);
    opened
        .reader()
        .read_to_end(&mut out)
        .map_err(|e| UntrustedError::io(path, e))?;
    Ok(out)
}

/// A file of a package as UTF-8 text (see [`open`]); bytes that are not
/// UTF-8 are an I/O error of kind `InvalidData`, as `fs::read_to_string`'s.
pub fn read_to_string(path: &Path, kind: FileKind, links: Links) -> Result<String, UntrustedError> {
    let bytes = read(path, kind, links)?;
    String::from_utf8(bytes).map_err(|_| {
        UntrustedError::io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ),
        )
    })
}

fn check_type(path: &Path, ft: std::fs::FileType) -> Result<(), UntrustedError> {
    if ft.is_file() {
        Ok(())
    } else if ft.is_symlink() {
        Err(UntrustedError::Link {
            path: path.to_path_buf(),
        })
    } else {
        Err(UntrustedError::NotRegular {
            path: path.to_path_buf(),
            what: type_name(ft),
        })
    }
}

#[cfg(unix)]
fn open_nonblocking(path: &Path, links: Links) -> Result<File, UntrustedError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            // A link swapped in after the look: O_NOFOLLOW answers ELOOP.
            if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) {
                UntrustedError::Link {
                    path: path.to_path_buf(),
                }
            } else {
                UntrustedError::io(path, e)
            }
        })
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path, _links: Links) -> Result<File, UntrustedError> {
    File::open(path).map_err(|e| UntrustedError::io(path, e))
}

/// Reads of a regular file ignore `O_NONBLOCK`; it is cleared anyway so
/// that the descriptor behaves as an ordinary one wherever it is passed.
#[cfg(unix)]
fn clear_nonblocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function borrows from an open File.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(unix))]
fn clear_nonblocking(_file: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_read_buffer_is_the_file_s_size_within_8_kib_and_the_most_asked() {
        let dir = tempfile::tempdir().unwrap();
        let size_of = |n: usize| {
            let p = dir.path().join(format!("f{n}"));
            std::fs::write(&p, vec![b'x'; n]).unwrap();
            open(&p, FileKind::Log, Links::Refuse)
                .unwrap()
                .reader()
                .buffer_size(256 * 1024)
        };
        assert_eq!(size_of(10), 8 * 1024);
        assert_eq!(size_of(100_000), 100_001);
        assert_eq!(size_of(1 << 20), 256 * 1024);
    }
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    /// `f` on another thread; a test fails (rather than hangs) when it does
    /// not return within 10 s.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the open did not return within 10 s")
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_and_a_link_to_one_are_refused_at_once() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("result_0.txt");
        mkfifo(&fifo);
        let link = t.path().join("result_1.txt");
        symlink(&fifo, &link).unwrap();
        for (p, links) in [
            (fifo.clone(), Links::Refuse),
            (fifo.clone(), Links::Follow),
            (link.clone(), Links::Follow),
        ] {
            let e = within_10s(move || read(&p, FileKind::Log, links).unwrap_err());
            assert!(
                matches!(e, UntrustedError::NotRegular { what: "a FIFO", .. }),
                "{e}"
            );
            assert!(
                e.to_string().contains("is a FIFO, not a regular file"),
                "{e}"
            );
        }
        let e = within_10s(move || read(&link, FileKind::Log, Links::Refuse).unwrap_err());
        assert!(matches!(e, UntrustedError::Link { .. }), "{e}");
    }

    #[test]
    fn a_link_to_dev_zero_is_refused_as_a_device_or_a_link() {
        let t = tempfile::tempdir().unwrap();
        let link = t.path().join("MANIFEST");
        symlink("/dev/zero", &link).unwrap();
        let e = read(&link, FileKind::Manifest, Links::Refuse).unwrap_err();
        assert!(matches!(e, UntrustedError::Link { .. }), "{e}");
        let e = read(&link, FileKind::Manifest, Links::Follow).unwrap_err();
        assert!(
            matches!(
                e,
                UntrustedError::NotRegular {
                    what: "a character device",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_file_over_its_cap_is_refused_by_its_size_unread() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("result_0.txt");
        let f = File::create(&p).unwrap();
        f.set_len(2 * GIB).unwrap(); // sparse: no disk used
        let e = read(&p, FileKind::Log, Links::Refuse).unwrap_err();
        assert!(
            matches!(e, UntrustedError::TooLarge { size, cap, .. } if size == 2 * GIB && cap == GIB),
            "{e}"
        );
        // At the cap it is read.
        let small = t.path().join("sig");
        File::create(&small)
            .unwrap()
            .set_len(FileKind::Signature.cap())
            .unwrap();
        assert_eq!(
            read(&small, FileKind::Signature, Links::Refuse)
                .unwrap()
                .len() as u64,
            FileKind::Signature.cap()
        );
    }

    #[test]
    fn a_file_that_grows_past_its_cap_while_read_fails() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("MANIFEST.sig");
        std::fs::write(&p, b"x").unwrap();
        let opened = open(&p, FileKind::Signature, Links::Refuse).unwrap();
        // Grows after the size was checked.
        File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(FileKind::Signature.cap() + 10)
            .unwrap();
        let mut out = Vec::new();
        let e = opened.reader().read_to_end(&mut out).unwrap_err();
        assert!(e.to_string().contains("grew past the 65536 bytes"), "{e}");
        assert!(out.len() as u64 <= FileKind::Signature.cap());
    }

    #[test]
    fn directories_and_missing_files_are_named() {
        let t = tempfile::tempdir().unwrap();
        let e = read(t.path(), FileKind::Config, Links::Refuse).unwrap_err();
        assert!(
            matches!(
                e,
                UntrustedError::NotRegular {
                    what: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        let e = read(&t.path().join("none"), FileKind::Config, Links::Refuse).unwrap_err();
        assert_eq!(e.clone().into_io().kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string()
                .starts_with(&t.path().join("none").display().to_string())
        );
        // A link the user typed to a regular file is followed.
        let f = t.path().join("a.yaml");
        std::fs::write(&f, "x: 1\n").unwrap();
        let l = t.path().join("b.yaml");
        symlink(&f, &l).unwrap();
        assert_eq!(
            read(&l, FileKind::Config, Links::Follow).unwrap(),
            b"x: 1\n"
        );
        assert!(matches!(
            read(&l, FileKind::Config, Links::Refuse),
            Err(UntrustedError::Link { .. })
        ));
    }
}
