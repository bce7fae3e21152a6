//! `cargo xtask tidy`: the architecture checks.
//!
//! Each check is a function from the workspace to its violations, as
//! human-readable lines (none = pass). [`CHECKS`] lists them; `cargo xtask
//! tidy` runs them all and reports, and `cargo test -p xtask` runs each one
//! as a test against the real workspace (see `tidy/tests.rs`), so the
//! architecture is enforced wherever the tests run. Every check is built
//! from small pure helpers that the tests also feed hand-made violations,
//! proving the checks can fail.

mod modules;
mod profile;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::metadata::{Metadata, is_normal_or_build};

/// The workspace-internal dependency edges each member may have (normal and
/// build dependencies; dev-dependencies are exempt).
///
/// Changing this table is an architectural decision: make it in the same
/// change as the matching update to docs/architecture.md, and say why.
const ALLOWED_EDGES: &[(&str, &[&str])] = &[
    ("acdm-core", &[]),
    ("acdm-sources", &["acdm-core"]),
    ("acdm-store", &["acdm-core"]),
    ("acdm-journal", &["acdm-core", "acdm-sources", "acdm-store"]),
    // Documents as text: no workspace crate (bytes in, Markdown out, in a
    // child process of its own).
    ("acdm-extract", &[]),
    // The content index: text in, ranked hits out; no upstream, no IO but
    // its own folder.
    ("acdm-index", &[]),
    // The knowledge layer: documents as text and the index kept in sync
    // with the sources (the provisioned folders come through a trait, so
    // no database).
    (
        "acdm-knowledge",
        &["acdm-core", "acdm-sources", "acdm-extract", "acdm-index"],
    ),
    ("acdm-mcp", &["acdm-core", "acdm-sources", "acdm-knowledge"]),
    (
        "acdm-bff",
        &[
            "acdm-core",
            "acdm-sources",
            "acdm-store",
            "acdm-journal",
            "acdm-knowledge",
        ],
    ),
    // The operator console: HTML over the same layers as the operator API
    // (it reuses the BFF's kill switch and OpenAPI document).
    (
        "acdm-console",
        &[
            "acdm-core",
            "acdm-sources",
            "acdm-store",
            "acdm-journal",
            "acdm-bff",
        ],
    ),
    // The serving infrastructure: the accept loop, the front layer (which
    // answers with the BFF's envelopes), health (the store's checks) and the
    // request deadline (the sources' task-local); no route of its own.
    (
        "acdm-server",
        &["acdm-core", "acdm-sources", "acdm-store", "acdm-bff"],
    ),
    // The settings: typed values for the store, the sources and the
    // server's log (read from what the binary passes, never the process).
    (
        "acdm-config",
        &["acdm-core", "acdm-sources", "acdm-store", "acdm-server"],
    ),
    // The operator's commands and the import: over the same layers as the
    // operator API, whose business writes (`acdm_bff::operator`) they share.
    (
        "acdm-operator",
        &[
            "acdm-core",
            "acdm-sources",
            "acdm-store",
            "acdm-journal",
            "acdm-bff",
        ],
    ),
    ("acdm-harness-client", &["acdm-core"]),
    // Test support is a dev-dependency only: no member may list it here
    // but the cluster harness, itself a test harness.
    ("acdm-test-support", &[]),
    ("acdm-tool", &["acdm-core", "acdm-harness-client"]),
    // The cluster harness and suite: a client of the service, like an
    // engine (the harness client and the protocol), never its internals;
    // its WebDAV server is started by test support's launcher.
    (
        "acdm-cluster",
        &["acdm-core", "acdm-harness-client", "acdm-test-support"],
    ),
    (
        "acdm-backend",
        &[
            "acdm-core",
            "acdm-sources",
            "acdm-store",
            "acdm-journal",
            "acdm-extract",
            "acdm-knowledge",
            "acdm-mcp",
            "acdm-bff",
            "acdm-console",
            "acdm-server",
            "acdm-config",
            "acdm-operator",
            "acdm-harness-client",
        ],
    ),
    ("xtask", &[]),
];

