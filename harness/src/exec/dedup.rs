//! De-duplication of MLLOG lines: the same payload arriving on stdout and
//! in the MLLOG file (with or without a rank prefix) counts once.

use referee_rules::mllog;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

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
pub(super) struct Arrivals(HashMap<u64, Bucket, BuildHasherDefault<DigestHasher>>);

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
    pub(super) fn is_new(&mut self, payload: &[u8]) -> bool {
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

/// The payload of an MLLOG line (from its last marker, trimmed).
pub(super) fn payload(line: &[u8]) -> Option<&[u8]> {
    let pos = mllog::rfind_marker(line)?;
    let p = &line[pos..];
    let end = p
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |e| e + 1);
    Some(&p[..end])
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
}
