//! Signing a submission directory, and verifying it without trusting the
//! machine that produced it.
//!
//! A signed directory holds two extra top-level files:
//!
//! * `MANIFEST`: the canonical manifest of every other file (see
//!   [`crate::manifest`]);
//! * `MANIFEST.sig`: an OpenSSH `SSHSIG` signature of the exact bytes of
//!   `MANIFEST`, ASCII-armored (`-----BEGIN SSH SIGNATURE-----`), namespace
//!   `referee`, hash `sha512`, made with an ed25519 key.
//!
//! This is the same format as `ssh-keygen -Y sign -n referee`, so an auditor
//! can check a directory with stock OpenSSH alone:
//!
//! ```text
//! ssh-keygen -Y verify -f allowed_signers -I <principal> -n referee -s MANIFEST.sig < MANIFEST
//! sha256sum -c <(tail -n +2 MANIFEST)   # then check the files against it
//! ```
//!
//! Keys are OpenSSH keys: `ssh-keygen -t ed25519` keys work with referee and
//! [`keygen`] keys work with `ssh-keygen`. Passphrase-protected private keys
//! are not supported (referee says so rather than failing obscurely).
//!
//! Trust: [`verify_dir_trusting`] with [`Trust::AllowedSigners`] (the
//! OpenSSH format, `principal[,principal...] [options] keytype base64
//! [comment]`) accepts only keys listed there for the `referee` namespace;
//! with [`Trust::Fingerprint`] only the one key pinned by its `SHA256:…`
//! fingerprint. With [`Trust::Unchecked`] a valid signature by *any* key
//! verifies — it proves only that the files are those that key signed —
//! and the report says the key was not checked against a trusted signer.

use crate::manifest::{Change, MANIFEST_FILE, Manifest, ManifestError, SIGNATURE_FILE};
use referee_rules::escape::term;
use referee_rules::untrusted::{self, FileKind, Links, UntrustedError};
use serde::Serialize;
use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey, PublicKey, SshSig, public::KeyData};
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The SSHSIG namespace of referee signatures.
pub const NAMESPACE: &str = "referee";

/// Why a command could not do its job (as opposed to a verification that
/// ran and found problems, which is a [`VerifyReport`]).
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {message}", path.display())]
    Key { path: PathBuf, message: String },
    #[error("{}: already exists (pass force / --force to overwrite)", .0.display())]
    Exists(PathBuf),
    #[error("{}: line {line}: {problem}", path.display())]
    AllowedSigners {
        path: PathBuf,
        line: usize,
        problem: SignerLineError,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("signing failed: {0}")]
    Signing(String),
}

/// What is wrong with a line of an allowed_signers file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignerLineError {
    #[error("empty line")]
    EmptyLine,
    #[error("no key after the principals")]
    NoKeyAfterPrincipals,
    #[error("no key after the options")]
    NoKeyAfterOptions,
    #[error("no base64 key after the key type")]
    NoBase64Key,
    #[error("unbalanced quotes in {found:?}")]
    UnbalancedQuotes { found: String },
    #[error("unexpected quote in {found:?}")]
    UnexpectedQuote { found: String },
    #[error("empty principal in {found:?}")]
    EmptyPrincipal { found: String },
    #[error("unknown key type {found:?}")]
    UnknownKeyType { found: String },
    /// `message`: what the OpenSSH key decoder said.
    #[error("bad ssh-ed25519 key: {message}")]
    BadKey { message: String },
    #[error("unbalanced quotes in options {found:?}")]
    UnbalancedOptionQuotes { found: String },
    #[error("empty option in {found:?}")]
    EmptyOption { found: String },
}

/// A `--signer` value is not an OpenSSH SHA256 fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    #[error(
        "--signer {given:?}: expected a key fingerprint SHA256:<43 base64 characters>, as `ssh-keygen -lf KEY.pub` or `referee keygen` prints it"
    )]
    NoPrefix { given: String },
    #[error("--signer {given:?}: expected 43 base64 characters after SHA256: (found {found})")]
    Length { given: String, found: usize },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SignError + '_ {
    move |source| SignError::Io {
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------

/// What [`keygen`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct KeyInfo {
    pub private_key: PathBuf,
    pub public_key: PathBuf,
    /// `SHA256:...`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
    /// The OpenSSH public-key line (`ssh-ed25519 AAAA... comment`).
    pub public_line: String,
    /// The line to hand to auditors for their allowed_signers file:
    /// `PRINCIPAL namespaces="referee" ssh-ed25519 AAAA... comment`.
    pub allowed_signers_line: String,
}

/// The allowed_signers line that trusts `public_line` for referee
/// signatures, under `principal` (whitespace and quotes become `_`).
pub fn allowed_signers_line(principal: &str, public_line: &str) -> String {
    let p = principal_form(principal);
    let p = if p.is_empty() { "referee".into() } else { p };
    format!("{p} namespaces=\"{NAMESPACE}\" {public_line}")
}

/// Does one of a trusted signer's `principals` (OpenSSH patterns: `*`,
/// `?`, `!` negates) name the organisation `who`? `who` is compared as
/// [`allowed_signers_line`] writes a principal (whitespace, quotes and
/// commas as `_`), so that the line `referee keygen --comment "Acme
/// Corp"` printed allows the organisation `Acme Corp`.
pub fn principals_allow(principals: &[String], who: &str) -> bool {
    let who = principal_form(who);
    !who.is_empty() && principals.iter().any(|p| match_pattern_list(&who, p))
}

