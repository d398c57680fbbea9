//! End-to-end tests of manifests, signing and verification, including
//! interoperability with OpenSSH's `ssh-keygen -Y`.

use referee_submission::manifest::{Manifest, ManifestError};
use referee_submission::sign::{
    self, ProblemKind, VerifyReport, keygen, public_key_path, sign_dir, verify_dir,
};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::TempDir;

const UNICODE_NAME: &str = "docs/résumé – ü 日本.txt";
const BIG: &str = "data/weights.bin";
const EMPTY: &str = "results/sys/bench/empty.log";

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

/// A small tree shaped like a submission package.
fn make_tree(root: &Path) {
    for i in 0..4 {
        write(
            root,
            &format!("results/sys/bench/result_{i}.txt"),
            format!(":::MLLOG {{\"key\": \"run_stop\", \"value\": {i}}}\n").as_bytes(),
        );
    }
    write(root, EMPTY, b"");
    write(root, "systems/sys.json", br#"{"submitter": "x"}"#);
    write(root, "code/bench/README.md", b"# bench\n");
    write(root, "code/bench/with space.py", b"print(1)\n");
    write(root, UNICODE_NAME, "unicode ✓\n".as_bytes());
    // Named like the manifest, but not at the top: listed like any file.
    write(root, "code/MANIFEST", b"not the real one\n");
    let mut big = Vec::with_capacity(1 << 20);
    let mut x: u32 = 0x1234_5678;
    while big.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        big.extend_from_slice(&x.to_le_bytes());
    }
    write(root, BIG, &big);
}

/// Relative paths of every regular file under `root`, sorted.
fn all_files(root: &Path) -> Vec<String> {
    fn rec(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                rec(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_str().unwrap();
                out.push(rel.replace('\\', "/"));
            }
        }
    }
    let mut v = Vec::new();
    rec(root, root, &mut v);
    v.sort();
    v
}

fn copy_tree(from: &Path, to: &Path) {
    for rel in all_files(from) {
        let dst = to.join(&rel);
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        fs::copy(from.join(&rel), dst).unwrap();
    }
}

/// Flip one bit of the middle byte; an empty file gets one byte instead.
fn flip_one_byte(p: &Path) {
    let mut b = fs::read(p).unwrap();
    if b.is_empty() {
        b.push(b'x');
    } else {
        let i = b.len() / 2;
        b[i] ^= 0x01;
    }
    fs::write(p, b).unwrap();
}

struct Fixture {
    _tmp: TempDir,
    tree: PathBuf,
    key: PathBuf,
    fingerprint: String,
}

fn signed_fixture() -> Fixture {
    let tmp = TempDir::new().unwrap();
    let tree = tmp.path().join("pkg");
    make_tree(&tree);
    let key = tmp.path().join("keys/id_referee");
    fs::create_dir_all(key.parent().unwrap()).unwrap();
    let info = keygen(&key, "tester@referee", false).unwrap();
    let summary = sign_dir(&tree, &key).unwrap();
    assert_eq!(summary.key_fingerprint, info.fingerprint);
    Fixture {
        _tmp: tmp,
        tree,
        key,
        fingerprint: info.fingerprint,
    }
}

fn verify(dir: &Path, signers: Option<&Path>) -> VerifyReport {
    verify_dir(dir, signers).unwrap()
}

fn kinds(r: &VerifyReport) -> Vec<(ProblemKind, String)> {
    r.problems
        .iter()
        .map(|p| (p.kind, p.path.clone()))
        .collect()
}

