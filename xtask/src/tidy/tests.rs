//! Tests for the tidy checks.
//!
//! The top-level tests run each check against the real workspace, so
//! `cargo test -p xtask` fails when the architecture is broken. The
//! `detects` module feeds each check's helpers a hand-made violation (and a
//! near miss) to prove the checks can actually fail.

use std::sync::OnceLock;

use super::{
    CHECKS, Check, Context, check_architecture_doc, check_core_closure,
    check_harness_client_closure, check_layer_rules, check_module_docs, check_no_env_reads,
    check_workspace_edges, check_workspace_lints, workspace_root,
};

/// The real workspace, loaded once for all tests.
fn workspace() -> &'static Context {
    static CONTEXT: OnceLock<Context> = OnceLock::new();
    CONTEXT.get_or_init(|| Context::load(workspace_root()))
}

/// Runs `check` on the real workspace and fails listing every violation.
fn assert_clean(check: fn(&Context) -> Vec<String>) {
    let name = CHECKS
        .iter()
        .find(|Check { run, .. }| std::ptr::fn_addr_eq(*run, check))
        .map_or("tidy check", |found| found.name);
    let violations = check(workspace());
    assert!(
        violations.is_empty(),
        "`{name}` failed with {} violation(s):\n  - {}",
        violations.len(),
        violations.join("\n  - ")
    );
}

#[test]
fn workspace_crates_depend_only_on_allowed_workspace_crates() {
    assert_clean(check_workspace_edges);
}

#[test]
fn acdm_core_depends_on_no_io_crates() {
    assert_clean(check_core_closure);
}

#[test]
fn acdm_harness_client_depends_on_no_server_crates() {
    assert_clean(check_harness_client_closure);
}

#[test]
fn every_crate_keeps_out_the_crates_its_layer_forbids() {
    assert_clean(check_layer_rules);
}

#[test]
fn no_library_crate_reads_the_environment() {
    assert_clean(check_no_env_reads);
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    assert_clean(check_module_docs);
}

#[test]
fn every_member_opts_into_the_workspace_lints() {
    assert_clean(check_workspace_lints);
}

#[test]
fn the_architecture_doc_names_every_crate() {
    assert_clean(check_architecture_doc);
}

#[test]
fn no_crate_has_a_module_cycle() {
    assert_clean(super::modules::check_module_cycles);
}

#[test]
fn what_only_the_compiler_runs_is_built_unoptimised_in_dev_builds() {
    assert_clean(super::profile::check_build_time_packages);
}

/// Proof that each check detects what it is meant to detect.
mod detects {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::{Value, json};

    use super::super::{
        ALLOWED_EDGES, CORE_RULE, ENV_READERS, HARNESS_CLIENT_RULE, LAYER_RULES, allows_env,
        closure_paths, edge_violations, env_reads, env_reads_unexempted, forbidden_violations,
        names_missing_from, opts_into_workspace_lints, profile, starts_with_module_doc,
    };
    use crate::metadata::Metadata;

    /// A package for hand-built metadata: `(name, [(dep, kind)])`.
    fn package(name: &str, deps: &[(&str, Option<&str>)]) -> Value {
        let dependencies: Vec<Value> = deps
            .iter()
            .map(|(dep, kind)| json!({ "name": dep, "kind": kind }))
            .collect();
        json!({
            "id": format!("{name}-id"),
            "name": name,
            "manifest_path": format!("/ws/{name}/Cargo.toml"),
            "dependencies": dependencies,
        })
    }

    /// A resolve node: `(name, [(dep, [kinds])])`.
    fn node(name: &str, deps: &[(&str, &[Option<&str>])]) -> Value {
        let deps: Vec<Value> = deps
            .iter()
            .map(|(dep, kinds)| {
                let kinds: Vec<Value> = kinds.iter().map(|kind| json!({ "kind": kind })).collect();
                json!({ "pkg": format!("{dep}-id"), "dep_kinds": kinds })
            })
            .collect();
        json!({ "id": format!("{name}-id"), "deps": deps })
    }

