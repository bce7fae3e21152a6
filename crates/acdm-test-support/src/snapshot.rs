//! Snapshots of the wire contract (style rule: the contract is committed
//! and changed deliberately): a value is compared with its committed JSON
//! file, and `ACDM_UPDATE_SNAPSHOTS=1` rewrites the file instead, so a
//! change shows up in review as a diff of that file.

use std::path::Path;

/// The variable that makes [`assert_json`] write instead of compare.
pub const UPDATE: &str = "ACDM_UPDATE_SNAPSHOTS";

/// Compares `value`, pretty-printed, with the file at `path`; with
/// `ACDM_UPDATE_SNAPSHOTS=1` writes it there instead.
///
/// # Panics
///
/// When they differ (naming the first differing line and how to update),
/// or the file cannot be read or written.
#[track_caller]
pub fn assert_json(path: &Path, value: &serde_json::Value) {
    let mut text = match serde_json::to_string_pretty(value) {
        Ok(text) => text,
        Err(error) => panic!("snapshot {}: cannot serialise: {error}", path.display()),
    };
    text.push('\n');
    if crate::setting(UPDATE).is_some_and(|v| v == "1") {
        if let Some(folder) = path.parent()
            && let Err(error) = std::fs::create_dir_all(folder)
        {
            panic!(
                "snapshot {}: cannot create its folder: {error}",
                path.display()
            );
        }
        if let Err(error) = std::fs::write(path, &text) {
            panic!("snapshot {}: cannot write: {error}", path.display());
        }
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_else(|error| {
        panic!(
            "snapshot {} cannot be read ({error}); create it with {UPDATE}=1",
            path.display()
        )
    });
    if committed != text {
        let first = committed
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(text.lines().count()));
        panic!(
            "the wire contract changed: {} differs from what the code produces (first at line {}).\n\
             If the change is intended, run the test again with {UPDATE}=1 and commit the file.\n\
             now:\n{}",
            path.display(),
            first + 1,
            text.lines()
                .skip(first.saturating_sub(3))
                .take(12)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::assert_json;

    #[test]
    fn an_equal_value_passes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.json");
        std::fs::write(&path, "{\n  \"a\": 1\n}\n").unwrap_or_else(|e| panic!("{e}"));
        assert_json(&path, &serde_json::json!({"a": 1}));
    }

    #[test]
    #[should_panic(expected = "the wire contract changed")]
    fn a_changed_value_fails_naming_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("s.json");
        std::fs::write(&path, "{\n  \"a\": 1\n}\n").unwrap_or_else(|e| panic!("{e}"));
        assert_json(&path, &serde_json::json!({"a": 2}));
    }
}
