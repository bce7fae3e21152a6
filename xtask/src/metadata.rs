//! The workspace's shape, read from `cargo metadata --format-version 1`.
//!
//! Only the fields the tidy checks need are deserialized: the workspace
//! members with the dependencies their manifests declare, and the resolved
//! dependency graph (`resolve.nodes`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde::Deserialize;

/// The subset of `cargo metadata` output the checks use.
#[derive(Debug, Deserialize)]
pub(crate) struct Metadata {
    /// Every package in the dependency graph, workspace members included.
    pub(crate) packages: Vec<Package>,
    /// Package ids of the workspace members.
    pub(crate) workspace_members: Vec<String>,
    /// The resolved graph; absent only with `--no-deps`.
    #[serde(default)]
    pub(crate) resolve: Option<Resolve>,
}

/// One package.
#[derive(Debug, Deserialize)]
pub(crate) struct Package {
    /// The opaque package id that `resolve` refers to.
    pub(crate) id: String,
    /// The package name, e.g. `acdm-core`.
    pub(crate) name: String,
    /// Path of the package's `Cargo.toml`.
    pub(crate) manifest_path: PathBuf,
    /// Dependencies as declared in the manifest.
    #[serde(default)]
    pub(crate) dependencies: Vec<Dependency>,
    /// The package's targets (its library, binaries, tests, …).
    #[serde(default)]
    pub(crate) targets: Vec<Target>,
}

/// One target of a package.
#[derive(Debug, Deserialize)]
pub(crate) struct Target {
    /// Its kinds: `lib`, `bin`, `proc-macro`, `custom-build`, …
    #[serde(default)]
    pub(crate) kind: Vec<String>,
}

impl Package {
    /// True for a procedural-macro crate: code only the compiler runs.
    pub(crate) fn is_proc_macro(&self) -> bool {
        self.targets
            .iter()
            .any(|target| target.kind.iter().any(|kind| kind == "proc-macro"))
    }
}

/// A dependency declared in a manifest.
#[derive(Debug, Deserialize)]
pub(crate) struct Dependency {
    /// The depended-on package's name (not its rename).
    pub(crate) name: String,
    /// `None` for a normal dependency, else `"build"` or `"dev"`.
    #[serde(default)]
    pub(crate) kind: Option<String>,
}

/// The resolved dependency graph.
#[derive(Debug, Deserialize)]
pub(crate) struct Resolve {
    /// One node per resolved package.
    pub(crate) nodes: Vec<Node>,
}

/// A resolved package and its resolved dependencies.
#[derive(Debug, Deserialize)]
pub(crate) struct Node {
    /// Package id.
    pub(crate) id: String,
    /// Resolved dependency edges.
    #[serde(default)]
    pub(crate) deps: Vec<NodeDep>,
}

/// One resolved edge.
#[derive(Debug, Deserialize)]
pub(crate) struct NodeDep {
    /// Package id of the dependency.
    pub(crate) pkg: String,
    /// The kinds this edge has (one package can be both a normal and a dev dependency).
    #[serde(default)]
    pub(crate) dep_kinds: Vec<DepKind>,
}

/// The kind of one resolved edge.
#[derive(Debug, Deserialize)]
pub(crate) struct DepKind {
    /// `None` for normal, else `"build"` or `"dev"`.
    #[serde(default)]
    pub(crate) kind: Option<String>,
}

/// True for the dependency kinds that end up in what a crate ships: normal
/// and build. Dev-dependencies are exempt from every architecture rule.
pub(crate) fn is_normal_or_build(kind: Option<&str>) -> bool {
    matches!(kind, None | Some("build"))
}

/// The cargo to run: the one that launched us (`$CARGO`), else `cargo` on `PATH`.
#[expect(
    clippy::disallowed_methods,
    reason = "xtask runs the cargo that launched it"
)]
pub(crate) fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"))
}

/// True for a variable `cargo run` sets for the program it runs (here,
/// xtask itself): they describe xtask, not the build a child cargo is asked
/// for.
fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "OUT_DIR"
        )
}

