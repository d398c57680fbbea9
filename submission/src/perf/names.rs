//! How `referee perf` compares names (models, systems, tasks) written by
//! different people: `llama3_8b` = `LLAMA3-8B`. A leaf: it knows no other
//! part of `perf`.

/// Names compared: lower case, letters and digits only.
pub fn normalise(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