/// Crates that one workspace crate must not depend on: anywhere in its
/// (normal and build) dependency closure, or directly.
struct ForbiddenRule {
    /// The workspace crate whose dependencies are checked.
    root: &'static str,
    /// Package names forbidden anywhere in the closure.
    names: &'static [&'static str],
    /// Package-name prefixes forbidden anywhere in the closure.
    prefixes: &'static [&'static str],
    /// Whether every other workspace member is forbidden too.
    other_members: bool,
    /// Package names forbidden as direct dependencies (allowed further
    /// down, behind a crate whose job they are).
    direct: &'static [&'static str],
}

/// acdm-core is pure: no async runtime, HTTP, MCP or database crates, and no
/// other workspace crate.
const CORE_RULE: ForbiddenRule = ForbiddenRule {
    root: "acdm-core",
    names: &[
        "axum",
        "axum-core",
        "hyper",
        "reqwest",
        "rmcp",
        "tokio",
        "tower",
    ],
    prefixes: &["sqlx"],
    other_members: true,
    direct: &[],
};

/// acdm-harness-client is embedded in the agent engine: it may speak HTTP
/// but must not drag in the server side (axum, MCP, databases, our adapters).
const HARNESS_CLIENT_RULE: ForbiddenRule = ForbiddenRule {
    root: "acdm-harness-client",
    names: &[
        "axum",
        "axum-core",
        "rmcp",
        "acdm-bff",
        "acdm-mcp",
        "acdm-sources",
        "acdm-store",
        "acdm-journal",
        "acdm-backend",
    ],
    prefixes: &["sqlx"],
    other_members: false,
    direct: &[],
};

/// The rest of the table: each crate's absences, as docs/architecture.md
/// states them.
const LAYER_RULES: [ForbiddenRule; 7] = [
    // acdm-index: text in, ranked hits out — no runtime, HTTP, MCP or
    // database.
    ForbiddenRule {
        root: "acdm-index",
        names: &["axum", "axum-core", "hyper", "reqwest", "rmcp", "tokio"],
        prefixes: &["sqlx"],
        other_members: true,
        direct: &[],
    },
    // acdm-knowledge: over the sources, the extraction pool and the index;
    // no HTTP server, MCP or database (the provisioned folders come
    // through a trait).
    ForbiddenRule {
        root: "acdm-knowledge",
        names: &["axum", "axum-core", "rmcp", "acdm-store"],
        prefixes: &["sqlx"],
        other_members: false,
        direct: &[],
    },
    // acdm-sources knows nothing of the HTTP server, MCP or the database.
    ForbiddenRule {
        root: "acdm-sources",
        names: &["axum", "axum-core", "rmcp", "acdm-store"],
        prefixes: &["sqlx"],
        other_members: false,
        direct: &[],
    },
    // acdm-store: no HTTP (client or server), no MCP.
    ForbiddenRule {
        root: "acdm-store",
        names: &["axum", "axum-core", "hyper", "reqwest", "rmcp"],
        prefixes: &[],
        other_members: false,
        direct: &[],
    },
    // acdm-journal: no HTTP framework, no MCP; no SQL and no upstream
    // protocol of its own (it drives the store and the file-store port).
    ForbiddenRule {
        root: "acdm-journal",
        names: &["axum", "axum-core", "rmcp"],
        prefixes: &[],
        other_members: false,
        direct: &["sqlx", "reqwest", "quick-xml"],
    },
    // acdm-mcp: an adapter over the sources; no database, no BFF.
    ForbiddenRule {
        root: "acdm-mcp",
        names: &["acdm-store", "acdm-journal", "acdm-bff"],
        prefixes: &["sqlx"],
        other_members: false,
        direct: &[],
    },
    // acdm-bff: no SQL and no upstream protocol (through the store, the
    // journal and the ports only); does not depend on the MCP server.
    ForbiddenRule {
        root: "acdm-bff",
        names: &["rmcp", "acdm-mcp"],
        prefixes: &[],
        other_members: false,
        direct: &["sqlx", "reqwest", "quick-xml"],
    },
];

/// Text that reads or writes the process environment (check c).
const ENV_PATTERNS: &[&str] = &[
    "env::var",
    "env::vars",
    "env::var_os",
    "env::set_var",
    "env::remove_var",
    "dotenv",
    "option_env!",
];

/// Marks an environment read as deliberate; must be followed by a reason.
const ALLOW_ENV_MARKER: &str = "tidy:allow-env";