/// A `cargo` command without the variables `cargo run` set for xtask.
///
/// Build scripts watch some of them (ring's says
/// `rerun-if-env-changed=CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, …, and
/// cargo compares them with its own environment), so a child cargo that
/// inherited them rebuilt ring and every crate above it (rustls, reqwest,
/// sqlx, …), and the next plain `cargo run` rebuilt them back.
#[expect(
    clippy::disallowed_methods,
    reason = "xtask clears the variables `cargo run` set for it"
)]
pub(crate) fn cargo_command() -> Command {
    let mut command = Command::new(cargo());
    without_cargo_run_env(&mut command, std::env::vars_os().map(|(name, _)| name));
    command
}

fn without_cargo_run_env(command: &mut Command, names: impl Iterator<Item = OsString>) {
    for name in names {
        if name.to_str().is_some_and(set_by_cargo_run) {
            command.env_remove(name);
        }
    }
}

impl Metadata {
    /// Runs `cargo metadata --format-version 1` in `root` and parses it.
    pub(crate) fn load(root: &Path) -> anyhow::Result<Self> {
        let output = cargo_command()
            .args(["metadata", "--format-version", "1"])
            .current_dir(root)
            .output()
            .context("could not run `cargo metadata`")?;
        if !output.status.success() {
            bail!(
                "`cargo metadata` failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        serde_json::from_slice(&output.stdout).context("could not parse `cargo metadata` output")
    }

    /// The workspace members, in `workspace_members` order.
    pub(crate) fn members(&self) -> Vec<&Package> {
        self.workspace_members
            .iter()
            .filter_map(|id| self.packages.iter().find(|package| &package.id == id))
            .collect()
    }

    /// The names of the workspace members.
    pub(crate) fn member_names(&self) -> BTreeSet<&str> {
        self.members()
            .into_iter()
            .map(|package| package.name.as_str())
            .collect()
    }

    /// Package id to package name, for every package.
    pub(crate) fn names_by_id(&self) -> BTreeMap<&str, &str> {
        self.packages
            .iter()
            .map(|package| (package.id.as_str(), package.name.as_str()))
            .collect()
    }

    /// The resolved graph restricted to normal and build edges: package id
    /// to the ids it depends on. `None` if there is no `resolve` section.
    pub(crate) fn normal_and_build_edges(&self) -> Option<BTreeMap<String, Vec<String>>> {
        self.edges_where(is_normal_or_build)
    }

    /// The resolved graph restricted to edges with a kind `keep` accepts
    /// (`None` for normal, else `"build"` or `"dev"`): package id to the
    /// ids it depends on. `None` if there is no `resolve` section.
    pub(crate) fn edges_where(
        &self,
        keep: impl Fn(Option<&str>) -> bool,
    ) -> Option<BTreeMap<String, Vec<String>>> {
        let resolve = self.resolve.as_ref()?;
        let edges = resolve
            .nodes
            .iter()
            .map(|node| {
                let deps = node
                    .deps
                    .iter()
                    .filter(|dep| dep.dep_kinds.iter().any(|kind| keep(kind.kind.as_deref())))
                    .map(|dep| dep.pkg.clone())
                    .collect();
                (node.id.clone(), deps)
            })
            .collect();
        Some(edges)
    }
}

#[cfg(test)]
mod env_tests {
    use std::ffi::OsString;
    use std::process::Command;

    use super::without_cargo_run_env;

    #[test]
    fn a_child_cargo_gets_none_of_the_variables_cargo_run_set_for_xtask() {
        let mut command = Command::new("cargo");
        let names = [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_TARGET_DIR",
            "CARGO_HOME",
            "CARGO",
            "PATH",
            "ACDM_TEST_DATABASE_URL",
        ];
        without_cargo_run_env(&mut command, names.iter().map(OsString::from));
        let mut removed: Vec<String> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(
            removed,
            [
                "CARGO_MANIFEST_DIR",
                "CARGO_PKG_NAME",
                "CARGO_PKG_VERSION_MAJOR"
            ]
        );
    }
}
