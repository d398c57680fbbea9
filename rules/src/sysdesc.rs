//! System-description JSON (`systems/SYSTEM.json`): the 33 required fields
//! and the allowed `status` values.
//!
//! Official behaviour kept: presence only (any value); for training with
//! ruleset major ≥ 4 an invalid `status` makes the check fail. The official
//! message list is *replaced* by the status message (missing fields are then
//! not mentioned); referee reports every problem and notes the official
//! wording on the status diagnostic.

use crate::diag::Diagnostic;
use crate::ruleset_facts::{SYSTEM_REQUIRED_FIELDS, SYSTEM_STATUS_VALUES};
use serde_json::Value as Json;
use std::path::Path;

/// A parsed system description.
#[derive(Debug, Clone)]
pub struct SystemDesc {
    /// File stem (the system id used in `results/`).
    pub id: String,
    pub json: serde_json::Map<String, Json>,
}

impl SystemDesc {
    pub fn load(path: &Path) -> Result<Self, Box<Diagnostic>> {
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        // A file of the package: a regular file of configuration size, not
        // a link (see crate::untrusted).
        let text = crate::untrusted::read_to_string(
            path,
            crate::untrusted::FileKind::Config,
            crate::untrusted::Links::Refuse,
        )
        .map_err(|e| {
            let e = e.into_io();
            Box::new(
                Diagnostic::error("system-description", format!("cannot read: {e}"))
                    .rule("system-description", None)
                    .file(path.display().to_string()),
            )
        })?;
        let v: Json = serde_json::from_str(&text).map_err(|e| {
            Box::new(
                Diagnostic::error("system-description", format!("invalid JSON: {e}"))
                    .rule("system-description", None)
                    .file(path.display().to_string())
                    .line(e.line())
                    .expected("a JSON object"),
            )
        })?;
        match v {
            Json::Object(json) => Ok(SystemDesc { id, json }),
            other => Err(Box::new(
                Diagnostic::error(
                    "system-description",
                    format!("top level is {} where an object was expected", kind(&other)),
                )
                .rule("system-description", None)
                .file(path.display().to_string()),
            )),
        }
    }

    /// A field as text (strings as is, numbers in JSON form).
    pub fn text(&self, field: &str) -> Option<String> {
        self.json.get(field).map(|v| match v {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        })
    }

    /// A field as an integer (strings are parsed, as the summarizer does).
    pub fn int(&self, field: &str) -> Option<i64> {
        int_field(self.json.get(field)?)
    }
}

/// A system description's field as an integer: a JSON integer, or a
/// string that parses as one (as the summarizer reads them).
pub fn int_field(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Check one system description; diagnostics name the file. `status_rule`:
/// the `status` value is checked (see `RulesetFacts::status_rule_applies`).
pub fn check(desc: &SystemDesc, path: &Path, status_rule: bool) -> Vec<Diagnostic> {
    let file = path.display().to_string();
    let mut out = Vec::new();
    let missing: Vec<&str> = SYSTEM_REQUIRED_FIELDS
        .iter()
        .copied()
        .filter(|f| !desc.json.contains_key(*f))
        .collect();
    for f in &missing {
        out.push(
            Diagnostic::error("system-description", format!("missing field `{f}`"))
                .rule("system-description", None)
                .key(*f)
                .file(file.clone())
                .expected(format!(
                    "all {} required fields",
                    SYSTEM_REQUIRED_FIELDS.len()
                ))
                .found(format!("no `{f}`"))
                .official(format!("Missing field {f}")),
        );
    }
    if status_rule && let Some(status) = desc.json.get("status") {
        let ok = matches!(status, Json::String(s) if SYSTEM_STATUS_VALUES.contains(&s.as_str()));
        if !ok {
            let shown = match status {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut d = Diagnostic::error(
                "system-description",
                format!("field `status` has an invalid value `{shown}`"),
            )
            .rule("system-description", None)
            .key("status")
            .file(file.clone())
            .expected(format!("one of {}", SYSTEM_STATUS_VALUES.join(" | ")))
            .found(shown.clone())
            .official(format!(
                "Field status contains a non valid value: {shown}, must be one of [{}]",
                SYSTEM_STATUS_VALUES.map(|s| format!("'{s}'")).join(", ")
            ));
            if !missing.is_empty() {
                d.message.push_str(" (the official checker reports only this and drops the missing-field messages)");
            }
            out.push(d);
        }
    }
    out
}