#[test]
fn sign_then_verify_is_ok() {
    let f = signed_fixture();
    let r = verify(&f.tree, None);
    assert!(r.ok, "{r}");
    assert!(r.problems.is_empty());
    assert_eq!(r.files, 11);
    assert_eq!(r.key_fingerprint.as_deref(), Some(f.fingerprint.as_str()));
    assert!(f.fingerprint.starts_with("SHA256:"));
    assert!(!r.signers_checked);
    let text = r.to_string();
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            "VERIFIED {} (11 files, key {})",
            f.tree.display(),
            f.fingerprint
        )
    );
    assert!(text.contains("not checked against a trusted signer"));

    // The manifest on disk is the canonical text of the tree.
    let on_disk = fs::read_to_string(f.tree.join("MANIFEST")).unwrap();
    let rebuilt = Manifest::build(&f.tree).unwrap();
    assert_eq!(on_disk, rebuilt.to_text());
    assert_eq!(Manifest::parse(&on_disk).unwrap(), rebuilt);
    assert!(on_disk.starts_with("referee-manifest v1\n"));
    assert!(on_disk.ends_with('\n'));
    assert!(!on_disk.contains('\r'));
    assert!(on_disk.contains(&format!("  {UNICODE_NAME}\n")));
    assert!(on_disk.contains(&format!(
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  {EMPTY}\n"
    )));
    assert!(on_disk.contains(&format!("  1048576  {BIG}\n")));
    assert!(on_disk.contains("  code/MANIFEST\n"));
    let paths: Vec<&str> = rebuilt.entries().iter().map(|e| e.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(paths, sorted);
    assert!(!paths.contains(&"MANIFEST") && !paths.contains(&"MANIFEST.sig"));

    let sig = fs::read_to_string(f.tree.join("MANIFEST.sig")).unwrap();
    assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----\n"));
    assert!(sig.ends_with("-----END SSH SIGNATURE-----\n"));

    // Signing again gives the same manifest and still verifies; no temp
    // files are left behind.
    sign_dir(&f.tree, &f.key).unwrap();
    assert_eq!(
        fs::read_to_string(f.tree.join("MANIFEST")).unwrap(),
        on_disk
    );
    assert!(verify(&f.tree, None).ok);
    assert_eq!(all_files(&f.tree).len(), 13);
}

#[test]
fn flipping_any_byte_of_any_file_is_caught_and_named() {
    let f = signed_fixture();
    let files = all_files(&f.tree);
    assert_eq!(files.len(), 13);
    for rel in &files {
        let tmp = TempDir::new().unwrap();
        copy_tree(&f.tree, tmp.path());
        assert!(verify(tmp.path(), None).ok, "copy of the tree must verify");
        flip_one_byte(&tmp.path().join(rel));
        let r = verify(tmp.path(), None);
        assert!(!r.ok, "flipping a byte of {rel} went unnoticed");
        let text = r.to_string();
        assert!(
            text.lines()
                .last()
                .unwrap()
                .starts_with(&format!("FAILED {}: ", tmp.path().display())),
            "{text}"
        );
        if rel == "MANIFEST" || rel == "MANIFEST.sig" {
            assert!(
                r.of_kind(ProblemKind::BadSignature).count() == 1,
                "{rel}: expected a signature problem, got {:?}",
                kinds(&r)
            );
            assert!(text.contains("bad signature: MANIFEST"), "{text}");
        } else {
            assert_eq!(
                kinds(&r),
                vec![(ProblemKind::Modified, rel.clone())],
                "{rel}"
            );
            let p = &r.problems[0];
            assert_ne!(p.was, p.now);
            assert!(
                text.starts_with(&format!("changed: {rel} (")),
                "{rel}: {text}"
            );
            assert!(text.contains(&p.was.as_ref().unwrap().sha256));
            assert!(text.contains(&p.now.as_ref().unwrap().sha256));
            assert_eq!(r.key_fingerprint.as_deref(), Some(f.fingerprint.as_str()));
        }
    }
}

#[test]
fn every_byte_of_the_signature_matters() {
    let f = signed_fixture();
    let manifest = fs::read(f.tree.join("MANIFEST")).unwrap();
    let sig = fs::read(f.tree.join("MANIFEST.sig")).unwrap();
    assert!(sign::verify_bytes(&manifest, &sig).is_ok());
    for i in 0..sig.len() {
        let mut s = sig.clone();
        s[i] ^= 0x01;
        assert!(
            sign::verify_bytes(&manifest, &s).is_err(),
            "flip at byte {i} ({:?}) of MANIFEST.sig accepted",
            sig[i] as char
        );
    }
    for i in 0..manifest.len() {
        let mut m = manifest.clone();
        m[i] ^= 0x01;
        assert!(sign::verify_bytes(&m, &sig).is_err(), "flip at {i}");
    }
}