    /// Metadata from packages, the member names and resolve nodes.
    fn metadata(packages: Vec<Value>, members: &[&str], nodes: Vec<Value>) -> Metadata {
        let members: Vec<String> = members.iter().map(|name| format!("{name}-id")).collect();
        serde_json::from_value(json!({
            "packages": packages,
            "workspace_members": members,
            "resolve": { "nodes": nodes },
        }))
        .unwrap()
    }

    #[test]
    fn the_edge_table_lists_each_crate_once() {
        let mut names: Vec<&str> = ALLOWED_EDGES.iter().map(|(name, _)| *name).collect();
        let listed = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), listed);
    }

    #[test]
    fn an_edge_missing_from_the_table_is_reported_but_dev_dependencies_are_exempt() {
        let meta = metadata(
            vec![
                package(
                    "acdm-core",
                    &[
                        ("acdm-sources", None),
                        ("acdm-store", Some("dev")),
                        ("serde", None),
                    ],
                ),
                package("acdm-sources", &[("acdm-core", None)]),
                package("acdm-store", &[("acdm-core", Some("build"))]),
                package("serde", &[]),
            ],
            &["acdm-core", "acdm-sources", "acdm-store"],
            vec![],
        );
        let violations = edge_violations(&meta);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].starts_with("acdm-core depends on acdm-sources"));
    }

    #[test]
    fn a_build_dependency_between_workspace_crates_counts_as_an_edge() {
        let meta = metadata(
            vec![
                package("acdm-core", &[]),
                package("acdm-sources", &[("acdm-store", Some("build"))]),
                package("acdm-store", &[]),
            ],
            &["acdm-core", "acdm-sources", "acdm-store"],
            vec![],
        );
        let violations = edge_violations(&meta);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].starts_with("acdm-sources depends on acdm-store"));
    }

    #[test]
    fn a_member_missing_from_the_edge_table_is_reported() {
        let meta = metadata(
            vec![package("acdm-core", &[]), package("acdm-newcomer", &[])],
            &["acdm-core", "acdm-newcomer"],
            vec![],
        );
        let violations = edge_violations(&meta);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("acdm-newcomer"));
        assert!(violations[0].contains("add it to the edge table"));
    }

    #[test]
    fn the_closure_follows_transitive_edges_with_a_shortest_chain() {
        let edges: BTreeMap<String, Vec<String>> = [
            ("a", vec!["b", "c"]),
            ("b", vec!["d"]),
            ("c", vec!["b"]),
            ("d", vec!["a"]),
            ("x", vec!["a"]),
        ]
        .into_iter()
        .map(|(from, to)| (from.to_owned(), to.into_iter().map(str::to_owned).collect()))
        .collect();
        let closure = closure_paths(&edges, "a");
        let reached: Vec<&str> = closure.keys().map(String::as_str).collect();
        assert_eq!(reached, ["b", "c", "d"]);
        assert_eq!(closure["d"], ["a", "b", "d"]);
    }

    #[test]
    fn a_forbidden_crate_deep_in_the_closure_is_reported_with_its_path() {
        let meta = metadata(
            vec![
                package("acdm-core", &[]),
                package("acdm-store", &[]),
                package("helper", &[]),
                package("tokio", &[]),
                package("sqlx-core", &[]),
                package("serde", &[]),
            ],
            &["acdm-core", "acdm-store"],
            vec![
                node("acdm-core", &[("helper", &[None]), ("serde", &[None])]),
                node("helper", &[("tokio", &[Some("build")])]),
                node("tokio", &[]),
                node("serde", &[]),
            ],
        );
        let violations = forbidden_violations(&meta, &CORE_RULE);
        assert_eq!(
            violations,
            ["acdm-core pulls in forbidden crate `tokio`: acdm-core -> helper -> tokio"]
        );
    }

    #[test]
    fn dev_edges_are_ignored_at_every_level_of_the_closure() {
        let meta = metadata(
            vec![
                package("acdm-core", &[]),
                package("acdm-store", &[]),
                package("helper", &[]),
                package("tokio", &[]),
            ],
            &["acdm-core", "acdm-store"],
            vec![
                node(
                    "acdm-core",
                    &[("helper", &[None]), ("acdm-store", &[Some("dev")])],
                ),
                node("helper", &[("tokio", &[Some("dev")])]),
            ],
        );
        assert_eq!(
            forbidden_violations(&meta, &CORE_RULE),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_forbidden_direct_dependency_is_reported_but_the_same_crate_further_down_is_not() {
        let bff = LAYER_RULES
            .iter()
            .find(|rule| rule.root == "acdm-bff")
            .unwrap();
        let meta = metadata(
            vec![
                package("acdm-bff", &[("sqlx", None), ("acdm-store", None)]),
                package("acdm-store", &[("sqlx", None)]),
                package("sqlx", &[]),
            ],
            &["acdm-bff", "acdm-store"],
            vec![
                node("acdm-bff", &[("sqlx", &[None]), ("acdm-store", &[None])]),
                node("acdm-store", &[("sqlx", &[None])]),
            ],
        );
        assert_eq!(
            forbidden_violations(&meta, bff),
            ["acdm-bff depends directly on `sqlx`, which its layer leaves to another crate"]
        );
        let through_the_store = metadata(
            vec![
                package("acdm-bff", &[("acdm-store", None)]),
                package("acdm-store", &[("sqlx", None)]),
                package("sqlx", &[]),
            ],
            &["acdm-bff", "acdm-store"],
            vec![
                node("acdm-bff", &[("acdm-store", &[None])]),
                node("acdm-store", &[("sqlx", &[None])]),
            ],
        );
        assert!(forbidden_violations(&through_the_store, bff).is_empty());
    }

    #[test]
    fn sqlx_prefixes_and_other_members_are_forbidden_in_acdm_core() {
        let meta = metadata(
            vec![
                package("acdm-core", &[]),
                package("acdm-store", &[]),
                package("sqlx-sqlite", &[]),
            ],
            &["acdm-core", "acdm-store"],
            vec![
                node("acdm-core", &[("acdm-store", &[None])]),
                node("acdm-store", &[("sqlx-sqlite", &[None, Some("dev")])]),
            ],
        );
        let violations = forbidden_violations(&meta, &CORE_RULE);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(violations[0].contains("`acdm-store`: acdm-core -> acdm-store"));
        assert!(violations[1].contains("`sqlx-sqlite`: acdm-core -> acdm-store -> sqlx-sqlite"));
    }

    #[test]
    fn the_harness_client_may_use_acdm_core_but_not_the_server_crates() {
        let meta = metadata(
            vec![
                package("acdm-harness-client", &[]),
                package("acdm-core", &[]),
                package("acdm-bff", &[]),
                package("axum", &[]),
            ],
            &["acdm-harness-client", "acdm-core", "acdm-bff"],
            vec![
                node(
                    "acdm-harness-client",
                    &[("acdm-core", &[None]), ("acdm-bff", &[None])],
                ),
                node("acdm-bff", &[("axum", &[None])]),
            ],
        );
        let violations = forbidden_violations(&meta, &HARNESS_CLIENT_RULE);
        assert_eq!(
            violations,
            [
                "acdm-harness-client pulls in forbidden crate `acdm-bff`: acdm-harness-client -> acdm-bff",
                "acdm-harness-client pulls in forbidden crate `axum`: acdm-harness-client -> acdm-bff -> axum",
            ]
        );
    }

    #[test]
    fn a_missing_rule_root_is_reported() {
        let meta = metadata(vec![package("acdm-store", &[])], &["acdm-store"], vec![]);
        let violations = forbidden_violations(&meta, &CORE_RULE);
        assert_eq!(violations.len(), 1);
        assert!(violations[0].contains("acdm-core is not a workspace member"));
    }

    #[test]
    fn the_env_scanner_reports_std_env_var() {
        let text = "//! Config.\n\nfn port() -> String {\n    std::env::var(\"X\").unwrap_or_default()\n}\n";
        assert_eq!(
            env_reads("crates/x/src/lib.rs", text),
            ["crates/x/src/lib.rs:4: std::env::var(\"X\").unwrap_or_default()"]
        );
    }

    #[test]
    fn the_env_scanner_reports_every_kind_of_env_access() {
        for line in [
            "let v = env::vars();",
            "let v = std::env::var_os(\"X\");",
            "unsafe { std::env::set_var(\"X\", \"1\") };",
            "unsafe { env::remove_var(\"X\") };",
            "dotenvy::dotenv().ok();",
            "const V: Option<&str> = option_env!(\"X\");",
        ] {
            assert_eq!(env_reads("f.rs", line).len(), 1, "{line}");
        }
    }

    #[test]
    fn the_env_scanner_ignores_comments() {
        let text =
            "// std::env::var(\"X\") is read by the binary\n/// See env::var.\n//! env::var\n";
        assert_eq!(env_reads("f.rs", text), Vec::<String>::new());
    }

    #[test]
    fn the_allow_env_marker_with_a_reason_exempts_its_line_and_the_next() {
        let same_line = "let v = std::env::var(\"X\"); // tidy:allow-env: from_env() is the harness client's documented entry point";
        assert_eq!(env_reads("f.rs", same_line), Vec::<String>::new());
        let line_above = "// tidy:allow-env: from_env() is the documented entry point\nlet v = std::env::var(\"X\");\nlet w = std::env::var(\"Y\");\n";
        assert_eq!(
            env_reads("f.rs", line_above),
            ["f.rs:3: let w = std::env::var(\"Y\");"]
        );
    }

    #[test]
    fn outside_the_env_readers_the_marker_exempts_nothing() {
        let marked = "// tidy:allow-env: a good reason\nlet v = std::env::var(\"X\"); // tidy:allow-env: another\n";
        assert_eq!(env_reads("f.rs", marked), Vec::<String>::new());
        assert_eq!(
            env_reads_unexempted("f.rs", marked),
            ["f.rs:2: let v = std::env::var(\"X\"); //"]
        );
        assert!(ENV_READERS.contains(&"crates/acdm-harness-client/src/config.rs"));
    }

    #[test]
    fn the_allow_env_marker_without_a_reason_exempts_nothing() {
        assert!(!allows_env("// tidy:allow-env"));
        assert!(!allows_env("// tidy:allow-env:  "));
        assert!(allows_env("// tidy:allow-env: reason"));
        assert_eq!(
            env_reads("f.rs", "let v = std::env::var(\"X\"); // tidy:allow-env").len(),
            1
        );
    }

    #[test]
    fn a_file_without_a_leading_module_doc_is_reported() {
        assert!(starts_with_module_doc("\n\n//! Docs.\nfn f() {}\n"));
        assert!(starts_with_module_doc(
            "\u{feff}//! Docs with a byte-order mark.\n"
        ));
        assert!(!starts_with_module_doc("// A plain comment.\n//! Docs.\n"));
        assert!(!starts_with_module_doc("#![allow(unused)]\n//! Docs.\n"));
        assert!(!starts_with_module_doc("/// Item docs.\nfn f() {}\n"));
        assert!(!starts_with_module_doc(""));
    }

    #[test]
    fn a_manifest_without_workspace_lints_is_reported() {
        assert!(opts_into_workspace_lints(
            "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n"
        ));
        assert!(opts_into_workspace_lints(
            "[lints]  # inherit\nworkspace=true # yes\n[dependencies]\n"
        ));
        assert!(!opts_into_workspace_lints("[package]\nname = \"a\"\n"));
        assert!(!opts_into_workspace_lints(
            "[lints]\nworkspace = false\n[package]\nworkspace = true\n"
        ));
        assert!(!opts_into_workspace_lints(
            "[lints.rust]\nworkspace = true\n"
        ));
        assert!(!opts_into_workspace_lints(
            "[package]\nname = \"a\"\n# [lints]\n# workspace = true\n"
        ));
    }

    #[test]
    fn a_crate_the_architecture_doc_does_not_name_is_reported() {
        let doc = "# Architecture\n\n`acdm-core` is pure; acdm-store-extras is not a crate.\n";
        assert_eq!(
            names_missing_from(doc, ["acdm-core", "acdm-store", "xtask"]),
            ["acdm-store", "xtask"]
        );
    }

    /// A proc-macro package for hand-built metadata.
    fn proc_macro(name: &str) -> Value {
        let mut value = package(name, &[]);
        value["targets"] = json!([{ "kind": ["proc-macro"] }]);
        value
    }

    /// A member `app` running `serde` and `memchr`; serde's derive macro
    /// (on syn) and app's build script's `cc` only run in the compiler,
    /// and `cc` uses `memchr` too.
    fn compiler_and_programs() -> Metadata {
        metadata(
            vec![
                package("app", &[]),
                package("serde", &[]),
                proc_macro("serde_derive"),
                package("syn", &[]),
                package("cc", &[]),
                package("memchr", &[]),
                package("tempfile", &[]),
            ],
            &["app"],
            vec![
                node(
                    "app",
                    &[
                        ("serde", &[None]),
                        ("cc", &[Some("build")]),
                        ("tempfile", &[Some("dev")]),
                    ],
                ),
                node("serde", &[("serde_derive", &[None]), ("memchr", &[None])]),
                node("serde_derive", &[("syn", &[None])]),
                node("syn", &[]),
                node("cc", &[("memchr", &[None])]),
                node("memchr", &[]),
                node("tempfile", &[]),
            ],
        )
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_packages_only_the_compiler_runs_must_be_named_exactly() {
        let metadata = compiler_and_programs();
        assert!(profile::violations(&metadata, &names(&["cc", "serde_derive", "syn"])).is_empty());

        let missing = profile::violations(&metadata, &names(&["cc", "serde_derive"]));
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(
            missing[0].starts_with("`syn` only runs in the compiler"),
            "{missing:?}"
        );
        assert!(
            missing[0].contains("`syn = { opt-level = 0 }`"),
            "{missing:?}"
        );

        // memchr is used by the build script and by the program: optimised.
        let shared = profile::violations(
            &metadata,
            &names(&["cc", "serde_derive", "syn", "memchr", "tempfile"]),
        );
        assert_eq!(shared.len(), 2, "{shared:?}");
        assert!(shared[0].starts_with("`memchr` runs in our programs and tests too"));
        assert!(shared[1].starts_with("`tempfile` runs in our programs and tests too"));

        let gone = profile::violations(&metadata, &names(&["cc", "serde_derive", "syn", "pear"]));
        assert_eq!(gone.len(), 1, "{gone:?}");
        assert!(gone[0].starts_with("`pear` is no longer in the dependency graph"));
    }

    #[test]
    fn only_the_packages_at_opt_level_zero_count_as_named() {
        let manifest = r#"
[workspace]
members = []

[profile.dev.package]
"*" = { opt-level = 2, debug = false }
syn = { opt-level = 0 }
quote = { opt-level = 1 }

[profile.dev.package.serde_derive]
opt-level = 0

[profile.release.package.cc]
opt-level = 0
"#;
        assert_eq!(
            profile::unoptimised(manifest).unwrap(),
            names(&["serde_derive", "syn"])
        );
        assert!(profile::unoptimised("[workspace]\n").unwrap().is_empty());
        assert!(profile::unoptimised("[workspace\n").is_err());
    }
}