/// A name as an allowed_signers principal: whitespace, quotes and commas
/// (which would end or split it) as `_`.
fn principal_form(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c == '"' || c == ',' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// `path` with `.pub` appended to its file name (`key` → `key.pub`).
pub fn public_key_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Generate an ed25519 key pair: the private key at `out` in OpenSSH format,
/// mode 0600 from its creation on, and the public key line at `out.pub`.
/// Both are written atomically. Refuses to replace either file unless
/// `force`.
pub fn keygen(out: &Path, comment: &str, force: bool) -> Result<KeyInfo, SignError> {
    let pub_path = public_key_path(out);
    if !force {
        for p in [out, pub_path.as_path()] {
            if fs::symlink_metadata(p).is_ok() {
                return Err(SignError::Exists(p.to_path_buf()));
            }
        }
    }
    let mut key = PrivateKey::random(&mut ssh_key::rand_core::OsRng, Algorithm::Ed25519)
        .map_err(|e| SignError::Signing(format!("key generation: {e}")))?;
    key.set_comment(comment);
    let private_text = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| SignError::Signing(format!("encoding the private key: {e}")))?;
    let public_line = key
        .public_key()
        .to_openssh()
        .map_err(|e| SignError::Signing(format!("encoding the public key: {e}")))?;
    write_atomic(out, private_text.as_bytes(), 0o600, force)?;
    write_atomic(
        &pub_path,
        format!("{public_line}\n").as_bytes(),
        0o644,
        force,
    )?;
    Ok(KeyInfo {
        private_key: out.to_path_buf(),
        public_key: pub_path,
        fingerprint: key.public_key().fingerprint(HashAlg::Sha256).to_string(),
        allowed_signers_line: allowed_signers_line(comment, &public_line),
        public_line,
    })
}

/// Read an unencrypted OpenSSH ed25519 private key.
pub fn load_private_key(path: &Path) -> Result<PrivateKey, SignError> {
    let text = fs::read(path).map_err(io_err(path))?;
    let key_err = |message: String| SignError::Key {
        path: path.to_path_buf(),
        message,
    };
    let key = PrivateKey::from_openssh(&text)
        .map_err(|e| key_err(format!("not an OpenSSH private key ({e})")))?;
    if key.is_encrypted() {
        return Err(key_err(
            "the private key is protected by a passphrase; referee needs an unencrypted key".into(),
        ));
    }
    if key.algorithm() != Algorithm::Ed25519 {
        return Err(key_err(format!(
            "is a {} key; referee signs with ed25519 keys (ssh-keygen -t ed25519 or referee keygen)",
            key.algorithm()
        )));
    }
    Ok(key)
}

/// Read an OpenSSH public key line from a file.
pub fn load_public_key(path: &Path) -> Result<PublicKey, SignError> {
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    PublicKey::from_openssh(text.trim()).map_err(|e| SignError::Key {
        path: path.to_path_buf(),
        message: format!("not an OpenSSH public key ({e})"),
    })
}

/// SHA256 fingerprint of a public key, `SHA256:<base64>`.
pub fn fingerprint(key: &KeyData) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The armored SSHSIG signature (namespace `referee`, sha512) of `msg`.
pub fn sign_bytes(key: &PrivateKey, msg: &[u8]) -> Result<String, SignError> {
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, msg)
        .map_err(|e| SignError::Signing(e.to_string()))?;
    let mut pem = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| SignError::Signing(e.to_string()))?;
    if !pem.ends_with('\n') {
        pem.push('\n');
    }
    Ok(pem)
}

/// Why a signature does not check out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigCheckError {
    /// Not an armored SSHSIG blob at all.
    Malformed(String),
    /// A well-formed signature, in another namespace.
    WrongNamespace { found: String, fingerprint: String },
    /// A well-formed signature that does not match the message.
    Mismatch { fingerprint: String, reason: String },
}

/// Check an armored SSHSIG signature over `msg` in the `referee` namespace.
/// On success, returns the signing key (which the caller must still decide
/// to trust).
pub fn verify_bytes(msg: &[u8], armored: &[u8]) -> Result<KeyData, SigCheckError> {
    let sig = SshSig::from_pem(armored).map_err(|e| SigCheckError::Malformed(e.to_string()))?;
    // ssh-key's decoder tolerates some non-canonical encodings (e.g. an
    // inflated length prefix around the public key). Accept only the
    // canonical encoding, up to armor whitespace (line wrapping, CRLF), so
    // that every byte of MANIFEST.sig that carries data is covered.
    let canonical = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| SigCheckError::Malformed(e.to_string()))?;
    let squeeze = |b: &[u8]| -> Vec<u8> {
        b.iter()
            .copied()
            .filter(|c| !c.is_ascii_whitespace())
            .collect()
    };
    if squeeze(armored) != squeeze(canonical.as_bytes()) {
        return Err(SigCheckError::Malformed(
            "not the canonical encoding of an SSHSIG signature".into(),
        ));
    }
    let key = sig.public_key().clone();
    let fp = fingerprint(&key);
    if sig.namespace() != NAMESPACE {
        return Err(SigCheckError::WrongNamespace {
            found: sig.namespace().to_string(),
            fingerprint: fp,
        });
    }
    PublicKey::from(key.clone())
        .verify(NAMESPACE, msg, &sig)
        .map_err(|e| SigCheckError::Mismatch {
            fingerprint: fp,
            reason: e.to_string(),
        })?;
    Ok(key)
}

// ---------------------------------------------------------------------------
// Signing a directory
// ---------------------------------------------------------------------------

/// What [`sign_dir`] did.
#[derive(Debug, Clone, Serialize)]
pub struct SignSummary {
    pub manifest: PathBuf,
    pub signature: PathBuf,
    /// Files listed.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    pub key_fingerprint: String,
}

/// Write `dir/MANIFEST` (the canonical manifest of `dir`) and
/// `dir/MANIFEST.sig` (its signature with the private key at `key_path`),
/// each atomically. Replaces earlier ones. Refuses trees holding symlinks or
/// special files, naming them.
pub fn sign_dir(dir: &Path, key_path: &Path) -> Result<SignSummary, SignError> {
    let key = load_private_key(key_path)?;
    let manifest = Manifest::build(dir)?;
    let text = manifest.to_text();
    let pem = sign_bytes(&key, text.as_bytes())?;
    // Belt and braces: never write a signature that does not verify.
    verify_bytes(text.as_bytes(), pem.as_bytes())
        .map_err(|e| SignError::Signing(format!("self-check failed: {e:?}")))?;
    let manifest_path = dir.join(MANIFEST_FILE);
    let sig_path = dir.join(SIGNATURE_FILE);
    write_atomic(&manifest_path, text.as_bytes(), 0o644, true)?;
    write_atomic(&sig_path, pem.as_bytes(), 0o644, true)?;
    Ok(SignSummary {
        manifest: manifest_path,
        signature: sig_path,
        files: manifest.len(),
        bytes: manifest.total_bytes(),
        key_fingerprint: fingerprint(key.public_key().key_data()),
    })
}

