//! Check g: no module cycle inside any crate.
//!
//! Each member's `src` is read as one module tree (`a.rs` and `a/mod.rs`
//! are module `a`, `a/b.rs` is `a::b`, and inline `mod x { … }` blocks are
//! modules too). Every path that starts at `crate::`, `$crate::`,
//! `super::` or `self::` (in `use` items, groups included, and in code) is
//! resolved against the module it is written in, and gives an edge between
//! the two *sibling* modules it connects: from `a::b` to `a::c::X`, the edge
//! `b → c` under `a`. A module referring to an item of its own parent
//! (`use super::*` in a test module, a child naming its parent's type) or
//! of its own child is not an edge. Comments and string literals are not
//! code, and a path that names no module is not an edge. The check fails on
//! every strongly connected set of siblings, naming one of its cycles and
//! where each of its edges is written.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{Context, relative, rust_files, unreadable};

/// A module's path from its crate's root (`[]` is the root).
type ModPath = Vec<String>;

/// Check g: every member's module graph is acyclic.
pub(super) fn check_module_cycles(cx: &Context) -> Vec<String> {
    let metadata = match cx.metadata() {
        Ok(metadata) => metadata,
        Err(violations) => return violations,
    };
    let mut violations = Vec::new();
    for package in metadata.members() {
        let Some(dir) = package.manifest_path.parent() else {
            continue;
        };
        let src = dir.join("src");
        let mut files = Vec::new();
        for file in rust_files(&src, &mut violations) {
            match fs::read_to_string(&file) {
                Ok(text) => files.push((file_module(&src, &file), relative(&cx.root, &file), text)),
                Err(error) => violations.push(unreadable(&cx.root, &file, &error)),
            }
        }
        violations.extend(
            module_cycles(&files)
                .into_iter()
                .map(|cycle| format!("{}: module cycle {cycle}", package.name)),
        );
    }
    violations
}