#[test]
fn removed_and_added_files_are_named() {
    let f = signed_fixture();

    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    fs::remove_file(tmp.path().join(UNICODE_NAME)).unwrap();
    let r = verify(tmp.path(), None);
    assert_eq!(kinds(&r), vec![(ProblemKind::Removed, UNICODE_NAME.into())]);
    assert!(
        r.to_string()
            .starts_with(&format!("removed: {UNICODE_NAME}"))
    );

    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    write(tmp.path(), "results/sys/bench/result_4.txt", b"extra\n");
    write(tmp.path(), "new dir/x", b"");
    let r = verify(tmp.path(), None);
    assert_eq!(
        kinds(&r),
        vec![
            (ProblemKind::Added, "new dir/x".into()),
            (ProblemKind::Added, "results/sys/bench/result_4.txt".into()),
        ]
    );
    let text = r.to_string();
    assert!(text.contains("added: results/sys/bench/result_4.txt"));
    assert!(text.ends_with(&format!("FAILED {}: 2 problems", tmp.path().display())));

    // A whole directory gone: each file is named.
    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    fs::remove_dir_all(tmp.path().join("code")).unwrap();
    let r = verify(tmp.path(), None);
    assert_eq!(
        kinds(&r),
        vec![
            (ProblemKind::Removed, "code/MANIFEST".into()),
            (ProblemKind::Removed, "code/bench/README.md".into()),
            (ProblemKind::Removed, "code/bench/with space.py".into()),
        ]
    );
}

#[test]
fn missing_manifest_or_signature() {
    let f = signed_fixture();
    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    fs::remove_file(tmp.path().join("MANIFEST.sig")).unwrap();
    let r = verify(tmp.path(), None);
    assert_eq!(
        kinds(&r),
        vec![(ProblemKind::MissingSignature, "MANIFEST.sig".into())]
    );
    fs::remove_file(tmp.path().join("MANIFEST")).unwrap();
    let r = verify(tmp.path(), None);
    assert_eq!(
        kinds(&r),
        vec![
            (ProblemKind::MissingManifest, "MANIFEST".into()),
            (ProblemKind::MissingSignature, "MANIFEST.sig".into()),
        ]
    );
    // Not a directory / no such directory: the check cannot run at all.
    assert!(verify_dir(&tmp.path().join("nope"), None).is_err());
    assert!(verify_dir(&f.tree.join("systems/sys.json"), None).is_err());
}