/// Write `bytes` to `dest` atomically: a temporary file in the same
/// directory, created with `mode` (never more permissive, even briefly),
/// fsynced, then renamed over `dest` (or linked, failing if `dest` exists,
/// when `!overwrite`); then the directory is fsynced.
pub fn write_atomic(
    dest: &Path,
    bytes: &[u8],
    mode: u32,
    overwrite: bool,
) -> Result<(), SignError> {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut b = tempfile::Builder::new();
    b.prefix(".referee-tmp-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = b.tempfile_in(parent).map_err(io_err(parent))?;
    tmp.write_all(bytes).map_err(io_err(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io_err(dest))?;
    let persisted = if overwrite {
        tmp.persist(dest).map(|_| ())
    } else {
        tmp.persist_noclobber(dest).map(|_| ())
    };
    if let Err(e) = persisted {
        if e.error.kind() == io::ErrorKind::AlreadyExists {
            return Err(SignError::Exists(dest.to_path_buf()));
        }
        return Err(SignError::Io {
            path: dest.to_path_buf(),
            source: e.error,
        });
    }
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(parent) {
        // Some file systems refuse fsync on directories; the data is safe
        // either way, only the rename's durability is at stake.
        let _ = d.sync_all();
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// allowed_signers
// ---------------------------------------------------------------------------

/// One line of an OpenSSH `allowed_signers` file.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    /// 1-based line number.
    pub line: usize,
    pub principals: Vec<String>,
    /// The `namespaces="..."` pattern list, if any.
    pub namespaces: Option<String>,
    /// `cert-authority`: the key is trusted to sign certificates, not
    /// messages; such a line never matches a plain key (as in OpenSSH).
    pub cert_authority: bool,
    /// An option referee does not implement (`valid-after`, ...): the line
    /// is not trusted, so that nothing is accepted that OpenSSH would refuse.
    pub unsupported: Option<String>,
    /// The key, if its algorithm is one ssh-key can decode.
    pub key: Option<KeyData>,
}

/// An OpenSSH `allowed_signers` file.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    pub source: String,
    pub signers: Vec<AllowedSigner>,
}

/// The outcome of looking a key up in [`AllowedSigners`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Listed for the namespace, with these principals.
    Trusted(Vec<String>),
    /// Not listed for the namespace; notes say which lines name the key but
    /// do not apply, and why.
    NotListed(Vec<String>),
}

impl AllowedSigners {
    /// Read and parse a file; a malformed line is an error naming it.
    pub fn load(path: &Path) -> Result<AllowedSigners, SignError> {
        let text = fs::read_to_string(path).map_err(io_err(path))?;
        let mut s = Self::parse(&text).map_err(|(line, problem)| SignError::AllowedSigners {
            path: path.to_path_buf(),
            line,
            problem,
        })?;
        s.source = path.display().to_string();
        Ok(s)
    }

    /// Parse the text of an allowed_signers file. Errors are
    /// `(line, message)`.
    pub fn parse(text: &str) -> Result<AllowedSigners, (usize, SignerLineError)> {
        let mut signers = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            signers.push(parse_signer_line(line).map_err(|m| (n, m))?);
            signers.last_mut().unwrap().line = n;
        }
        Ok(AllowedSigners {
            source: String::new(),
            signers,
        })
    }

    /// Whether `key` may sign in `namespace`.
    pub fn lookup(&self, key: &KeyData, namespace: &str) -> Lookup {
        let mut notes = Vec::new();
        let mut principals: Vec<String> = Vec::new();
        for s in &self.signers {
            if s.key.as_ref() != Some(key) {
                continue;
            }
            if s.cert_authority {
                notes.push(format!(
                    "line {}: cert-authority (trusted for certificates only)",
                    s.line
                ));
                continue;
            }
            if let Some(opt) = &s.unsupported {
                notes.push(format!(
                    "line {}: option {opt} is not supported by referee, line ignored",
                    s.line
                ));
                continue;
            }
            if let Some(ns) = &s.namespaces
                && !match_pattern_list(namespace, ns)
            {
                notes.push(format!(
                    "line {}: namespaces=\"{ns}\" does not include {namespace}",
                    s.line
                ));
                continue;
            }
            for p in &s.principals {
                if !principals.contains(p) {
                    principals.push(p.clone());
                }
            }
        }
        if principals.is_empty() {
            Lookup::NotListed(notes)
        } else {
            Lookup::Trusted(principals)
        }
    }
}

/// Split off one whitespace-delimited token, honouring double quotes.
fn next_token(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    if s.is_empty() {
        return None;
    }
    let mut quoted = false;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted && c.is_whitespace() {
            end = i;
            break;
        }
    }
    Some((s[..end].to_string(), &s[end..]))
}

fn unquote(s: &str) -> Result<String, SignerLineError> {
    if let Some(inner) = s.strip_prefix('"') {
        inner
            .strip_suffix('"')
            .filter(|i| !i.contains('"'))
            .map(str::to_string)
            .ok_or_else(|| SignerLineError::UnbalancedQuotes {
                found: s.to_string(),
            })
    } else if s.contains('"') {
        Err(SignerLineError::UnexpectedQuote {
            found: s.to_string(),
        })
    } else {
        Ok(s.to_string())
    }
}

fn is_key_type(t: &str) -> bool {
    matches!(
        t,
        "ssh-ed25519"
            | "ssh-rsa"
            | "ssh-dss"
            | "ecdsa-sha2-nistp256"
            | "ecdsa-sha2-nistp384"
            | "ecdsa-sha2-nistp521"
            | "sk-ssh-ed25519@openssh.com"
            | "sk-ecdsa-sha2-nistp256@openssh.com"
    ) || t.ends_with("-cert-v01@openssh.com")
}