/// The module a file under `src` defines: `lib.rs`, `main.rs` and
/// `bin/*.rs` are roots; `mod.rs` is its folder.
fn file_module(src: &Path, file: &Path) -> ModPath {
    let mut parts: ModPath = file
        .strip_prefix(src)
        .unwrap_or(file)
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        let root = parts.is_empty() && (stem == "lib" || stem == "main");
        if parts.first().is_some_and(|p| p == "bin") {
            return Vec::new();
        }
        if stem != "mod" && !root {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// The cycles among sibling modules of one crate, given its files as
/// (module, shown path, text); each as `a → b → a (where: …)`.
pub(super) fn module_cycles(files: &[(ModPath, String, String)]) -> Vec<String> {
    let mut modules: BTreeSet<ModPath> = files.iter().map(|(module, ..)| module.clone()).collect();
    let mut references = Vec::new();
    for (module, shown, text) in files {
        let tokens = tokens(text);
        modules.extend(inline_modules(module, &tokens));
        for (from, target, line) in paths(module, &tokens) {
            references.push((from, target, format!("{shown}:{line}")));
        }
    }
    // Edges between siblings, by their parent: (parent, from, to) → where.
    let mut edges: BTreeMap<(ModPath, String, String), String> = BTreeMap::new();
    for (from, target, at) in references {
        let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
        let (Some(a), Some(b)) = (from.get(common), target.get(common)) else {
            continue;
        };
        let parent: ModPath = from.iter().take(common).cloned().collect();
        let mut sibling = parent.clone();
        sibling.push(b.clone());
        if modules.contains(&sibling) {
            edges.entry((parent, a.clone(), b.clone())).or_insert(at);
        }
    }
    let mut by_parent: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    for ((parent, from, to), at) in edges {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to, at);
    }
    let mut cycles = Vec::new();
    for (parent, graph) in &by_parent {
        for component in strongly_connected(graph) {
            if let Some(cycle) = cycle_within(graph, &component) {
                cycles.push(describe(parent, graph, &cycle));
            }
        }
    }
    cycles
}

/// `crate::a::b → crate::a::c → crate::a::b (a/b.rs:3, a/c.rs:9)`.
fn describe(
    parent: &ModPath,
    graph: &BTreeMap<String, BTreeMap<String, String>>,
    cycle: &[String],
) -> String {
    let name = |module: &String| {
        std::iter::once("crate")
            .chain(parent.iter().map(String::as_str))
            .chain(std::iter::once(module.as_str()))
            .collect::<Vec<_>>()
            .join("::")
    };
    let mut names: Vec<String> = cycle.iter().map(name).collect();
    if let Some(first) = cycle.first() {
        names.push(name(first));
    }
    let wheres: Vec<String> = cycle
        .iter()
        .zip(cycle.iter().cycle().skip(1))
        .filter_map(|(from, to)| {
            graph
                .get(from)
                .and_then(|targets| targets.get(to))
                .map(|at| format!("{from} → {to} at {at}"))
        })
        .collect();
    format!("{} ({})", names.join(" → "), wheres.join("; "))
}

/// Tarjan's strongly connected components with more than one module.
fn strongly_connected(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g str) {
        let index = state.index.len();
        state.index.insert(node, index);
        state.low.insert(node, index);
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            let next = next.as_str();
            let low = if !state.index.contains_key(next) {
                visit(state, next);
                state.low.get(next).copied()
            } else if state.on_stack.contains(next) {
                state.index.get(next).copied()
            } else {
                None
            };
            if let Some(low) = low {
                let own = state.low.get(node).copied().unwrap_or(low);
                state.low.insert(node, low.min(own));
            }
        }
        if state.low.get(node) == state.index.get(node) {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// One cycle through the first module of `component` (a shortest one, by
/// breadth-first search inside the component).
fn cycle_within(
    graph: &BTreeMap<String, BTreeMap<String, String>>,
    component: &[String],
) -> Option<Vec<String>> {
    let start = component.first()?;
    let inside: BTreeSet<&String> = component.iter().collect();
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut cycle = vec![node.clone()];
                let mut at = node;
                while at != start {
                    at = came_from.get(at)?;
                    cycle.push(at.clone());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if inside.contains(next) && !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// A token of Rust code: identifiers (`$crate` included), `::` and single
/// punctuation; comments, strings and characters are dropped. Each with
/// its line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Path,
    Punct(char),
}

/// `text` as tokens with their 1-based lines.
fn tokens(text: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = at(i);
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && at(i) != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if at(i) == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some(quote) = string_start(&chars, i) {
            // "…", b"…", r"…", r#"…"#, br#"…"#: skip to the matching end.
            let raw = chars.get(i..quote).is_some_and(|p| p.contains(&'r'));
            let hashes = chars
                .get(i..quote)
                .map_or(0, |p| p.iter().filter(|c| **c == '#').count());
            let mut j = quote + 1;
            while j < chars.len() {
                let d = at(j);
                if d == '\n' {
                    line += 1;
                }
                if d == '\\' && !raw {
                    j += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|h| at(j + 1 + h) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == '\'' {
            // A character ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < chars.len() && at(j) != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c == '$' || c == '_' || c.is_alphabetic() {
            let start = i;
            i += 1;
            while at(i) == '_' || at(i).is_alphanumeric() {
                i += 1;
            }
            let word: String = chars.get(start..i).unwrap_or_default().iter().collect();
            out.push((Token::Ident(word), line));
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Token::Path, line));
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push((Token::Punct(c), line));
            }
            i += 1;
        }
    }
    out
}

/// Where the opening quote is when a string literal starts at `i`
/// (`"`, `b"`, `r"`, `r#"`, `br#"`), not an identifier such as `r#type`
/// or one that merely begins with `r` or `b`.
fn string_start(chars: &[char], i: usize) -> Option<usize> {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    if i > 0 && (at(i - 1).is_alphanumeric() || at(i - 1) == '_') && at(i) != '"' {
        return None;
    }
    let mut j = i;
    if at(j) == 'b' {
        j += 1;
    }
    if at(j) == 'r' {
        j += 1;
        while at(j) == '#' {
            j += 1;
        }
    }
    (at(j) == '"').then_some(j)
}

/// The inline modules (`mod x { … }`) of a file's tokens, as full paths.
fn inline_modules(module: &ModPath, tokens: &[(Token, usize)]) -> Vec<ModPath> {
    let mut found = Vec::new();
    walk(module, tokens, |current, _, _| found.push(current.to_vec()));
    found
}

/// Calls `visit(current module, index, tokens)` at each token, tracking
/// inline modules by their braces; also once at each inline module's
/// opening brace.
fn walk(
    module: &ModPath,
    tokens: &[(Token, usize)],
    mut visit: impl FnMut(&[String], usize, bool),
) {
    let mut current = module.clone();
    // The brace depth at which each open inline module closes.
    let mut closes: Vec<usize> = Vec::new();
    let mut depth = 0_usize;
    let mut pending: Option<String> = None;
    for (index, (token, _)) in tokens.iter().enumerate() {
        match token {
            Token::Ident(word) if word == "mod" => {
                if let Some((Token::Ident(name), _)) = tokens.get(index + 1) {
                    pending = Some(name.clone());
                }
            }
            Token::Punct('{') => {
                depth += 1;
                if let Some(name) = pending.take() {
                    current.push(name);
                    closes.push(depth);
                    visit(&current, index, true);
                }
            }
            Token::Punct('}') => {
                if closes.last() == Some(&depth) {
                    closes.pop();
                    current.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Token::Punct(';') => pending = None,
            _ => {}
        }
        visit(&current, index, false);
    }
}

/// Every `crate::`, `$crate::`, `super::` and `self::` path of a file, as
/// (the module it is written in, the module path it names, its line).
fn paths(module: &ModPath, tokens: &[(Token, usize)]) -> Vec<(ModPath, ModPath, usize)> {
    let mut found = Vec::new();
    walk(module, tokens, |current, index, opening| {
        if opening {
            return;
        }
        let Some((Token::Ident(word), line)) = tokens.get(index) else {
            return;
        };
        let after_path = index > 0
            && tokens
                .get(index - 1)
                .is_some_and(|(t, _)| *t == Token::Path);
        if after_path || tokens.get(index + 1).is_none_or(|(t, _)| *t != Token::Path) {
            return;
        }
        let mut base: ModPath = match word.as_str() {
            "crate" | "$crate" => Vec::new(),
            "self" => current.to_vec(),
            "super" => {
                let mut base = current.to_vec();
                base.pop();
                base
            }
            _ => return,
        };
        let mut at = index + 1;
        // Further `super::`s.
        while tokens.get(at).is_some_and(|(t, _)| *t == Token::Path)
            && tokens
                .get(at + 1)
                .is_some_and(|(t, _)| *t == Token::Ident("super".to_owned()))
        {
            base.pop();
            at += 2;
        }
        for target in tails(tokens, at, &base) {
            found.push((current.to_vec(), target, *line));
        }
    });
    found
}

/// The paths named from `at` (a `::`) on, each appended to `base`:
/// `::a::b` gives `base::a::b`; `::{a::b, c, self}` gives each item.
fn tails(tokens: &[(Token, usize)], at: usize, base: &ModPath) -> Vec<ModPath> {
    let mut path = base.clone();
    let mut at = at;
    while tokens.get(at).is_some_and(|(t, _)| *t == Token::Path) {
        match tokens.get(at + 1) {
            Some((Token::Ident(segment), _)) => {
                if segment != "self" {
                    path.push(segment.clone());
                }
                at += 2;
            }
            Some((Token::Punct('{'), _)) => return group(tokens, at + 2, &path),
            _ => break,
        }
    }
    vec![path]
}

/// The items of a `{ … }` group starting at `at` (after the brace).
fn group(tokens: &[(Token, usize)], at: usize, base: &ModPath) -> Vec<ModPath> {
    let mut found = Vec::new();
    let mut at = at;
    let mut depth = 0_usize;
    let mut item_start = true;
    while let Some((token, _)) = tokens.get(at) {
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') if depth == 0 => break,
            Token::Punct('}') => depth -= 1,
            Token::Punct(',') if depth == 0 => {
                item_start = true;
                at += 1;
                continue;
            }
            Token::Ident(segment) if item_start && depth == 0 => {
                let mut path = base.clone();
                if segment != "self" {
                    path.push(segment.clone());
                }
                found.extend(tails(tokens, at + 1, &path));
            }
            _ => {}
        }
        item_start = false;
        at += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{file_module, module_cycles};
    use std::path::Path;

    /// A crate from `(module path, text)` pairs.
    fn krate(files: &[(&str, &str)]) -> Vec<(Vec<String>, String, String)> {
        files
            .iter()
            .map(|(module, text)| {
                let path: Vec<String> = module
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                let shown = if path.is_empty() {
                    "lib.rs".to_owned()
                } else {
                    format!("{}.rs", path.join("/"))
                };
                (path, shown, (*text).to_owned())
            })
            .collect()
    }

    #[test]
    fn two_modules_that_use_each_other_are_a_cycle_named_with_where_each_edge_is() {
        let files = krate(&[
            ("", "mod a;\nmod b;\n"),
            ("a", "use crate::b::B;\npub struct A;\n"),
            (
                "b",
                "//! b\n\npub struct B;\nfn f() -> crate::a::A { todo!() }\n",
            ),
        ]);
        assert_eq!(
            module_cycles(&files),
            vec!["crate::a → crate::b → crate::a (a → b at a.rs:1; b → a at b.rs:4)"]
        );
    }

    #[test]
    fn a_cycle_through_super_groups_and_nested_siblings_is_found() {
        let files = krate(&[
            ("", "mod top;\n"),
            ("top", "mod x;\nmod y;\nmod z;\n"),
            ("top::x", "use super::{y::{self, Y}, Other};\n"),
            ("top::y", "use super::z;\n"),
            ("top::z", "fn f() { let _ = super::super::top::x::X; }\n"),
        ]);
        assert_eq!(
            module_cycles(&files),
            vec![
                "crate::top::x → crate::top::y → crate::top::z → crate::top::x \
                 (x → y at top/x.rs:1; y → z at top/y.rs:1; z → x at top/z.rs:1)"
            ]
        );
    }

    #[test]
    fn a_child_using_its_parent_and_a_one_way_chain_are_no_cycle() {
        let files = krate(&[
            ("", "mod a;\nmod b;\nmod c;\npub struct Root;\n"),
            // A test module's `super::*` and a child naming its parent's items.
            (
                "a",
                "mod inner { use super::*; use crate::a::A; }\npub struct A;\n\
                 #[cfg(test)]\nmod tests { use super::*; use super::super::b::B; }\n",
            ),
            ("b", "use crate::c::C;\nuse crate::Root;\npub struct B;\n"),
            ("c", "pub struct C;\n"),
        ]);
        assert_eq!(module_cycles(&files), Vec::<String>::new());
    }

    #[test]
    fn paths_in_comments_and_strings_are_not_references() {
        let files = krate(&[
            ("", "mod a;\nmod b;\n"),
            ("a", "use crate::b::B;\n"),
            (
                "b",
                "// crate::a::A\n/* crate::a */ const S: &str = \"crate::a::A\";\n\
                 const R: &str = r#\"crate::a\"#; const C: char = '\"'; fn f<'a>(x: &'a str) {}\n",
            ),
        ]);
        assert_eq!(module_cycles(&files), Vec::<String>::new());
    }

    #[test]
    fn an_inline_module_is_a_module_of_its_own() {
        let files = krate(&[(
            "",
            "mod a { pub fn f() { crate::b::g() } }\nmod b { pub fn g() { super::a::f() } }\n",
        )]);
        assert_eq!(
            module_cycles(&files),
            vec!["crate::a → crate::b → crate::a (a → b at lib.rs:1; b → a at lib.rs:2)"]
        );
    }

    #[test]
    fn files_name_their_modules() {
        let src = Path::new("/c/src");
        let of = |file: &str| file_module(src, &src.join(file)).join("::");
        assert_eq!(of("lib.rs"), "");
        assert_eq!(of("main.rs"), "");
        assert_eq!(of("a.rs"), "a");
        assert_eq!(of("a/mod.rs"), "a");
        assert_eq!(of("a/b.rs"), "a::b");
    }
}
