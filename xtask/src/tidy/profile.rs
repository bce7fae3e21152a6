//! Check h: what only the compiler runs is built unoptimised in dev builds.
//!
//! `[profile.dev.package."*"]` optimises every dependency, because the
//! tests drive their requests through serde, tokio, rmcp and sqlx. Cargo
//! applies that glob to procedural macros and to what they and build
//! scripts depend on too (it outranks `build-override`). Optimising syn and the
//! derive macros was 271 of the 633 seconds of CPU a clean
//! `cargo build -p acdm-backend` took (5 min 22 s on two cores; 3 min 4 s
//! without), for nothing our programs ever run. So every
//! package that only the compiler runs is named in the root manifest with
//! `opt-level = 0`, which outranks the glob.
//!
//! This check computes that set from the resolved graph — every package
//! not reachable from a member through normal and dev edges without
//! crossing into a procedural macro — and fails on one that is missing
//! from the manifest, and on one named there that our programs also run
//! (it would slow the tests) or that the graph no longer has.

use std::collections::BTreeSet;
use std::fs;

use super::Context;
use crate::metadata::Metadata;

/// The root manifest's table of per-package settings for dev builds.
const TABLE: &str = "[profile.dev.package]";

/// Check h: the packages only the compiler runs are exactly those the
/// root manifest builds with `opt-level = 0`.
pub(super) fn check_build_time_packages(cx: &Context) -> Vec<String> {
    let metadata = match cx.metadata() {
        Ok(metadata) => metadata,
        Err(violations) => return violations,
    };
    let path = cx.root.join("Cargo.toml");
    let manifest = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) => return vec![super::unreadable(&cx.root, &path, &error)],
    };
    match unoptimised(&manifest) {
        Ok(named) => violations(metadata, &named),
        Err(error) => vec![format!("Cargo.toml: {error}")],
    }
}

/// The packages the manifest's `[profile.dev.package]` builds at
/// `opt-level = 0`.
pub(super) fn unoptimised(manifest: &str) -> Result<BTreeSet<String>, String> {
    let value: toml::Table = manifest
        .parse()
        .map_err(|error| format!("is not TOML: {error}"))?;
    let Some(packages) = value
        .get("profile")
        .and_then(|profile| profile.get("dev"))
        .and_then(|dev| dev.get("package"))
        .and_then(toml::Value::as_table)
    else {
        return Ok(BTreeSet::new());
    };
    Ok(packages
        .iter()
        .filter(|(_, settings)| {
            settings.get("opt-level").and_then(toml::Value::as_integer) == Some(0)
        })
        .map(|(name, _)| name.clone())
        .collect())
}

/// What differs between the packages only the compiler runs and `named`.
pub(super) fn violations(metadata: &Metadata, named: &BTreeSet<String>) -> Vec<String> {
    let Some((run, build_time)) = split(metadata) else {
        return vec!["`cargo metadata` gave no resolved graph".to_owned()];
    };
    let mut violations = Vec::new();
    for name in build_time.difference(&named.iter().map(String::as_str).collect()) {
        violations.push(format!(
            "`{name}` only runs in the compiler (a procedural macro, a build script or one of \
             their dependencies) and is built optimised: give it `{name} = {{ opt-level = 0 }}` \
             under {TABLE} in Cargo.toml"
        ));
    }
    for name in named {
        if run.contains(name.as_str()) {
            violations.push(format!(
                "`{name}` runs in our programs and tests too, yet {TABLE} builds it with \
                 `opt-level = 0`: remove it there"
            ));
        } else if !build_time.contains(name.as_str()) {
            violations.push(format!(
                "`{name}` is no longer in the dependency graph: remove it from {TABLE}"
            ));
        }
    }
    violations
}

/// The names of the packages our programs run, and of those only the
/// compiler runs; `None` without a resolved graph.
fn split(metadata: &Metadata) -> Option<(BTreeSet<&str>, BTreeSet<&str>)> {
    let edges = metadata.edges_where(|kind| matches!(kind, None | Some("dev")))?;
    let names = metadata.names_by_id();
    let proc_macros: BTreeSet<&str> = metadata
        .packages
        .iter()
        .filter(|package| package.is_proc_macro())
        .map(|package| package.id.as_str())
        .collect();
    let mut reached: BTreeSet<&str> = BTreeSet::new();
    let mut stack: Vec<&str> = metadata
        .workspace_members
        .iter()
        .map(String::as_str)
        .collect();
    while let Some(id) = stack.pop() {
        if !reached.insert(id) {
            continue;
        }
        for dep in edges.get(id).into_iter().flatten() {
            if !proc_macros.contains(dep.as_str()) {
                stack.push(dep.as_str());
            }
        }
    }
    let run: BTreeSet<&str> = reached
        .iter()
        .filter_map(|id| names.get(id).copied())
        .collect();
    let build_time = edges
        .keys()
        .filter_map(|id| names.get(id.as_str()).copied())
        .filter(|name| !run.contains(name))
        .collect();
    Some((run, build_time))
}
