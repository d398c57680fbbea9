//! A minimal stand-in for `referee keygen/sign/verify`, built on the library
//! alone (used by scripts/bench-sign.sh when the harness CLI is not wired).
//!
//! ```text
//! referee-sign keygen PATH [COMMENT]
//! referee-sign sign DIR KEY
//! referee-sign verify DIR [ALLOWED_SIGNERS]
//! ```
//! Exit codes as the real CLI: 0 ok, 1 verification failed, 2 usage/I/O.

use referee_submission::sign;
use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let threads = rayon::current_num_threads();
    let t0 = Instant::now();
    let code = match a.as_slice() {
        ["keygen", out, rest @ ..] => {
            let comment = rest.first().copied().unwrap_or("referee");
            match sign::keygen(Path::new(out), comment, false) {
                Ok(k) => {
                    println!("key fingerprint {}", k.fingerprint);
                    0
                }
                Err(e) => fail(e),
            }
        }
        ["sign", dir, key] => match sign::sign_dir(Path::new(dir), Path::new(key)) {
            Ok(s) => {
                let secs = t0.elapsed().as_secs_f64();
                println!(
                    "SIGNED {dir} ({} files, {} bytes, {secs:.3} s, {threads} threads, key {})",
                    s.files, s.bytes, s.key_fingerprint
                );
                0
            }
            Err(e) => fail(e),
        },
        ["verify", dir, rest @ ..] => {
            match sign::verify_dir(Path::new(dir), rest.first().map(Path::new)) {
                Ok(r) => {
                    println!("{r}");
                    println!(
                        "({} bytes, {:.3} s, {threads} threads)",
                        r.bytes,
                        t0.elapsed().as_secs_f64()
                    );
                    if r.ok { 0 } else { 1 }
                }
                Err(e) => fail(e),
            }
        }
        _ => {
            eprintln!(
                "usage: referee-sign keygen PATH [COMMENT] | sign DIR KEY | verify DIR [ALLOWED_SIGNERS]"
            );
            2
        }
    };
    std::process::exit(code);
}

fn fail(e: impl std::fmt::Display) -> i32 {
    eprintln!("referee-sign: error: {e}");
    2
}