fn parse_signer_line(line: &str) -> Result<AllowedSigner, SignerLineError> {
    let (principals_tok, rest) = next_token(line).ok_or(SignerLineError::EmptyLine)?;
    let principals: Vec<String> = unquote(&principals_tok)?
        .split(',')
        .map(str::to_string)
        .collect();
    if principals.iter().any(String::is_empty) {
        return Err(SignerLineError::EmptyPrincipal {
            found: principals_tok,
        });
    }
    let (mut tok, mut rest) = next_token(rest).ok_or(SignerLineError::NoKeyAfterPrincipals)?;
    let mut namespaces = None;
    let mut cert_authority = false;
    let mut unsupported = None;
    if !is_key_type(&tok) {
        for opt in split_options(&tok)? {
            let (name, value) = match opt.split_once('=') {
                Some((n, v)) => (n.to_ascii_lowercase(), Some(unquote(v)?)),
                None => (opt.to_ascii_lowercase(), None),
            };
            match (name.as_str(), value) {
                ("cert-authority", None) => cert_authority = true,
                ("namespaces", Some(v)) => namespaces = Some(v),
                (n, _) if unsupported.is_none() => unsupported = Some(n.to_string()),
                _ => {}
            }
        }
        (tok, rest) = next_token(rest).ok_or(SignerLineError::NoKeyAfterOptions)?;
        if !is_key_type(&tok) {
            return Err(SignerLineError::UnknownKeyType { found: tok });
        }
    }
    let (blob, _comment) = next_token(rest).ok_or(SignerLineError::NoBase64Key)?;
    let key = match PublicKey::from_openssh(&format!("{tok} {blob}")) {
        Ok(k) => Some(k.key_data().clone()),
        // referee verifies ed25519 signatures; a key it cannot decode cannot
        // be the key of a signature it verified, so such lines just never
        // match. A broken ed25519 key, though, is a typo worth reporting.
        Err(e) if tok == "ssh-ed25519" => {
            return Err(SignerLineError::BadKey {
                message: e.to_string(),
            });
        }
        Err(_) => None,
    };
    Ok(AllowedSigner {
        line: 0,
        principals,
        namespaces,
        cert_authority,
        unsupported,
        key,
    })
}

/// Split `a,b="x,y",c` on commas outside quotes.
fn split_options(s: &str) -> Result<Vec<String>, SignerLineError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quoted {
        return Err(SignerLineError::UnbalancedOptionQuotes {
            found: s.to_string(),
        });
    }
    out.push(cur);
    if out.iter().any(String::is_empty) {
        return Err(SignerLineError::EmptyOption {
            found: s.to_string(),
        });
    }
    Ok(out)
}

/// OpenSSH `match_pattern_list`: comma-separated glob patterns (`*`, `?`),
/// `!pattern` negates; a matching negation wins.
fn match_pattern_list(s: &str, list: &str) -> bool {
    let mut matched = false;
    for p in list.split(',') {
        let p = p.trim();
        if let Some(neg) = p.strip_prefix('!') {
            if glob(s.as_bytes(), neg.as_bytes()) {
                return false;
            }
        } else if glob(s.as_bytes(), p.as_bytes()) {
            matched = true;
        }
    }
    matched
}

fn glob(s: &[u8], p: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, _) => s.is_empty(),
        (Some(b'*'), _) => glob(s, &p[1..]) || (!s.is_empty() && glob(&s[1..], p)),
        (Some(b'?'), Some(_)) => glob(&s[1..], &p[1..]),
        (Some(a), Some(b)) if a == b => glob(&s[1..], &p[1..]),
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Verification
// ---------------------------------------------------------------------------

/// What kind of problem verification found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// `MANIFEST.sig` is malformed, in another namespace, or does not match
    /// the bytes of `MANIFEST`.
    BadSignature,
    /// The signature is valid but its key is not in the allowed signers.
    UnknownKey,
    MissingManifest,
    MissingSignature,
    /// `MANIFEST` is not a valid canonical manifest.
    BadManifest,
    /// A file on disk that the manifest does not list.
    Added,
    /// A file the manifest lists that is not on disk.
    Removed,
    /// A file whose size or content differs from the manifest.
    Modified,
    /// A file or directory that could not be read.
    Unreadable,
    /// A symbolic link in the tree.
    Symlink,
    /// A socket, FIFO or device in the tree.
    SpecialFile,
    /// A file name that is not UTF-8 or holds control characters.
    BadName,
}

/// Size and hash of one file, as recorded or as found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDigest {
    pub size: u64,
    pub sha256: String,
}

/// One problem, and the path (relative to the directory) it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub path: String,
    /// Human detail (may be empty).
    pub detail: String,
    /// For `Modified` and `Removed`: what the manifest recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<FileDigest>,
    /// For `Modified`: what is on disk now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<FileDigest>,
}

impl Problem {
    fn new(kind: ProblemKind, path: impl Into<String>, detail: impl Into<String>) -> Problem {
        Problem {
            kind,
            path: path.into(),
            detail: detail.into(),
            was: None,
            now: None,
        }
    }
}

/// For people: the path and the detail quote the package, so both are
/// shown through [`term`].
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProblemKind::*;
        let label = match self.kind {
            BadSignature => "bad signature",
            UnknownKey => "unknown key",
            MissingManifest | MissingSignature => "missing",
            BadManifest => "bad manifest",
            Added => "added",
            Removed => "removed",
            Modified => "changed",
            Unreadable => "unreadable",
            Symlink => "symlink",
            SpecialFile => "special file",
            BadName => "bad file name",
        };
        write!(f, "{label}: {}", term(&self.path))?;
        match (self.kind, &self.was, &self.now) {
            (Modified, Some(w), Some(n)) => {
                write!(f, " (")?;
                if w.size != n.size {
                    write!(f, "size was {}, now {}; ", w.size, n.size)?;
                }
                write!(f, "sha256 was {}, now {})", w.sha256, n.sha256)
            }
            _ if self.detail.is_empty() => Ok(()),
            _ => write!(f, " ({})", term(&self.detail)),
        }
    }
}