/// The only library sources that may read the environment (with the
/// marker and a reason): the harness client's `from_env`, the engine's entry
/// point; test support's test switches (a dev-dependency only); and the
/// settings' unit tests (compiled only for tests), whose `ACDM_UPDATE_DOCS`
/// rewrites `docs/config.md`.
const ENV_READERS: &[&str] = &[
    "crates/acdm-harness-client/src/config.rs",
    "crates/acdm-test-support/src/lib.rs",
    "crates/acdm-config/src/tests.rs",
];

/// The architecture document, relative to the workspace root.
const ARCHITECTURE_DOC: &str = "docs/architecture.md";

/// What the checks look at: the workspace root and its `cargo metadata`.
pub(crate) struct Context {
    /// The workspace root directory.
    root: PathBuf,
    /// Parsed `cargo metadata`, or why it could not be had.
    metadata: Result<Metadata, String>,
}

impl Context {
    /// Runs `cargo metadata` for the workspace at `root`.
    pub(crate) fn load(root: PathBuf) -> Self {
        let metadata = Metadata::load(&root).map_err(|error| format!("{error:#}"));
        Self { root, metadata }
    }

    /// The metadata, or the single violation explaining why there is none.
    fn metadata(&self) -> Result<&Metadata, Vec<String>> {
        self.metadata.as_ref().map_err(|error| vec![error.clone()])
    }
}

/// One named check.
pub(crate) struct Check {
    /// What the check asserts, as a sentence.
    pub(crate) name: &'static str,
    /// Runs the check; returns its violations.
    pub(crate) run: fn(&Context) -> Vec<String>,
}

/// Every check `cargo xtask tidy` runs, in report order.
pub(crate) const CHECKS: &[Check] = &[
    Check {
        name: "workspace crates depend only on allowed workspace crates",
        run: check_workspace_edges,
    },
    Check {
        name: "acdm-core depends on no IO crates",
        run: check_core_closure,
    },
    Check {
        name: "acdm-harness-client depends on no server crates",
        run: check_harness_client_closure,
    },
    Check {
        name: "every crate keeps out the crates its layer forbids",
        run: check_layer_rules,
    },
    Check {
        name: "no library crate reads the environment",
        run: check_no_env_reads,
    },
    Check {
        name: "every Rust file starts with a module doc",
        run: check_module_docs,
    },
    Check {
        name: "every member opts into the workspace lints",
        run: check_workspace_lints,
    },
    Check {
        name: "the architecture doc names every crate",
        run: check_architecture_doc,
    },
    Check {
        name: "no crate has a module cycle",
        run: modules::check_module_cycles,
    },
    Check {
        name: "what only the compiler runs is built unoptimised in dev builds",
        run: profile::check_build_time_packages,
    },
];

/// The workspace root: the parent of this crate's directory.
pub(crate) fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// Entry point for `cargo xtask tidy`: runs every check and reports.
pub(crate) fn main(args: &[String]) -> ExitCode {
    if let Some(arg) = args.first() {
        return crate::usage_error(&format!("`tidy` takes no arguments (got `{arg}`)"));
    }
    let cx = Context::load(workspace_root());
    let mut failed = 0_usize;
    for check in CHECKS {
        let violations = (check.run)(&cx);
        if violations.is_empty() {
            println!("[ OK ] {}", check.name);
        } else {
            failed += 1;
            println!("[FAIL] {} ({})", check.name, violations.len());
            for violation in &violations {
                println!("         - {violation}");
            }
        }
    }
    if failed == 0 {
        println!("tidy: all {} checks passed", CHECKS.len());
        ExitCode::SUCCESS
    } else {
        println!("tidy: {failed} of {} checks failed", CHECKS.len());
        ExitCode::FAILURE
    }
}

// ---------------------------------------------------------------------------
// a. Allowed workspace edges.

/// Check a: every member's workspace dependencies are in [`ALLOWED_EDGES`].
fn check_workspace_edges(cx: &Context) -> Vec<String> {
    match cx.metadata() {
        Ok(metadata) => edge_violations(metadata),
        Err(violations) => violations,
    }
}

