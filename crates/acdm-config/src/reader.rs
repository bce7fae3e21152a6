//! Reading settings out of the merged file and environment: every problem
//! is collected (naming the setting and where its value came from) instead
//! of stopping at the first, and every name read is checked against the
//! declared settings, both ways.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};

use crate::kinds::Kind;

/// One setting, as documented in `docs/config.md`.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Environment variable and TOML key.
    pub name: &'static str,
    /// The default, as shown to operators; loading an empty configuration
    /// yields exactly this (a test checks it).
    pub default: &'static str,
    /// Never printed.
    pub secret: bool,
    /// What it does (the declaration's doc comment, one space-led piece per
    /// line; [`Setting::doc`] joins them).
    pub doc_lines: &'static str,
}

impl Setting {
    /// What it does, as one line of text.
    pub fn doc(&self) -> &'static str {
        self.doc_lines.trim()
    }
}

/// The environment as a figment provider: only known names, values taken
/// literally (figment's own `Env` would parse quotes, escapes and numbers,
/// which would change a token like `"0123…"`).
pub(super) struct EnvironmentStrings(pub(super) BTreeMap<String, String>);

impl Provider for EnvironmentStrings {
    fn metadata(&self) -> Metadata {
        Metadata::named("environment")
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let dict: Dict = self
            .0
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        Ok(Map::from([(Profile::Default, dict)]))
    }
}

/// Collects problems while reading settings, and which names were read.
pub(super) struct Reader {
    declared: &'static [Setting],
    figment: Figment,
    values: Dict,
    problems: Vec<String>,
    read: BTreeSet<&'static str>,
}

impl Reader {
    pub(super) fn new(
        declared: &'static [Setting],
        figment: Figment,
        values: Dict,
        problems: Vec<String>,
    ) -> Self {
        Self {
            declared,
            figment,
            values,
            problems,
            read: BTreeSet::new(),
        }
    }

    fn source(&self, name: &str) -> String {
        match self.figment.find_metadata(name) {
            Some(meta) => match &meta.source {
                Some(source) => format!("{source}"),
                None => meta.name.to_string(),
            },
            None => "default".to_owned(),
        }
    }

    /// Records a problem with the value of `name`, naming where it came from.
    pub(super) fn problem(&mut self, name: &'static str, problem: impl fmt::Display) {
        self.mark(name);
        let source = self.source(name);
        self.problems
            .push(format!("{name} (from {source}): {problem}"));
    }

    fn mark(&mut self, name: &'static str) {
        self.read.insert(name);
    }