/// The outcome of [`verify_dir`].
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// The directory, as given.
    pub dir: String,
    /// True when there is no problem at all.
    pub ok: bool,
    /// Files listed in the signed manifest (0 when it is missing or bad).
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// `SHA256:...` of the key in `MANIFEST.sig`, when it could be read.
    pub key_fingerprint: Option<String>,
    /// Whether the key was checked against a trusted signer (an
    /// allowed_signers file or a pinned fingerprint).
    pub signers_checked: bool,
    /// What the key was checked against (`allowed_signers FILE`, `pinned
    /// fingerprint SHA256:…`), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_by: Option<String>,
    /// The principals the allowed_signers file gives the key.
    pub principals: Vec<String>,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// One JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a VerifyReport always serializes")
    }

    /// The problems of one kind.
    pub fn of_kind(&self, kind: ProblemKind) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(move |p| p.kind == kind)
    }
}

/// For people: one line per problem, then the verdict; what the package
/// or the allowed_signers file named is shown through [`term`].
impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.problems {
            writeln!(f, "{p}")?;
        }
        if self.ok {
            let key = term(self.key_fingerprint.as_deref().unwrap_or("?"));
            if self.trusted_by.is_none() {
                writeln!(
                    f,
                    "note: signed by key {key}, not checked against a trusted signer: {UNCHECKED_HINT}"
                )?;
            }
            write!(
                f,
                "VERIFIED {} ({} files, key {key}",
                term(&self.dir),
                self.files
            )?;
            if let Some(by) = &self.trusted_by {
                write!(f, ", trusted by {}", term(by))?;
            }
            if !self.principals.is_empty() {
                write!(f, ", signer {}", term(&self.principals.join(",")))?;
            }
            write!(f, ")")
        } else {
            let k = self.problems.len();
            let s = if k == 1 { "" } else { "s" };
            write!(f, "FAILED {}: {k} problem{s}", term(&self.dir))
        }
    }
}

/// What the auditor says the signing key must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Any key: a valid signature shows only that the files are those the
    /// key signed, not who signed them.
    Unchecked,
    /// A key listed in this OpenSSH allowed_signers file for namespace
    /// `referee`.
    AllowedSigners(PathBuf),
    /// The key whose SHA256 fingerprint is this (`SHA256:<base64>`, as
    /// `ssh-keygen -l` and `referee keygen` print it).
    Fingerprint(String),
}

/// What to do when no trusted signer was given.
pub const UNCHECKED_HINT: &str = "the signature shows only that the files are those this key signed, not who signed them; give --allowed-signers FILE or --signer SHA256:… with the key the submitter published";

/// Check that `fp` looks like an OpenSSH SHA256 fingerprint.
pub fn parse_fingerprint(fp: &str) -> Result<String, FingerprintError> {
    let b64 = fp
        .strip_prefix("SHA256:")
        .ok_or_else(|| FingerprintError::NoPrefix {
            given: fp.to_string(),
        })?;
    if b64.len() != 43
        || !b64
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
    {
        return Err(FingerprintError::Length {
            given: fp.to_string(),
            found: b64.len(),
        });
    }
    Ok(fp.to_string())
}

/// Verify a signed directory: the signature of `MANIFEST` (namespace
/// `referee`), the signing key against `allowed_signers` when given, and
/// every file against the manifest. Every problem found is in the report;
/// `Err` only when the check could not run at all (`dir` is not a readable
/// directory, `allowed_signers` is unreadable or malformed).
pub fn verify_dir(dir: &Path, allowed_signers: Option<&Path>) -> Result<VerifyReport, SignError> {
    let trust = match allowed_signers {
        Some(p) => Trust::AllowedSigners(p.to_path_buf()),
        None => Trust::Unchecked,
    };
    verify_dir_trusting(dir, &trust)
}

/// [`verify_dir`], the key checked as `trust` says.
pub fn verify_dir_trusting(dir: &Path, trust: &Trust) -> Result<VerifyReport, SignError> {
    let signers = match trust {
        Trust::AllowedSigners(p) => Some(SignerCheck::Listed(AllowedSigners::load(p)?)),
        Trust::Fingerprint(fp) => Some(SignerCheck::Pinned(fp.clone())),
        Trust::Unchecked => None,
    };
    let meta = fs::metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(ManifestError::NotADirectory(dir.to_path_buf()).into());
    }
    let mut problems = Vec::new();
    let manifest_bytes = read_signed_file(dir, MANIFEST_FILE, &mut problems);
    let sig_bytes = read_signed_file(dir, SIGNATURE_FILE, &mut problems);
    let signer = match (&manifest_bytes, &sig_bytes) {
        (Some(m), Some(s)) => check_signature(m, s, signers.as_ref(), &mut problems),
        _ => Signer::default(),
    };
    // The manifest as recorded, if it parses. Even when the signature is
    // bad, comparing against it helps locate what was touched.
    let signed = manifest_bytes
        .as_ref()
        .and_then(|b| parse_signed_manifest(b, &mut problems));
    let scan = Manifest::scan(dir)?;
    let trouble = scan_problems(&scan, &mut problems);
    let (mut files, mut bytes) = (0, 0);
    if let Some(signed) = &signed {
        files = signed.len();
        bytes = signed.total_bytes();
        compare_files(signed, &scan.manifest, &trouble, &mut problems);
    }
    Ok(VerifyReport {
        dir: dir.display().to_string(),
        ok: problems.is_empty(),
        files,
        bytes,
        key_fingerprint: signer.key_fingerprint,
        signers_checked: signers.is_some(),
        trusted_by: signers.as_ref().map(|s| match s {
            SignerCheck::Listed(a) => format!("allowed_signers {}", a.source),
            SignerCheck::Pinned(fp) => format!("pinned fingerprint {fp}"),
        }),
        principals: signer.principals,
        problems,
    })
}

/// `MANIFEST` or `MANIFEST.sig`; its absence or unreadability is a problem.
///
/// Both are files of the package (see `referee_rules::untrusted`): a link,
/// a FIFO or a device of that name is unreadable, not read (a link to
/// `/dev/zero` would fill memory, a FIFO would hang), and each has a size
/// cap.
fn read_signed_file(dir: &Path, name: &str, problems: &mut Vec<Problem>) -> Option<Vec<u8>> {
    let kind = if name == MANIFEST_FILE {
        FileKind::Manifest
    } else {
        FileKind::Signature
    };
    match untrusted::read(&dir.join(name), kind, Links::Refuse).map_err(UntrustedError::into_io) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let (kind, hint) = if name == MANIFEST_FILE {
                (
                    ProblemKind::MissingManifest,
                    "the directory is not signed; run `referee sign`",
                )
            } else {
                (
                    ProblemKind::MissingSignature,
                    "no signature next to MANIFEST",
                )
            };
            problems.push(Problem::new(kind, name, hint));
            None
        }
        Err(e) => {
            problems.push(Problem::new(ProblemKind::Unreadable, name, e.to_string()));
            None
        }
    }
}