#[test]
fn unknown_key_and_allowed_signers() {
    let f = signed_fixture();
    let dir = f.key.parent().unwrap();
    let pub1 = fs::read_to_string(public_key_path(&f.key)).unwrap();
    let signers1 = dir.join("allowed_signers_1");
    fs::write(&signers1, format!("alice@example.org {pub1}")).unwrap();

    // Signed by the listed key: ok, with the principal.
    let r = verify(&f.tree, Some(&signers1));
    assert!(r.ok, "{r}");
    assert!(r.signers_checked);
    assert_eq!(r.principals, ["alice@example.org"]);
    assert!(r.to_string().ends_with(", signer alice@example.org)"));

    // namespaces="referee" form, several principals, comments.
    let signers_ns = dir.join("allowed_signers_ns");
    fs::write(
        &signers_ns,
        format!("# auditors\n\nalice,bob namespaces=\"referee\" {pub1}"),
    )
    .unwrap();
    let r = verify(&f.tree, Some(&signers_ns));
    assert!(r.ok, "{r}");
    assert_eq!(r.principals, ["alice", "bob"]);

    // Listed for another namespace only: not trusted.
    let signers_git = dir.join("allowed_signers_git");
    fs::write(&signers_git, format!("alice namespaces=\"git\" {pub1}")).unwrap();
    let r = verify(&f.tree, Some(&signers_git));
    assert_eq!(
        kinds(&r),
        vec![(ProblemKind::UnknownKey, "MANIFEST.sig".into())]
    );

    // Re-signed with another key.
    let key2 = dir.join("other");
    let info2 = keygen(&key2, "mallory", false).unwrap();
    assert_ne!(info2.fingerprint, f.fingerprint);
    sign_dir(&f.tree, &key2).unwrap();
    let r = verify(&f.tree, None);
    assert!(
        r.ok,
        "a valid signature by any key verifies without a signers file"
    );
    assert_eq!(
        r.key_fingerprint.as_deref(),
        Some(info2.fingerprint.as_str())
    );

    let r = verify(&f.tree, Some(&signers1));
    assert!(!r.ok);
    assert_eq!(
        kinds(&r),
        vec![(ProblemKind::UnknownKey, "MANIFEST.sig".into())]
    );
    let text = r.to_string();
    assert!(text.starts_with("unknown key: MANIFEST.sig"), "{text}");
    assert!(text.contains(&info2.fingerprint), "{text}");
    assert_eq!(
        r.key_fingerprint.as_deref(),
        Some(info2.fingerprint.as_str())
    );

    // A malformed allowed_signers file is an error naming the line.
    let bad = dir.join("allowed_signers_bad");
    fs::write(&bad, format!("{pub1}\nalice ssh-ed25519 AAAAbroken\n")).unwrap();
    let e = verify_dir(&f.tree, Some(&bad)).unwrap_err().to_string();
    assert!(e.contains("line 1") || e.contains("line 2"), "{e}");
    assert!(verify_dir(&f.tree, Some(&dir.join("absent"))).is_err());
}

#[test]
fn report_serializes_to_json() {
    let f = signed_fixture();
    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    flip_one_byte(&tmp.path().join("results/sys/bench/result_3.txt"));
    let r = verify(tmp.path(), None);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["key_fingerprint"], f.fingerprint.as_str());
    assert_eq!(v["problems"][0]["kind"], "modified");
    assert_eq!(v["problems"][0]["path"], "results/sys/bench/result_3.txt");
    assert_eq!(
        v["problems"][0]["was"]["sha256"].as_str().unwrap().len(),
        64
    );
    assert_eq!(
        v["problems"][0]["now"]["size"],
        v["problems"][0]["was"]["size"]
    );
}

#[cfg(unix)]
#[test]
fn symlinks_are_refused_by_name() {
    let f = signed_fixture();
    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    std::os::unix::fs::symlink("../data/weights.bin", tmp.path().join("code/link.bin")).unwrap();
    let e = sign_dir(tmp.path(), &f.key).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("code/link.bin"), "{msg}");
    assert!(msg.contains("symbolic link"), "{msg}");
    // Nothing was (re)written.
    assert_eq!(
        fs::read(tmp.path().join("MANIFEST")).unwrap(),
        fs::read(f.tree.join("MANIFEST")).unwrap()
    );
    // Verification names it too.
    let r = verify(tmp.path(), None);
    assert_eq!(
        kinds(&r),
        vec![(ProblemKind::Symlink, "code/link.bin".into())]
    );

    // A symlinked directory as well.
    let tmp = TempDir::new().unwrap();
    make_tree(tmp.path());
    std::os::unix::fs::symlink("results", tmp.path().join("alias")).unwrap();
    match Manifest::build(tmp.path()) {
        Err(ManifestError::Symlink { path }) => assert_eq!(path, "alias"),
        other => panic!("{other:?}"),
    }
}

