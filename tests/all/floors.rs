//! The modules of every crate stand in floors: no module uses one that
//! uses it back, directly or round a circle. Read from the sources: each
//! file's `use` trees and its `crate::`, `super::` and `self::` paths,
//! resolved to the module file they name (a name the crate root re-exports,
//! to the module it comes from). A module may use its own ancestors (its
//! folder's face, which declares it) without that counting as a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source folders, from the workspace's root.
const CRATES: [&str; 8] = [
    "protocol/src",
    "host/library/src",
    "host/mcp/src",
    "host/check/src",
    "host/service/src",
    "host/cli/src",
    "plugin-sdk/src",
    "plugin-sdk/macros/src",
];

type ModulePath = Vec<String>;

/// A path a `use` names, its alias (`as`), and whether the `use` is public
/// (a re-export).
struct Used {
    path: ModulePath,
    alias: Option<String>,
    public: bool,
}

/// A crate's modules: each module's path and its file.
fn modules(src: &Path) -> BTreeMap<ModulePath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src");
            let mut segments: ModulePath =
                relative.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(segments.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                segments.pop();
            }
            found.insert(segments, path);
        }
    }
    found
}

/// The text with comments and string literals blanked out, and without
/// the unit tests' module (imports of the file's own items).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("'\"'") || text[i..].starts_with("'\\\"'") {
            // A quote as a character, not a string's start.
            i += if bytes[i + 1] == b'\\' { 4 } else { 3 };
            out.push_str("' '");
        } else if text[i..].starts_with("r#\"") || text[i..].starts_with("r\"") {
            let hashes = text[i + 1..].bytes().take_while(|b| *b == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = i + 2 + hashes;
            i = text[start..].find(&close).map_or(bytes.len(), |end| start + end + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = text[i..].chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The paths a `use` tree names (`a::{b, c::{d, e}}`), each whole.
fn expand_tree(prefix: &[String], tree: &str, out: &mut Vec<(ModulePath, Option<String>)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let base: ModulePath = split_path(&tree[..open]);
        let mut prefix = prefix.to_vec();
        prefix.extend(base);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (at, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_tree(&prefix, &inner[start..at], out);
                    start = at + 1;
                }
                _ => {}
            }
        }
        expand_tree(&prefix, &inner[start..], out);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim().to_owned())),
        None => (tree, None),
    };
    let mut whole = prefix.to_vec();
    whole.extend(split_path(path).into_iter().filter(|s| s != "self" || prefix.is_empty()));
    if !whole.is_empty() {
        out.push((whole, alias));
    }
}

fn split_path(text: &str) -> ModulePath {
    text.split("::").map(str::trim).filter(|s| !s.is_empty() && *s != "*").map(str::to_owned).collect()
}

/// Every path of a file's code: its `use` trees (with their aliases) and
/// its `crate::`/`super::`/`self::` paths.
fn paths_in(code: &str) -> (Vec<Used>, Vec<ModulePath>) {
    let mut uses = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        let after = &rest[at + 4..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = after.find(';') else { break };
        let public = code[..code.len() - after.len() - 4].trim_end().ends_with("pub")
            || code[..code.len() - after.len() - 4].trim_end().ends_with(')');
        let mut expanded = Vec::new();
        expand_tree(&[], &after[..end], &mut expanded);
        uses.extend(expanded.into_iter().map(|(path, alias)| Used { path, alias, public }));
        rest = &after[end..];
    }
    let mut inline = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(start) {
            let before = rest[..at].chars().last();
            let tail = &rest[at..];
            rest = &tail[start.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let end = tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
            inline.push(split_path(&tail[..end]));
        }
    }
    (uses, inline)
}

/// The module a path used in module `from` names: the longest prefix that
/// is a module; a name the root re-exports, where it comes from.
fn resolve(
    from: &ModulePath,
    path: &ModulePath,
    modules: &BTreeMap<ModulePath, PathBuf>,
    exports: &BTreeMap<String, ModulePath>,
) -> Option<ModulePath> {
    let mut base: ModulePath = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            from[..from.len().checked_sub(supers)?].to_vec()
        }
        Some("self") => from.clone(),
        // A child module of this one (`mod x;` then `use x::...`).
        Some(first) if modules.contains_key(&[from.clone(), vec![first.to_owned()]].concat()) => from.clone(),
        _ => return None,
    };
    let rest = path.iter().skip_while(|s| matches!(s.as_str(), "crate" | "super" | "self"));
    let mut found = base.clone();
    for segment in rest {
        base.push(segment.clone());
        if modules.contains_key(&base) {
            found = base.clone();
        } else {
            // The first segment past the modules: a name re-exported by the root?
            if found.is_empty()
                && let Some(origin) = exports.get(segment)
            {
                return resolve(
                    &Vec::new(),
                    &[vec!["crate".to_owned()], origin.clone()].concat(),
                    modules,
                    &BTreeMap::new(),
                );
            }
            break;
        }
    }
    Some(found)
}

