//! The MLLOG writer: one `:::MLLOG {json}` line per event, byte-compatible
//! with the official `mllog` library (member order namespace, time_ms,
//! event_type, key, value, metadata; `", "`/`": "` separators; ASCII-only
//! escapes; `file` and `lineno` of the calling Rust code first in
//! metadata).
//!
//! A log is written to `NAME.partial` next to its final name and published
//! by [`MlLogger::finalize`] (flush, fsync, rename, fsync of the directory),
//! so a killed run never leaves a file that looks complete. Ranks other than
//! 0 get a logger that writes nothing.

use crate::common::clock::Clock;
use referee_rules::value::{Dict, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const INTERVAL_START: &str = "INTERVAL_START";
pub const INTERVAL_END: &str = "INTERVAL_END";
pub const POINT_IN_TIME: &str = "POINT_IN_TIME";

/// Convert common Rust values into log values.
pub trait IntoValue {
    fn into_value(self) -> Value;
}
impl IntoValue for Value {
    fn into_value(self) -> Value {
        self
    }
}
impl IntoValue for bool {
    fn into_value(self) -> Value {
        Value::Bool(self)
    }
}
impl IntoValue for &str {
    fn into_value(self) -> Value {
        Value::Str(self.to_string())
    }
}
impl IntoValue for String {
    fn into_value(self) -> Value {
        Value::Str(self)
    }
}
impl IntoValue for f64 {
    fn into_value(self) -> Value {
        Value::Float(self)
    }
}
impl IntoValue for f32 {
    fn into_value(self) -> Value {
        // Log the shortest decimal of the f32, not its f64 widening.
        Value::Float(format!("{self}").parse().unwrap_or(self as f64))
    }
}
macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl IntoValue for $t {
            fn into_value(self) -> Value {
                i64::try_from(self).map(Value::Int).unwrap_or(Value::Float(self as f64))
            }
        }
    )*};
}
int_value!(u8, u16, u32, u64, usize, i32, i64);
impl IntoValue for () {
    fn into_value(self) -> Value {
        Value::None
    }
}
impl<T: IntoValue> IntoValue for Option<T> {
    fn into_value(self) -> Value {
        self.map(IntoValue::into_value).unwrap_or(Value::None)
    }
}

/// Metadata given by a call site (added after `file` and `lineno`).
pub type Metadata<'a> = &'a [(&'a str, Value)];

/// One event, before rendering.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub time_ms: u64,
    pub event_type: &'a str,
    pub key: &'a str,
    pub value: &'a Value,
    pub meta: Metadata<'a>,
}

pub struct MlLogger {
    out: Option<BufWriter<File>>,
    tmp: Option<PathBuf>,
    path: Option<PathBuf>,
    clock: Arc<dyn Clock>,
    namespace: String,
    /// Lines written, for progress and tests.
    pub lines: usize,
    error: Option<std::io::Error>,
}

impl MlLogger {
    /// A logger writing `path` (through `path.partial`).
    pub fn create(path: &Path, clock: Arc<dyn Clock>) -> std::io::Result<Self> {
        let tmp = partial_path(path);
        let f = File::create(&tmp)?;
        Ok(MlLogger {
            out: Some(BufWriter::new(f)),
            tmp: Some(tmp),
            path: Some(path.to_path_buf()),
            clock,
            namespace: String::new(),
            lines: 0,
            error: None,
        })
    }

    /// A logger that writes nothing (ranks other than 0).
    pub fn silent(clock: Arc<dyn Clock>) -> Self {
        MlLogger {
            out: None,
            tmp: None,
            path: None,
            clock,
            namespace: String::new(),
            lines: 0,
            error: None,
        }
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Render one line (without writing it).
    pub fn render(namespace: &str, ev: &Event, file: &str, lineno: u32) -> String {
        let mut m = Dict::new();
        m.insert("file".into(), Value::Str(file.to_string()));
        m.insert("lineno".into(), Value::Int(lineno as i64));
        for (k, v) in ev.meta {
            m.insert((*k).to_string(), v.clone());
        }
        let mut d = Dict::new();
        d.insert("namespace".into(), Value::Str(namespace.to_string()));
        d.insert("time_ms".into(), Value::Int(ev.time_ms as i64));
        d.insert("event_type".into(), Value::Str(ev.event_type.to_string()));
        d.insert("key".into(), Value::Str(ev.key.to_string()));
        d.insert("value".into(), ev.value.clone());
        d.insert("metadata".into(), Value::Dict(m));
        format!(":::MLLOG {}", Value::Dict(d).json_compact())
    }

    fn emit(
        &mut self,
        event_type: &str,
        key: &str,
        value: Value,
        meta: Metadata,
        at: &Location,
    ) -> u64 {
        let t = self.clock.now_ms();
        if let Some(out) = &mut self.out {
            let ev = Event {
                time_ms: t,
                event_type,
                key,
                value: &value,
                meta,
            };
            let line = Self::render(&self.namespace, &ev, at.file(), at.line());
            if let Err(e) = writeln!(out, "{line}") {
                self.error.get_or_insert(e);
            }
            self.lines += 1;
        }
        t
    }

    /// A `POINT_IN_TIME` event; returns its timestamp.
    #[track_caller]
    pub fn event(&mut self, key: &str, value: impl IntoValue, meta: Metadata) -> u64 {
        self.emit(
            POINT_IN_TIME,
            key,
            value.into_value(),
            meta,
            Location::caller(),
        )
    }

    /// An `INTERVAL_START` event (`*_start` keys).
    #[track_caller]
    pub fn start(&mut self, key: &str, value: impl IntoValue, meta: Metadata) -> u64 {
        self.emit(
            INTERVAL_START,
            key,
            value.into_value(),
            meta,
            Location::caller(),
        )
    }

    /// An `INTERVAL_END` event (`*_stop` keys).
    #[track_caller]
    pub fn end(&mut self, key: &str, value: impl IntoValue, meta: Metadata) -> u64 {
        self.emit(
            INTERVAL_END,
            key,
            value.into_value(),
            meta,
            Location::caller(),
        )
    }

    /// Push buffered lines to the partial file (so a crash loses little).
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        Ok(())
    }

    /// Publish the log: flush, fsync, rename `NAME.partial` → `NAME`, fsync
    /// the directory. Returns the final path (None for a silent logger).
    pub fn finalize(mut self) -> std::io::Result<Option<PathBuf>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let (Some(out), Some(tmp), Some(path)) =
            (self.out.take(), self.tmp.take(), self.path.take())
        else {
            return Ok(None);
        };
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        if let Some(dir) = path.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        Ok(Some(path))
    }
}