#[cfg(unix)]
#[test]
fn bad_file_names_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = TempDir::new().unwrap();
    write(tmp.path(), "ok.txt", b"1");
    write(tmp.path(), "dir/new\nline", b"1");
    let e = Manifest::build(tmp.path()).unwrap_err();
    assert!(
        matches!(&e, ManifestError::BadName { path } if path == "dir/new\nline"),
        "{e}"
    );
    assert!(e.to_string().contains("control character"));

    let tmp = TempDir::new().unwrap();
    write(tmp.path(), "tab\there", b"1");
    assert!(matches!(
        Manifest::build(tmp.path()),
        Err(ManifestError::BadName { .. })
    ));

    let tmp = TempDir::new().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    fs::write(tmp.path().join(name), b"1").unwrap();
    let e = Manifest::build(tmp.path()).unwrap_err();
    assert!(matches!(e, ManifestError::NotUtf8(_)), "{e}");
    assert!(e.to_string().contains("not valid UTF-8"));
}

#[cfg(unix)]
#[test]
fn keygen_writes_0600_key_and_refuses_to_overwrite() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let key = tmp.path().join("id");
    let info = keygen(&key, "me@host", false).unwrap();
    let mode = fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "private key mode {mode:o}");
    let private = fs::read_to_string(&key).unwrap();
    assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
    let pubtext = fs::read_to_string(tmp.path().join("id.pub")).unwrap();
    assert!(pubtext.starts_with("ssh-ed25519 AAAA"));
    assert!(pubtext.ends_with(" me@host\n"));
    assert_eq!(pubtext.trim_end(), info.public_line);
    let pk = sign::load_public_key(&info.public_key).unwrap();
    assert_eq!(sign::fingerprint(pk.key_data()), info.fingerprint);
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        2,
        "no temp files left"
    );

    // No overwrite without force, of either file.
    assert!(matches!(
        keygen(&key, "again", false),
        Err(sign::SignError::Exists(_))
    ));
    assert_eq!(fs::read_to_string(&key).unwrap(), private);
    let key2 = tmp.path().join("id2");
    fs::write(tmp.path().join("id2.pub"), "keep me").unwrap();
    assert!(matches!(
        keygen(&key2, "x", false),
        Err(sign::SignError::Exists(_))
    ));
    assert!(!key2.exists());

    // With force: replaced, and still 0600 even if the old file was not.
    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
    let info2 = keygen(&key, "again", true).unwrap();
    assert_ne!(info2.fingerprint, info.fingerprint);
    assert_eq!(
        fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Unreadable / not-a-key inputs are errors, not panics.
    let tree = tmp.path().join("t");
    write(&tree, "a", b"a");
    assert!(sign_dir(&tree, &tmp.path().join("missing")).is_err());
    assert!(sign_dir(&tree, &tmp.path().join("id.pub")).is_err());
}

// ---------------------------------------------------------------------------
// OpenSSH interoperability
// ---------------------------------------------------------------------------

fn ssh_keygen() -> &'static str {
    let found = Command::new("ssh-keygen")
        .arg("-?")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "ssh-keygen not found: the OpenSSH interop tests need it. \
         Install openssh-client (Debian/Ubuntu: `apt-get install -y openssh-client`)."
    );
    "ssh-keygen"
}