    /// The raw text of a setting; `None` when unset or empty.
    fn text(&mut self, name: &'static str) -> Option<String> {
        self.mark(name);
        let value = self.values.get(name)?.clone();
        let text = match value {
            Value::String(_, s) => s,
            Value::Bool(_, b) => b.to_string(),
            Value::Num(_, n) => match (n.to_i128(), n.to_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) => f.to_string(),
                _ => {
                    self.problem(name, "is not a number this service can read");
                    return None;
                }
            },
            Value::Char(_, c) => c.to_string(),
            Value::Empty(..) => return None,
            Value::Dict(..) | Value::Array(..) => {
                self.problem(name, "must be a single value, not a table or a list");
                return None;
            }
        };
        (!text.is_empty()).then_some(text)
    }

    /// Reads `name` as `kind`; unset or empty gives `default` (its documented
    /// text, read by the same kind). `None` when there is a problem, which is
    /// recorded.
    pub(super) fn read<K: Kind>(
        &mut self,
        name: &'static str,
        default: &'static str,
        kind: &K,
    ) -> Option<K::Value> {
        match self.text(name) {
            Some(text) => kind
                .parse(&text)
                .map_err(|problem| self.problem(name, problem))
                .ok(),
            None => kind
                .absent(default)
                .map_err(|problem| {
                    self.problems.push(format!(
                        "{name}: the built-in default `{default}` is invalid ({problem}); \
                         this is a bug, please report it"
                    ));
                })
                .ok(),
        }
    }

    /// The raw text of `name` when it is set and `kind` accepts it (without
    /// reporting anything: the setting's own reading does that).
    pub(super) fn valid_text<K: Kind>(&mut self, name: &'static str, kind: &K) -> Option<String> {
        self.mark(name);
        let problems = self.problems.len();
        let text = self.text(name);
        self.problems.truncate(problems);
        text.filter(|text| kind.parse(text).is_ok())
    }

    /// True when the setting has a non-empty value (without reporting anything).
    pub(super) fn is_set(&mut self, name: &'static str) -> bool {
        self.mark(name);
        match self.values.get(name) {
            None | Some(Value::Empty(..)) => false,
            Some(Value::String(_, s)) => !s.is_empty(),
            Some(_) => true,
        }
    }

    /// Records that `name` must be set because `because` is.
    pub(super) fn require(&mut self, name: &'static str, because: &str) {
        self.mark(name);
        self.problems
            .push(format!("{name}: required when {because} is set"));
    }

    /// The problems found, plus a bug report for every declared setting
    /// nobody read and every name read that is not declared.
    pub(super) fn finish(self) -> Vec<String> {
        let mut problems = self.problems;
        for setting in self.declared {
            if !self.read.contains(setting.name) {
                problems.push(format!(
                    "{}: declared but never read; this is a bug, please report it",
                    setting.name
                ));
            }
        }
        for name in &self.read {
            if !self.declared.iter().any(|s| s.name == *name) {
                problems.push(format!(
                    "{name}: read but not declared; this is a bug, please report it"
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{Bool, Optional, Secret};

    const DECLARED: &[Setting] = &[
        Setting {
            name: "A_FLAG",
            default: "true",
            secret: false,
            doc_lines: " A flag.",
        },
        Setting {
            name: "A_SECRET",
            default: "(empty)",
            secret: true,
            doc_lines: " A secret.",
        },
    ];

    fn reader() -> Reader {
        Reader::new(DECLARED, Figment::new(), Dict::new(), Vec::new())
    }

    #[test]
    fn reading_every_declared_setting_is_not_a_problem() {
        let mut r = reader();
        assert_eq!(r.read("A_FLAG", "true", &Bool), Some(true));
        assert!(matches!(
            r.read("A_SECRET", "(empty)", &Optional(Secret)),
            Some(None)
        ));
        assert_eq!(r.finish(), Vec::<String>::new());
    }

    #[test]
    fn a_declared_setting_nobody_reads_is_reported() {
        let mut r = reader();
        r.read("A_FLAG", "true", &Bool);
        assert_eq!(
            r.finish(),
            ["A_SECRET: declared but never read; this is a bug, please report it"]
        );
    }

    #[test]
    fn a_name_read_without_a_declaration_is_reported() {
        let mut r = reader();
        r.read("A_FLAG", "true", &Bool);
        r.read("A_SECRET", "(empty)", &Optional(Secret));
        assert!(!r.is_set("A_SECERT"));
        assert_eq!(
            r.finish(),
            ["A_SECERT: read but not declared; this is a bug, please report it"]
        );
    }

    #[test]
    fn an_invalid_built_in_default_is_reported_as_a_bug() {
        let mut r = reader();
        assert_eq!(r.read("A_FLAG", "maybe", &Bool), None);
        assert!(r.read("A_SECRET", "none", &Optional(Secret)).is_none());
        let problems = r.finish();
        let starts: Vec<_> = problems
            .iter()
            .map(|p| p.split(" is invalid").next())
            .collect();
        assert_eq!(
            starts,
            [
                Some("A_FLAG: the built-in default `maybe`"),
                Some("A_SECRET: the built-in default `none`")
            ],
            "{problems:?}"
        );
    }
}