/// One crate's circles, each as its files' paths and what ties them
/// (`file -> file: the paths used`).
fn circles(src: &Path) -> Vec<Vec<String>> {
    let modules = modules(src);
    let root_code = code_of(&std::fs::read_to_string(&modules[&Vec::new()]).expect("the crate root"));
    let mut exports = BTreeMap::new();
    for Used { path, alias, public } in paths_in(&root_code).0 {
        if public && let Some(name) = alias.or_else(|| path.last().cloned()) {
            exports.insert(name, path);
        }
    }
    let mut edges: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    let mut ties: BTreeMap<(ModulePath, ModulePath), BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let code = code_of(&std::fs::read_to_string(file).expect("a source file"));
        let (uses, inline) = paths_in(&code);
        for path in uses.into_iter().map(|used| used.path).chain(inline) {
            let Some(target) = resolve(module, &path, &modules, &exports) else { continue };
            // Itself, or an ancestor (its folder's face): not a floor above.
            if module.starts_with(&target) {
                continue;
            }
            ties.entry((module.clone(), target.clone())).or_default().insert(path.join("::"));
            edges.entry(module.clone()).or_default().insert(target);
        }
    }
    // Strongly connected components of two or more modules are circles.
    let mut graph = petgraph::graph::DiGraph::<&ModulePath, ()>::new();
    let nodes: BTreeMap<&ModulePath, petgraph::graph::NodeIndex> =
        modules.keys().map(|module| (module, graph.add_node(module))).collect();
    for (from, targets) in &edges {
        for to in targets {
            if let (Some(&a), Some(&b)) = (nodes.get(from), nodes.get(to)) {
                graph.add_edge(a, b, ());
            }
        }
    }
    let found: Vec<Vec<ModulePath>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| component.into_iter().map(|node| graph[node].clone()).collect())
        .collect();
    let file = |m: &ModulePath| modules[m].strip_prefix(src).unwrap_or(&modules[m]).display().to_string();
    found
        .into_iter()
        .map(|component| {
            let mut lines: Vec<String> = component.iter().map(&file).collect();
            for ((from, to), used) in &ties {
                if component.contains(from) && component.contains(to) {
                    let used: Vec<&str> = used.iter().map(String::as_str).collect();
                    lines.push(format!("{} -> {}: {}", file(from), file(to), used.join(", ")));
                }
            }
            lines
        })
        .collect()
}

#[test]
fn every_crates_modules_stand_in_floors_without_a_circle() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for src in CRATES {
        found.extend(circles(&root.join(src)).into_iter().map(|circle| format!("{src}:\n  {}", circle.join("\n  "))));
    }
    assert!(found.is_empty(), "modules that use each other round a circle:\n{}", found.join("\n"));
}

#[test]
fn the_floors_check_finds_a_circle_and_sees_through_re_exports() {
    let dir = std::env::temp_dir().join(format!("toolhost-floors-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).expect("scratch crate");
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write a module");
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n");
    write("a.rs", "mod inner;\nuse crate::b::B;\n// use crate::c::C; (a comment)\n");
    write("a/inner.rs", "use super::A;\nconst S: &str = \"crate::c::X\";\n");
    write("b.rs", "pub(crate) fn f() -> crate::Thing { todo!() }\n");
    write("c.rs", "use crate::a::{self, inner::Z};\n");
    let found = circles(&dir);
    // a -> b -> c (through the re-export) -> a; a's child using it is not one,
    // and neither are the comment and the string.
    assert_eq!(found.len(), 1, "{found:?}");
    let mut files: Vec<&str> = found[0].iter().filter(|line| !line.contains(" -> ")).map(String::as_str).collect();
    files.sort();
    assert_eq!(files, ["a.rs", "b.rs", "c.rs"], "{found:?}");
    // Without the re-exported edge, no circle.
    write("b.rs", "pub(crate) fn f() {}\n");
    assert!(circles(&dir).is_empty(), "{:?}", circles(&dir));
    std::fs::remove_dir_all(&dir).ok();
}