/// `ssh-keygen -Y verify` of `dir/MANIFEST` against `dir/MANIFEST.sig`.
fn openssh_verify(dir: &Path, allowed_signers: &Path, principal: &str) -> (bool, String) {
    let out = Command::new(ssh_keygen())
        .args(["-Y", "verify", "-f"])
        .arg(allowed_signers)
        .args(["-I", principal, "-n", "referee", "-s"])
        .arg(dir.join("MANIFEST.sig"))
        .stdin(fs::File::open(dir.join("MANIFEST")).unwrap())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn openssh_accepts_referee_signatures() {
    let f = signed_fixture();
    let pub1 = fs::read_to_string(public_key_path(&f.key)).unwrap();
    let signers = f.key.parent().unwrap().join("allowed_signers");
    fs::write(&signers, format!("referee {pub1}")).unwrap();

    let (ok, out) = openssh_verify(&f.tree, &signers, "referee");
    assert!(
        ok,
        "ssh-keygen -Y verify rejected referee's signature: {out}"
    );
    assert!(out.contains("Good \"referee\" signature"), "{out}");

    // ssh-keygen computes the same fingerprint.
    let l = Command::new(ssh_keygen())
        .arg("-lf")
        .arg(public_key_path(&f.key))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&l.stdout).contains(&f.fingerprint));

    // One flipped byte in MANIFEST: OpenSSH rejects it too.
    let tmp = TempDir::new().unwrap();
    copy_tree(&f.tree, tmp.path());
    flip_one_byte(&tmp.path().join("MANIFEST"));
    let (ok, out) = openssh_verify(tmp.path(), &signers, "referee");
    assert!(!ok, "ssh-keygen accepted a tampered MANIFEST: {out}");

    // Wrong namespace: OpenSSH refuses, as referee does.
    let out = Command::new(ssh_keygen())
        .args(["-Y", "verify", "-f"])
        .arg(&signers)
        .args(["-I", "referee", "-n", "git", "-s"])
        .arg(f.tree.join("MANIFEST.sig"))
        .stdin(fs::File::open(f.tree.join("MANIFEST")).unwrap())
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn referee_accepts_openssh_signatures_and_keys() {
    let ssh = ssh_keygen();
    let tmp = TempDir::new().unwrap();
    let tree = tmp.path().join("pkg");
    make_tree(&tree);
    let key = tmp.path().join("id_ed25519");
    let st = Command::new(ssh)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "openssh-made", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    let pubkey = fs::read_to_string(public_key_path(&key)).unwrap();
    let signers = tmp.path().join("allowed_signers");
    fs::write(
        &signers,
        format!("ci@example.org namespaces=\"referee\" {pubkey}"),
    )
    .unwrap();

    // MANIFEST written by referee, signed by ssh-keygen.
    let text = Manifest::build(&tree).unwrap().to_text();
    fs::write(tree.join("MANIFEST"), &text).unwrap();
    let st = Command::new(ssh)
        .args(["-q", "-Y", "sign", "-n", "referee", "-f"])
        .arg(&key)
        .arg(tree.join("MANIFEST"))
        .status()
        .unwrap();
    assert!(st.success());
    assert!(tree.join("MANIFEST.sig").exists());
    let r = verify(&tree, Some(&signers));
    assert!(r.ok, "referee rejected an ssh-keygen signature: {r}");
    assert_eq!(r.principals, ["ci@example.org"]);
    let l = Command::new(ssh)
        .arg("-lf")
        .arg(public_key_path(&key))
        .output()
        .unwrap();
    let fp = r.key_fingerprint.clone().unwrap();
    assert!(String::from_utf8_lossy(&l.stdout).contains(&fp));

    // ssh-keygen signature in another namespace: referee refuses it.
    fs::remove_file(tree.join("MANIFEST.sig")).unwrap();
    let st = Command::new(ssh)
        .args(["-q", "-Y", "sign", "-n", "git", "-f"])
        .arg(&key)
        .arg(tree.join("MANIFEST"))
        .status()
        .unwrap();
    assert!(st.success());
    let r = verify(&tree, Some(&signers));
    assert_eq!(
        kinds(&r),
        vec![(ProblemKind::BadSignature, "MANIFEST.sig".into())]
    );
    assert!(r.to_string().contains("namespace"));

    // referee signs with the ssh-keygen-made key; both verifiers agree.
    sign_dir(&tree, &key).unwrap();
    assert!(verify(&tree, Some(&signers)).ok);
    let (ok, out) = openssh_verify(&tree, &signers, "ci@example.org");
    assert!(ok, "{out}");

    // A passphrase-protected key is refused with a clear message.
    let enc = tmp.path().join("id_enc");
    let st = Command::new(ssh)
        .args(["-q", "-t", "ed25519", "-N", "secret phrase", "-f"])
        .arg(&enc)
        .status()
        .unwrap();
    assert!(st.success());
    let e = sign_dir(&tree, &enc).unwrap_err().to_string();
    assert!(e.contains("passphrase"), "{e}");
}