/// `result_0.txt` → `result_0.txt.partial` (does not match `result_*.txt`).
pub fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".partial");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::clock::FakeClock;

    #[test]
    fn lines_match_the_official_writer_format() {
        let render = |time_ms, event_type, key, value: &Value, file, lineno, meta: Metadata| {
            MlLogger::render(
                "",
                &Event {
                    time_ms,
                    event_type,
                    key,
                    value,
                    meta,
                },
                file,
                lineno,
            )
        };
        let line = render(
            1_700_000_000_123,
            INTERVAL_END,
            "run_stop",
            &Value::None,
            "gen.py",
            11,
            &[("status", Value::str("success"))],
        );
        assert_eq!(
            line,
            r#":::MLLOG {"namespace": "", "time_ms": 1700000000123, "event_type": "INTERVAL_END", "key": "run_stop", "value": null, "metadata": {"file": "gen.py", "lineno": 11, "status": "success"}}"#
        );
        let v = render(
            1,
            POINT_IN_TIME,
            "opt_adamw_epsilon",
            &1e-5f64.into_value(),
            "a.rs",
            1,
            &[],
        );
        assert!(v.contains(r#""value": 1e-05"#), "{v}");
        assert!(
            render(1, POINT_IN_TIME, "x", &0.1f32.into_value(), "a.rs", 1, &[])
                .contains(r#""value": 0.1,"#)
        );
    }

    #[test]
    fn finalize_is_atomic_and_records_the_call_site() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result_0.txt");
        let clock = Arc::new(FakeClock::new(1_000));
        let mut log = MlLogger::create(&path, clock.clone()).unwrap();
        log.event("seed", 7u64, &[]);
        clock.advance_ms(5);
        log.end("run_stop", (), &[("status", Value::str("success"))]);
        log.flush().unwrap();
        assert!(!path.exists(), "nothing at the final name before finalize");
        assert!(partial_path(&path).exists());
        let out = log.finalize().unwrap().unwrap();
        assert_eq!(out, path);
        assert!(!partial_path(&path).exists());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains(r#""time_ms": 1000,"#) && lines[0].contains("logger.rs"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains(r#""time_ms": 1005,"#));
        // The reader accepts what the writer writes.
        let parsed = referee_rules::mllog::read_file(&path).unwrap();
        assert_eq!(parsed.records.len(), 2);
        assert!(parsed.problems.is_empty());
        assert_eq!(
            parsed.records[1].meta("status").and_then(Value::as_str),
            Some("success")
        );
    }
}
