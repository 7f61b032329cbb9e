//! A crate's shape, read from its source: which modules import which, and the circles
//! among them. Every crate of the workspace holds itself to "no two modules import each
//! other, directly or through others" with [`assert_no_circles`] in a test of its own.
//! Every `crate::` and `super::` path outside test modules and comments is an edge from
//! the module it is written in to the module it names; a module and its own children are
//! one unit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`worker::finish`) to its source text, test modules cut off.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => &text[..i],
                None => &text[..],
            };
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            out.insert(parts.join("::"), code);
        }
    }
    out
}

/// The module a path names: its longest prefix that is a module.
fn resolve(path: &[&str], here: &str, known: &BTreeMap<String, String>) -> Option<String> {
    let mut segs: Vec<&str> = match path.first() {
        Some(&"crate") => path[1..].to_vec(),
        Some(&"super") => {
            let mut base: Vec<&str> = here.split("::").filter(|s| !s.is_empty()).collect();
            let mut rest = path;
            while rest.first() == Some(&"super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend_from_slice(rest);
            base
        }
        _ => return None,
    };
    while !segs.is_empty() {
        let name = segs.join("::");
        if known.contains_key(&name) {
            return Some(name);
        }
        segs.pop();
    }
    None
}

/// Every `crate::a::b` or `super::a` path in `code`, with `{x, y::z}` groups expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            let base: Vec<String> = code[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if code[end..].starts_with('{') {
                let close = code[end..].find('}').map_or(code.len(), |c| end + c);
                for item in code[end + 1..close].split(',') {
                    let mut p = base.clone();
                    p.extend(item.trim().split("::").map(|s| s.trim().to_string()));
                    out.push(p);
                }
            } else {
                out.push(base);
            }
        }
    }
    out
}

/// Modules that are on an import circle, each circle sorted.
pub fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // A module is on a circle with `m` when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in &edges[&m] {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|m| (m, reach(m))).collect();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for (m, r) in &reached {
        let mut circle: Vec<String> = r
            .iter()
            .filter(|o| reached[o].contains(*m))
            .cloned()
            .collect();
        if !circle.is_empty() {
            circle.sort();
            circle.dedup();
            found.insert(circle);
        }
    }
    found.into_iter().collect()
}

pub fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, code) in &mods {
        let targets = edges.entry(m.clone()).or_default();
        for p in paths(code) {
            let segs: Vec<&str> = p.iter().map(String::as_str).collect();
            let Some(to) = resolve(&segs, m, &mods) else {
                continue;
            };
            // A module and its own children are one unit here.
            let related =
                to == *m || m.starts_with(&format!("{to}::")) || to.starts_with(&format!("{m}::"));
            if !related {
                targets.insert(to);
            }
        }
    }
    edges
}

/// Panics, naming them, if the modules under `src` (a crate's `src` directory) import
/// each other in a circle.
pub fn assert_no_circles(src: &Path) {
    let found = circles(&graph(src));
    assert!(
        found.is_empty(),
        "import circles in {}: {found:?}",
        src.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_sees_a_circle_when_there_is_one() {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        std::fs::write(
            dir.path().join("lib.rs"),
            "pub mod a;\npub mod b;\npub mod c;\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("a.rs"), "use crate::b::X;\n").unwrap();
        std::fs::write(dir.path().join("b.rs"), "use crate::{c::Y, a};\n").unwrap();
        std::fs::write(
            dir.path().join("c.rs"),
            "// crate::a in a comment is no edge\n",
        )
        .unwrap();
        assert_eq!(circles(&graph(dir.path())), vec![vec!["a", "b"]]);
        // `super::` from a top-level module names a sibling
        std::fs::write(dir.path().join("a.rs"), "use crate::c;\n").unwrap();
        std::fs::write(dir.path().join("c.rs"), "use super::a::Z;\n").unwrap();
        assert_eq!(circles(&graph(dir.path())), vec![vec!["a", "c"]]);
        std::fs::write(dir.path().join("c.rs"), "pub struct Z;\n").unwrap();
        assert_eq!(circles(&graph(dir.path())), Vec::<Vec<String>>::new());
    }

    #[test]
    fn the_testkit_itself_has_no_circles() {
        assert_no_circles(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    }
}