/// The workspace edges in `metadata` that [`ALLOWED_EDGES`] does not allow,
/// and the members the table does not list.
fn edge_violations(metadata: &Metadata) -> Vec<String> {
    let members = metadata.member_names();
    let mut violations = Vec::new();
    for package in metadata.members() {
        let name = package.name.as_str();
        let Some((_, allowed)) = ALLOWED_EDGES.iter().find(|(member, _)| *member == name) else {
            violations.push(format!(
                "{name} is a workspace member but not in the edge table: add it to the edge \
                 table in xtask/src/tidy.rs and docs/architecture.md"
            ));
            continue;
        };
        let internal: BTreeSet<&str> = package
            .dependencies
            .iter()
            .filter(|dep| is_normal_or_build(dep.kind.as_deref()))
            .map(|dep| dep.name.as_str())
            .filter(|dep| members.contains(dep))
            .collect();
        for dep in internal {
            if !allowed.contains(&dep) {
                let allowed = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                violations.push(format!(
                    "{name} depends on {dep}, which the edge table does not allow \
                     (allowed for {name}: {allowed})"
                ));
            }
        }
    }
    violations
}

// ---------------------------------------------------------------------------
// b. Forbidden crates in dependency closures.

/// Check b for acdm-core.
fn check_core_closure(cx: &Context) -> Vec<String> {
    match cx.metadata() {
        Ok(metadata) => forbidden_violations(metadata, &CORE_RULE),
        Err(violations) => violations,
    }
}

/// Check b for acdm-harness-client.
fn check_harness_client_closure(cx: &Context) -> Vec<String> {
    match cx.metadata() {
        Ok(metadata) => forbidden_violations(metadata, &HARNESS_CLIENT_RULE),
        Err(violations) => violations,
    }
}

/// Check b for the other layers ([`LAYER_RULES`]).
fn check_layer_rules(cx: &Context) -> Vec<String> {
    match cx.metadata() {
        Ok(metadata) => LAYER_RULES
            .iter()
            .flat_map(|rule| forbidden_violations(metadata, rule))
            .collect(),
        Err(violations) => violations,
    }
}

/// The forbidden packages in `rule.root`'s normal+build dependency closure,
/// each with one chain of crate names showing how it got in, and its
/// forbidden direct dependencies.
///
/// The closure comes from cargo's `resolve` graph, which unifies features
/// across the whole workspace: an optional dependency enabled by another
/// member shows up here too. The check is therefore conservative, never lax.
fn forbidden_violations(metadata: &Metadata, rule: &ForbiddenRule) -> Vec<String> {
    let Some(root) = metadata
        .members()
        .into_iter()
        .find(|package| package.name == rule.root)
    else {
        return vec![format!(
            "{} is not a workspace member: update the forbidden-crate rules in xtask/src/tidy.rs",
            rule.root
        )];
    };
    let Some(edges) = metadata.normal_and_build_edges() else {
        return vec!["`cargo metadata` has no `resolve` section".to_owned()];
    };
    let names = metadata.names_by_id();
    let members = metadata.member_names();
    let name_of = |id: &str| names.get(id).copied().unwrap_or(id).to_owned();

    // Forbidden name -> the shortest chain that reaches it.
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, chain) in closure_paths(&edges, &root.id) {
        let name = name_of(&id);
        if !is_forbidden(rule, &members, &name) {
            continue;
        }
        let chain: Vec<String> = chain.iter().map(|id| name_of(id)).collect();
        let shorter = found
            .get(&name)
            .is_none_or(|existing| chain.len() < existing.len());
        if shorter {
            found.insert(name, chain);
        }
    }
    let direct = root
        .dependencies
        .iter()
        .filter(|dep| is_normal_or_build(dep.kind.as_deref()))
        .filter(|dep| rule.direct.contains(&dep.name.as_str()))
        .map(|dep| {
            format!(
                "{} depends directly on `{}`, which its layer leaves to another crate",
                rule.root, dep.name
            )
        });
    found
        .into_iter()
        .map(|(name, chain)| {
            format!(
                "{} pulls in forbidden crate `{name}`: {}",
                rule.root,
                chain.join(" -> ")
            )
        })
        .chain(direct)
        .collect()
}

/// Whether `name` is forbidden in `rule.root`'s closure.
fn is_forbidden(rule: &ForbiddenRule, members: &BTreeSet<&str>, name: &str) -> bool {
    rule.names.contains(&name)
        || rule.prefixes.iter().any(|prefix| name.starts_with(prefix))
        || (rule.other_members && name != rule.root && members.contains(name))
}