/// Who signed, as far as the signature tells.
#[derive(Default)]
struct Signer {
    key_fingerprint: Option<String>,
    principals: Vec<String>,
}

/// The trusted signer the key is checked against.
enum SignerCheck {
    Listed(AllowedSigners),
    Pinned(String),
}

/// The signature over the manifest's bytes, and the key against the
/// trusted signer when given.
fn check_signature(
    manifest: &[u8],
    sig: &[u8],
    signers: Option<&SignerCheck>,
    problems: &mut Vec<Problem>,
) -> Signer {
    let mut signer = Signer::default();
    match verify_bytes(manifest, sig) {
        Ok(key) => {
            signer.key_fingerprint = Some(fingerprint(&key));
            if let Some(SignerCheck::Pinned(fp)) = signers
                && fingerprint(&key) != *fp
            {
                problems.push(Problem::new(
                    ProblemKind::UnknownKey,
                    SIGNATURE_FILE,
                    format!(
                        "signed by key {}, not the trusted signer {fp} (--signer)",
                        fingerprint(&key)
                    ),
                ));
            }
            if let Some(SignerCheck::Listed(signers)) = signers {
                match signers.lookup(&key, NAMESPACE) {
                    Lookup::Trusted(p) => signer.principals = p,
                    Lookup::NotListed(notes) => {
                        let mut detail = format!(
                            "{} is not listed in {} for namespace {NAMESPACE}",
                            fingerprint(&key),
                            signers.source
                        );
                        for n in notes {
                            detail.push_str("; ");
                            detail.push_str(&n);
                        }
                        problems.push(Problem::new(
                            ProblemKind::UnknownKey,
                            SIGNATURE_FILE,
                            detail,
                        ));
                    }
                }
            }
        }
        Err(SigCheckError::Malformed(e)) => problems.push(Problem::new(
            ProblemKind::BadSignature,
            SIGNATURE_FILE,
            format!("not a valid SSHSIG signature: {e}"),
        )),
        Err(SigCheckError::WrongNamespace { found, fingerprint }) => {
            signer.key_fingerprint = Some(fingerprint);
            problems.push(Problem::new(
                ProblemKind::BadSignature,
                SIGNATURE_FILE,
                format!("signature namespace is {found:?}, expected {NAMESPACE:?}"),
            ))
        }
        Err(SigCheckError::Mismatch {
            fingerprint,
            reason,
        }) => {
            signer.key_fingerprint = Some(fingerprint);
            problems.push(Problem::new(
                ProblemKind::BadSignature,
                MANIFEST_FILE,
                format!(
                    "MANIFEST.sig does not match the bytes of MANIFEST; one of them was altered ({reason})"
                ),
            ))
        }
    }
    signer
}

fn parse_signed_manifest(bytes: &[u8], problems: &mut Vec<Problem>) -> Option<Manifest> {
    let parsed = std::str::from_utf8(bytes)
        .map_err(|e| format!("not UTF-8: {e}"))
        .and_then(|t| Manifest::parse(t).map_err(|e| e.to_string()));
    match parsed {
        Ok(m) => Some(m),
        Err(e) => {
            problems.push(Problem::new(ProblemKind::BadManifest, MANIFEST_FILE, e));
            None
        }
    }
}

/// The paths the scan could not hash (symlinks, special files, bad names,
/// unreadable), each a problem; returned so that they are not reported
/// again as removed.
fn scan_problems(scan: &crate::manifest::Scan, problems: &mut Vec<Problem>) -> Vec<String> {
    let mut trouble = Vec::new();
    for (path, e) in &scan.errors {
        let kind = match e {
            ManifestError::Symlink { .. } => ProblemKind::Symlink,
            ManifestError::NotRegular { .. } => ProblemKind::SpecialFile,
            ManifestError::BadName { .. } | ManifestError::NotUtf8(_) => ProblemKind::BadName,
            _ => ProblemKind::Unreadable,
        };
        let detail = match e {
            ManifestError::Io { source, .. } => source.to_string(),
            ManifestError::Symlink { .. } => "not allowed in a signed directory".to_string(),
            _ => String::new(),
        };
        problems.push(Problem::new(kind, path.clone(), detail));
        trouble.push(path.clone());
    }
    trouble
}

