//! Environment variables that look like settings but are none: a name
//! under `ACDM_`, `GITLAB_` or `NEXTCLOUD_` that no setting has is most
//! likely a misspelling (`ACDM_UPSTREAM_MAX_CONECTIONS`), which would
//! otherwise be ignored without a word. The binary warns about each at
//! start, naming the closest setting.

use std::fmt;

use crate::SETTINGS;

/// The prefixes of the settings' names.
const PREFIXES: &[&str] = &["ACDM_", "GITLAB_", "NEXTCLOUD_"];

/// Names under those prefixes that are not settings and are not
/// misspellings either: read by someone else in the same environment.
/// `ACDM_CONFIG` is the command line's `--config`; `ACDM_BACKEND_URL` and
/// the identity variables are the harness client's and `acdm-tool`'s (an
/// engine may run beside the service with both sets); the others are the
/// test suites' and the benches' switches and tool locations, which CI
/// sets for the whole run.
const NOT_SETTINGS: &[&str] = &[
    "ACDM_CONFIG",
    "ACDM_BACKEND_URL",
    "ACDM_AGENT_NAME",
    "ACDM_USER_ID",
    "ACDM_THREAD_ID",
    "ACDM_TEST_DATABASE_URL",
    "ACDM_SHARED_DIR",
    "ACDM_SCREENSHOT_DIR",
    "ACDM_WSGIDAV",
    "ACDM_TS_SDK",
    "ACDM_CHROMIUM",
    "ACDM_CHROMEDRIVER",
];

/// Prefixes of the test suites' and benches' families of switches
/// (`ACDM_REQUIRE_WEBDAV`, `ACDM_UPDATE_DOCS`, `ACDM_BENCH_SECONDS`, …).
const NOT_SETTING_PREFIXES: &[&str] = &["ACDM_REQUIRE_", "ACDM_UPDATE_", "ACDM_BENCH_"];

/// A variable that is not a setting, and the setting it most resembles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    /// The variable's name.
    pub name: String,
    /// The setting with the closest name (edit distance).
    pub closest: &'static str,
}

impl fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not a setting and is ignored; did you mean {}?",
            self.name, self.closest
        )
    }
}

/// The names among `names` (an environment's) that carry a settings'
/// prefix but are neither a setting nor a known name of another reader,
/// sorted, each with its closest setting.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<UnknownVariable> {
    let mut unknown: Vec<UnknownVariable> = names
        .into_iter()
        .filter(|name| PREFIXES.iter().any(|p| name.starts_with(p)))
        .filter(|name| !SETTINGS.iter().any(|s| s.name == *name))
        .filter(|name| !NOT_SETTINGS.contains(name))
        .filter(|name| !NOT_SETTING_PREFIXES.iter().any(|p| name.starts_with(p)))
        .filter_map(|name| {
            SETTINGS
                .iter()
                .min_by_key(|s| distance(name, s.name))
                .map(|s| UnknownVariable {
                    name: name.to_owned(),
                    closest: s.name,
                })
        })
        .collect();
    unknown.sort_by(|a, b| a.name.cmp(&b.name));
    unknown.dedup();
    unknown
}

/// The edit distance between `a` and `b` (insertions, deletions,
/// substitutions and swaps of two neighbours, each 1), case-insensitive.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_uppercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_uppercase()).collect();
    // rows[i][j]: the distance between a[..i] and b[..j].
    let mut rows = vec![vec![0_usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        if let Some(first) = row.first_mut() {
            *first = i;
        }
    }
    if let Some(first) = rows.first_mut() {
        for (j, cell) in first.iter_mut().enumerate() {
            *cell = j;
        }
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let at = |rows: &Vec<Vec<usize>>, i: usize, j: usize| {
                rows.get(i)
                    .and_then(|r| r.get(j))
                    .copied()
                    .unwrap_or(usize::MAX / 2)
            };
            let same = a.get(i - 1) == b.get(j - 1);
            let mut best = (at(&rows, i - 1, j) + 1)
                .min(at(&rows, i, j - 1) + 1)
                .min(at(&rows, i - 1, j - 1) + usize::from(!same));
            if i > 1 && j > 1 && a.get(i - 1) == b.get(j - 2) && a.get(i - 2) == b.get(j - 1) {
                best = best.min(at(&rows, i - 2, j - 2) + 1);
            }
            if let Some(cell) = rows.get_mut(i).and_then(|r| r.get_mut(j)) {
                *cell = best;
            }
        }
    }
    rows.get(a.len())
        .and_then(|r| r.get(b.len()))
        .copied()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_setting_is_named_with_the_setting_it_resembles() {
        let unknown = unknown_variables(["ACDM_UPSTREAM_MAX_CONECTIONS"]);
        assert_eq!(
            unknown,
            vec![UnknownVariable {
                name: "ACDM_UPSTREAM_MAX_CONECTIONS".to_owned(),
                closest: "ACDM_UPSTREAM_MAX_CONNECTIONS",
            }]
        );
        assert_eq!(
            unknown[0].to_string(),
            "ACDM_UPSTREAM_MAX_CONECTIONS is not a setting and is ignored; \
             did you mean ACDM_UPSTREAM_MAX_CONNECTIONS?"
        );
    }

    #[test]
    fn each_prefix_is_checked_and_swapped_letters_count_once() {
        let unknown = unknown_variables([
            "NEXTCLOUD_USRE",
            "GITLAB_WIKI_PROJECT",
            "ACDM_LOG_FROMAT",
            "ACDM_LISTEN_ADDR",
        ]);
        let pairs: Vec<(&str, &str)> = unknown
            .iter()
            .map(|u| (u.name.as_str(), u.closest))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("ACDM_LOG_FROMAT", "ACDM_LOG_FORMAT"),
                ("GITLAB_WIKI_PROJECT", "GITLAB_WIKI_PROJECT_ID"),
                ("NEXTCLOUD_USRE", "NEXTCLOUD_USER"),
            ]
        );
    }

    #[test]
    fn settings_other_readers_names_and_other_prefixes_pass() {
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        names.extend(NOT_SETTINGS);
        names.extend([
            "ACDM_REQUIRE_WEBDAV",
            "ACDM_UPDATE_SNAPSHOTS",
            "ACDM_BENCH_SECONDS",
            "RUST_LOG",
            "DATABASE_URL",
            "NC_OP_TIMEOUT_SECONDS",
            "PATH",
        ]);
        assert_eq!(unknown_variables(names), Vec::new());
    }

    #[test]
    fn the_distance_counts_edits() {
        assert_eq!(distance("ACDM_LOG", "ACDM_LOG"), 0);
        assert_eq!(distance("ACDM_LOG", "acdm_log"), 0);
        assert_eq!(distance("ACDM_LGO", "ACDM_LOG"), 1);
        assert_eq!(distance("ACDM_LO", "ACDM_LOG"), 1);
        assert_eq!(distance("ACDM_LOGS", "ACDM_LOG"), 1);
        assert_eq!(distance("ACDM_LIG", "ACDM_LOG"), 1);
        assert_eq!(distance("", "ABC"), 3);
        assert_eq!(distance("KITTEN", "SITTING"), 3);
    }
}