/// Every node reachable from `root` in `edges` (excluding `root`), mapped to
/// a shortest chain of nodes from `root` to it, both ends included.
fn closure_paths(
    edges: &BTreeMap<String, Vec<String>>,
    root: &str,
) -> BTreeMap<String, Vec<String>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut seen: BTreeSet<&str> = BTreeSet::from([root]);
    let mut queue: VecDeque<&str> = VecDeque::from([root]);
    while let Some(node) = queue.pop_front() {
        for dep in edges.get(node).into_iter().flatten() {
            if seen.insert(dep) {
                parent.insert(dep, node);
                queue.push_back(dep);
            }
        }
    }
    parent
        .keys()
        .map(|&node| {
            let mut chain = vec![node.to_owned()];
            let mut current = node;
            while let Some(&up) = parent.get(current) {
                chain.push(up.to_owned());
                current = up;
            }
            chain.reverse();
            (node.to_owned(), chain)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// c. No library crate reads the environment.

/// Check c: no `.rs` file under `crates/*/src/` touches the environment,
/// except a marked line in one of [`ENV_READERS`]. Configuration is read
/// by the binaries and passed in; tests, `bins/` and xtask are not scanned
/// (there clippy's `disallowed-methods` makes every read an `expect` with
/// a reason, and it catches reads this text search cannot, such as a
/// `use std::env::var` followed by `var(..)`).
fn check_no_env_reads(cx: &Context) -> Vec<String> {
    let mut violations = Vec::new();
    for krate in subdirs(&cx.root.join("crates"), &mut violations) {
        for file in rust_files(&krate.join("src"), &mut violations) {
            let path = relative(&cx.root, &file);
            match fs::read_to_string(&file) {
                Ok(text) if ENV_READERS.contains(&path.as_str()) => {
                    violations.extend(env_reads(&path, &text));
                }
                Ok(text) => violations.extend(env_reads_unexempted(&path, &text)),
                Err(error) => violations.push(unreadable(&cx.root, &file, &error)),
            }
        }
    }
    violations
}

/// Lines of `text` that touch the environment, as `path:line: text`.
///
/// Comment lines are ignored. A line is exempt if it, or the line directly
/// above it, carries `tidy:allow-env` followed by a reason.
fn env_reads(path: &str, text: &str) -> Vec<String> {
    let mut violations = Vec::new();
    let mut previous = "";
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let touches_env = !trimmed.starts_with("//")
            && ENV_PATTERNS.iter().any(|pattern| trimmed.contains(pattern));
        if touches_env && !allows_env(line) && !allows_env(previous) {
            violations.push(format!("{path}:{}: {trimmed}", index + 1));
        }
        previous = line;
    }
    violations
}

/// Lines of `text` that touch the environment, marker or not: in a library
/// crate outside [`ENV_READERS`] no reason is good enough.
fn env_reads_unexempted(path: &str, text: &str) -> Vec<String> {
    let stripped: String = text
        .lines()
        .map(|line| {
            line.split_once(ALLOW_ENV_MARKER)
                .map_or(line, |(code, _)| code)
        })
        .collect::<Vec<_>>()
        .join("\n");
    env_reads(path, &stripped)
}

/// Whether `line` carries the allow marker followed by a non-empty reason.
fn allows_env(line: &str) -> bool {
    line.split_once(ALLOW_ENV_MARKER)
        .is_some_and(|(_, reason)| {
            !reason
                .trim_start_matches([':', '-', ' ', '\t'])
                .trim()
                .is_empty()
        })
}

// ---------------------------------------------------------------------------
// d. Every Rust file starts with a module doc.

/// Check d: every `.rs` file in the members' `src`, `tests`, `benches`,
/// `examples` and `build.rs`, and in the top-level `tests/` (integration
/// suites registered by a member), opens with a `//!` module doc.
fn check_module_docs(cx: &Context) -> Vec<String> {
    let mut violations = Vec::new();
    let mut files = rust_files(&cx.root.join("tests"), &mut violations);
    let mut crate_dirs = subdirs(&cx.root.join("crates"), &mut violations);
    crate_dirs.extend(subdirs(&cx.root.join("bins"), &mut violations));
    crate_dirs.push(cx.root.join("xtask"));
    for krate in crate_dirs {
        for dir in ["src", "tests", "benches", "examples"] {
            files.extend(rust_files(&krate.join(dir), &mut violations));
        }
        let build_script = krate.join("build.rs");
        if build_script.is_file() {
            files.push(build_script);
        }
    }
    for file in files {
        match fs::read_to_string(&file) {
            Ok(text) if starts_with_module_doc(&text) => {}
            Ok(_) => violations.push(format!(
                "{}: the first non-blank line is not a `//!` module doc",
                relative(&cx.root, &file)
            )),
            Err(error) => violations.push(unreadable(&cx.root, &file, &error)),
        }
    }
    violations
}

/// Whether the first non-blank line of `text` starts with `//!`.
fn starts_with_module_doc(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with("//!"))
}