/// Every file added, removed or changed since signing.
fn compare_files(
    signed: &Manifest,
    now: &Manifest,
    trouble: &[String],
    problems: &mut Vec<Problem>,
) {
    let covered = |p: &str| {
        trouble.iter().any(|t| {
            p == t || (p.starts_with(t.as_str()) && p.as_bytes().get(t.len()) == Some(&b'/'))
        })
    };
    for c in signed.diff(now) {
        match c {
            Change::Added(p) => problems.push(Problem::new(
                ProblemKind::Added,
                p,
                "not in the signed manifest",
            )),
            // Already reported as unreadable / a symlink / ...
            Change::Removed(p) if covered(&p) => {}
            Change::Removed(p) => {
                let mut pr = Problem::new(ProblemKind::Removed, p.as_str(), "");
                pr.was = signed.get(&p).map(|e| FileDigest {
                    size: e.size,
                    sha256: e.sha256_hex(),
                });
                problems.push(pr);
            }
            Change::Modified {
                path,
                old_size,
                new_size,
                old_sha256,
                new_sha256,
            } => {
                let mut pr = Problem::new(ProblemKind::Modified, path, "");
                pr.was = Some(FileDigest {
                    size: old_size,
                    sha256: hex::encode(old_sha256),
                });
                pr.now = Some(FileDigest {
                    size: new_size,
                    sha256: hex::encode(new_sha256),
                });
                problems.push(pr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ed25519 public key's base64 blob, for allowed_signers lines.
    const ED25519_KEY: &str =
        "AAAAC3NzaC1lZDI1NTE5AAAAIGwwKsRGuEKbR3EAAG5cP/CsDyfTTNwi2tCCF8DQc92s";

    #[test]
    fn allowed_signers_forms() {
        let k = ED25519_KEY;
        let text = format!(
            "# comment\n\
             alice@example.org ssh-ed25519 {k} laptop\n\
             bob,carol namespaces=\"git,referee\" ssh-ed25519 {k}\n\
             \"dave\" cert-authority,namespaces=\"*\" ssh-ed25519 {k}\n\
             eve valid-after=\"20240101\" ssh-ed25519 {k}\n\
             frank namespaces=\"git\" ssh-ed25519 {k}\n\
             gina namespaces=\"*,!referee\" ssh-ed25519 {k}\n\
             hal ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7\n"
        );
        let s = AllowedSigners::parse(&text).unwrap();
        assert_eq!(s.signers.len(), 7);
        assert_eq!(s.signers[1].principals, ["bob", "carol"]);
        assert_eq!(s.signers[2].principals, ["dave"]);
        let key = s.signers[0].key.clone().unwrap();
        assert_eq!(
            s.lookup(&key, NAMESPACE),
            Lookup::Trusted(vec![
                "alice@example.org".into(),
                "bob".into(),
                "carol".into()
            ])
        );
        match s.lookup(&key, "other") {
            Lookup::Trusted(p) => assert_eq!(p, ["alice@example.org", "gina"]),
            l => panic!("{l:?}"),
        }
        let only_restricted = AllowedSigners {
            source: String::new(),
            signers: s.signers[2..6].to_vec(),
        };
        match only_restricted.lookup(&key, NAMESPACE) {
            Lookup::NotListed(notes) => assert_eq!(notes.len(), 4, "{notes:?}"),
            l => panic!("{l:?}"),
        }
        for bad in [
            "alice",
            "alice ssh-ed25519",
            "alice ssh-ed25519 AAAAnotakey",
            "alice namespaces=\"referee ssh-ed25519 AAAA",
            "alice foo bar",
        ] {
            assert!(AllowedSigners::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pinned_signer_or_an_allowed_signers_line_is_trusted_and_no_other_key() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("pkg");
        fs::create_dir_all(&tree).unwrap();
        fs::write(tree.join("a.txt"), "a").unwrap();
        let k1 = keygen(&t.path().join("k1"), "alice at acme", false).unwrap();
        let k2 = keygen(&t.path().join("k2"), "bob", false).unwrap();
        sign_dir(&tree, &t.path().join("k1")).unwrap();
        let unchecked = verify_dir_trusting(&tree, &Trust::Unchecked).unwrap();
        assert!(unchecked.ok && !unchecked.signers_checked);
        assert!(
            unchecked
                .to_string()
                .contains("not checked against a trusted signer"),
            "{unchecked}"
        );
        let pinned = verify_dir_trusting(&tree, &Trust::Fingerprint(k1.fingerprint.clone()));
        let pinned = pinned.unwrap();
        assert!(pinned.ok && pinned.signers_checked, "{pinned}");
        let other = verify_dir_trusting(&tree, &Trust::Fingerprint(k2.fingerprint.clone()));
        let other = other.unwrap();
        assert!(!other.ok);
        assert_eq!(other.problems[0].kind, ProblemKind::UnknownKey);
        // keygen's allowed_signers line is a valid line that trusts the key.
        assert!(
            k1.allowed_signers_line
                .starts_with("alice_at_acme namespaces=\"referee\" ssh-ed25519 ")
        );
        let file = t.path().join("allowed_signers");
        fs::write(&file, format!("{}\n", k1.allowed_signers_line)).unwrap();
        let listed = verify_dir_trusting(&tree, &Trust::AllowedSigners(file)).unwrap();
        assert!(listed.ok && listed.signers_checked, "{listed}");
        assert_eq!(listed.principals, ["alice_at_acme"]);
        assert!(parse_fingerprint("SHA256:short").is_err());
        assert!(parse_fingerprint("MD5:aa").is_err());
        assert!(parse_fingerprint(&k1.fingerprint).is_ok());
    }

    #[test]
    fn pattern_lists() {
        assert!(match_pattern_list("referee", "referee"));
        assert!(match_pattern_list("referee", "git,ref*"));
        assert!(match_pattern_list("referee", "r?feree"));
        assert!(!match_pattern_list("referee", "git"));
        assert!(!match_pattern_list("referee", "*,!referee"));
        // Every character must match, not only the length.
        assert!(!match_pattern_list("referee", "referex"));
        assert!(!match_pattern_list("referee", "r?ferex"));
        assert!(!match_pattern_list("referee", "*x"));
        assert!(!match_pattern_list("", "?"));
        assert!(match_pattern_list("", "*"));
        assert!(match_pattern_list("referee", "*e*e"));
    }

    #[test]
    fn signer_lines_keep_quoted_spaces_and_read_every_option() {
        let k = ED25519_KEY;
        assert_eq!(
            next_token("  \"a b\" rest"),
            Some(("\"a b\"".to_string(), " rest"))
        );
        let s = AllowedSigners::parse(&format!(
            "\"ann lee\" namespaces=\"a b,referee\" ssh-ed25519 {k}\n\
             bo cert-authority ssh-ed25519 {k}\n\
             cy valid-before=\"1\",verify-required ssh-ed25519 {k}\n"
        ))
        .unwrap();
        assert_eq!(s.signers[0].principals, ["ann lee"]);
        assert_eq!(s.signers[0].namespaces.as_deref(), Some("a b,referee"));
        assert!(s.signers[1].cert_authority && s.signers[1].unsupported.is_none());
        assert!(!s.signers[0].cert_authority);
        // The first option referee does not support is the one it names.
        assert_eq!(s.signers[2].unsupported.as_deref(), Some("valid-before"));
        assert_eq!(
            split_options("a,b=\"x,y\",c").unwrap(),
            ["a", "b=\"x,y\"", "c"]
        );
        assert!(split_options("a,,b").is_err());
        assert!(split_options("a=\"x").is_err());
    }

    #[test]
    fn fingerprints_are_sha256_and_43_base64_characters() {
        let b64 = "A".repeat(43);
        assert!(parse_fingerprint(&format!("SHA256:{b64}")).is_ok());
        assert!(parse_fingerprint(&format!("SHA256:{}+/", "A".repeat(41))).is_ok());
        assert!(parse_fingerprint(&format!("SHA256:{}", "A".repeat(42))).is_err());
        assert!(parse_fingerprint(&format!("SHA256:{}=", "A".repeat(42))).is_err());
        assert!(parse_fingerprint(&format!("SHA256:{}-", "A".repeat(42))).is_err());
    }

    #[test]
    fn an_organisation_is_allowed_only_by_a_principal_that_names_it() {
        let p = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(principals_allow(&p(&["acme"]), "acme"));
        assert!(!principals_allow(&p(&["acme"]), "acm"));
        assert!(!principals_allow(&p(&["acme"]), "acme2"));
        assert!(!principals_allow(&p(&["acme"]), ""));
        assert!(principals_allow(&p(&["other", "Acme_Corp"]), "Acme Corp"));
        assert!(principals_allow(&p(&["acme-*"]), "acme-labs"));
        assert!(!principals_allow(&p(&["acme-*,!acme-evil"]), "acme-evil"));
        assert!(!principals_allow(&[], "acme"));
    }

    #[test]
    fn allowed_signers_lines_never_split_the_principal() {
        let l = allowed_signers_line("a b\"c,d\te", "ssh-ed25519 AAAA x");
        assert!(l.starts_with("a_b_c_d_e namespaces=\"referee\" "), "{l}");
    }

    #[test]
    fn problems_print_what_changed() {
        let mut p = Problem::new(ProblemKind::Modified, "a/b.txt", "");
        let d = |size, h: &str| FileDigest {
            size,
            sha256: h.into(),
        };
        p.was = Some(d(1, "aa"));
        p.now = Some(d(2, "bb"));
        assert_eq!(
            p.to_string(),
            "changed: a/b.txt (size was 1, now 2; sha256 was aa, now bb)"
        );
        p.now = Some(d(1, "bb"));
        assert_eq!(p.to_string(), "changed: a/b.txt (sha256 was aa, now bb)");
        let q = Problem::new(ProblemKind::Added, "c", "");
        assert_eq!(q.to_string(), "added: c");
        let r = Problem::new(ProblemKind::Symlink, "l", "not allowed");
        assert_eq!(r.to_string(), "symlink: l (not allowed)");
    }

    /// What a tree holds that cannot be signed is reported once, by kind;
    /// the files under such a directory are not also reported removed, but
    /// a file whose name only starts with the directory's is. (Linux: other
    /// systems refuse a name that is not UTF-8.)
    #[cfg(target_os = "linux")]
    #[test]
    fn verification_names_each_kind_of_tampering_once() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("pkg");
        fs::create_dir_all(tree.join("d")).unwrap();
        for f in ["a.txt", "d/x", "d2", "z"] {
            fs::write(tree.join(f), f).unwrap();
        }
        keygen(&t.path().join("k"), "k", false).unwrap();
        sign_dir(&tree, &t.path().join("k")).unwrap();
        let clean = verify_dir_trusting(&tree, &Trust::Unchecked).unwrap();
        assert!(clean.ok, "{clean:?}");
        // The directory `d` becomes a symlink, `d2` goes, `z` (the last
        // path) goes, a FIFO and a file with a non-UTF-8 name appear.
        fs::remove_dir_all(tree.join("d")).unwrap();
        std::os::unix::fs::symlink(t.path(), tree.join("d")).unwrap();
        fs::remove_file(tree.join("d2")).unwrap();
        fs::remove_file(tree.join("z")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(tree.join("p"))
            .status()
            .unwrap();
        assert!(fifo.success());
        use std::os::unix::ffi::OsStrExt;
        fs::write(tree.join(std::ffi::OsStr::from_bytes(b"bad\xff")), "x").unwrap();
        let r = verify_dir_trusting(&tree, &Trust::Unchecked).unwrap();
        let of = |k| r.of_kind(k).map(|p| p.path.clone()).collect::<Vec<_>>();
        assert_eq!(of(ProblemKind::Symlink), ["d"], "{r:?}");
        let link = r.of_kind(ProblemKind::Symlink).next().unwrap();
        assert!(link.detail.contains("not allowed"), "{link:?}");
        assert_eq!(of(ProblemKind::SpecialFile), ["p"], "{r:?}");
        assert_eq!(of(ProblemKind::BadName).len(), 1, "{r:?}");
        assert_eq!(of(ProblemKind::Removed), ["d2", "z"], "{r:?}");
        assert!(of(ProblemKind::Unreadable).is_empty(), "{r:?}");
        let removed = r.of_kind(ProblemKind::Removed).next().unwrap();
        assert_eq!(removed.was.as_ref().map(|w| w.size), Some(2));
    }

    #[test]
    fn an_unreadable_manifest_is_unreadable_not_missing() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join(MANIFEST_FILE)).unwrap();
        let r = verify_dir_trusting(t.path(), &Trust::Unchecked).unwrap();
        assert!(!r.ok);
        let unreadable: Vec<_> = r.of_kind(ProblemKind::Unreadable).collect();
        assert_eq!(unreadable.len(), 1, "{r:?}");
        assert_eq!(unreadable[0].path, MANIFEST_FILE);
        assert_eq!(r.of_kind(ProblemKind::MissingManifest).count(), 0);
        assert_eq!(r.of_kind(ProblemKind::MissingSignature).count(), 1);
    }

    #[test]
    fn atomic_writes_refuse_to_clobber_unless_asked() {
        let t = tempfile::tempdir().unwrap();
        let dest = t.path().join("f");
        write_atomic(&dest, b"one", 0o600, false).unwrap();
        assert!(matches!(
            write_atomic(&dest, b"two", 0o600, false),
            Err(SignError::Exists(p)) if p == dest
        ));
        assert_eq!(fs::read(&dest).unwrap(), b"one");
        write_atomic(&dest, b"two", 0o600, true).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"two");
    }
}