// ---------------------------------------------------------------------------
// e. Every member opts into the workspace lints.

/// Check e: each member's `Cargo.toml` has `[lints]` with `workspace = true`.
fn check_workspace_lints(cx: &Context) -> Vec<String> {
    let metadata = match cx.metadata() {
        Ok(metadata) => metadata,
        Err(violations) => return violations,
    };
    let mut violations = Vec::new();
    for package in metadata.members() {
        let path = &package.manifest_path;
        match fs::read_to_string(path) {
            Ok(manifest) if opts_into_workspace_lints(&manifest) => {}
            Ok(_) => violations.push(format!(
                "{} ({}) has no `[lints]` table with `workspace = true`",
                package.name,
                relative(&cx.root, path)
            )),
            Err(error) => violations.push(unreadable(&cx.root, path, &error)),
        }
    }
    violations
}

/// Whether `manifest` has a `[lints]` table containing `workspace = true`.
fn opts_into_workspace_lints(manifest: &str) -> bool {
    let mut in_lints = false;
    for raw in manifest.lines() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.starts_with('[') {
            in_lints = line.split_whitespace().collect::<String>() == "[lints]";
        } else if in_lints
            && line
                .split_once('=')
                .is_some_and(|(key, value)| key.trim() == "workspace" && value.trim() == "true")
        {
            return true;
        }
    }
    false
}

// ---------------------------------------------------------------------------
// f. The architecture doc names every crate.

/// Check f: docs/architecture.md exists and names every workspace member.
fn check_architecture_doc(cx: &Context) -> Vec<String> {
    let metadata = match cx.metadata() {
        Ok(metadata) => metadata,
        Err(violations) => return violations,
    };
    let path = cx.root.join(ARCHITECTURE_DOC);
    let doc = match fs::read_to_string(&path) {
        Ok(doc) => doc,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return vec![format!(
                "{ARCHITECTURE_DOC} does not exist: write it, naming every workspace crate"
            )];
        }
        Err(error) => return vec![format!("{ARCHITECTURE_DOC} cannot be read: {error}")],
    };
    names_missing_from(&doc, metadata.member_names())
        .into_iter()
        .map(|name| format!("{ARCHITECTURE_DOC} does not mention {name}"))
        .collect()
}

/// The `names` that `doc` never mentions as a whole crate name.
fn names_missing_from<'a>(doc: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|name| !mentions(doc, name))
        .collect()
}

/// Whether `doc` contains `name` not embedded in a longer crate name
/// (`acdm-core` is not mentioned by `acdm-core-extra`).
fn mentions(doc: &str, name: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    doc.match_indices(name).any(|(at, _)| {
        let before = doc.get(..at).and_then(|s| s.chars().next_back());
        let after = doc.get(at + name.len()..).and_then(|s| s.chars().next());
        !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
    })
}

// ---------------------------------------------------------------------------
// Filesystem helpers.

/// The subdirectories of `dir`, sorted; none if `dir` does not exist.
fn subdirs(dir: &Path, violations: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => {
            violations.push(format!("{}: cannot list: {error}", dir.display()));
            return Vec::new();
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Every `.rs` file under `dir`, recursively and sorted, skipping `target`
/// and hidden directories; none if `dir` does not exist.
fn rust_files(dir: &Path, violations: &mut Vec<String>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => {
                violations.push(format!("{}: cannot list: {error}", dir.display()));
                continue;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `path` relative to `root`, with `/` separators, for reports.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The violation for a file that cannot be read.
fn unreadable(root: &Path, path: &Path, error: &std::io::Error) -> String {
    format!("{}: cannot read: {error}", relative(root, path))
}
