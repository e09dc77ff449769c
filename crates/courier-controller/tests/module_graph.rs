//! The module graph of courier-controller has no cycles (#15 §2): every top-level module of `src/`
//! (a file `src/x.rs` or a directory `src/x/`, plus the crate root `lib`) may use the modules below
//! it, never one that uses it back. A cycle means a hub: one place every module reaches into and
//! that reaches into all of them.
//!
//! The graph is read from the source text: `crate::x` paths (in `use` lists and inline), `super::`
//! paths that climb out of a top-level module, and in `lib.rs` the paths that start with a module
//! name. Comments are skipped. `crate::Item` where `Item` is not a module is an edge to `lib`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file below `src/`: `src/a/b.rs` -> [a, b], `src/a/mod.rs` -> [a],
/// `src/lib.rs` -> [].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The text without comments and string literals (their contents are not paths).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the paths after a `prefix::` at the start of `rest`: one for `a::b`,
/// several for `{a::b, c, d::{e}}`.
fn first_segments(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut out = Vec::new();
        let mut depth = 0usize;
        let mut start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if start && !c.is_whitespace() => {
                    start = false;
                    let id = ident_at(&group[i..]);
                    if !id.is_empty() && id != "self" {
                        out.push(id.to_string());
                    }
                }
                _ => {}
            }
        }
        out
    } else {
        let id = ident_at(rest);
        if id.is_empty() {
            Vec::new()
        } else {
            vec![id.to_string()]
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every `word::` in `code` (not preceded by another identifier character or `::`), with what
/// follows it.
fn paths_after<'a>(code: &'a str, word: &str) -> Vec<&'a str> {
    let needle = format!("{word}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(&needle) {
        let pos = from + at;
        let before = code[..pos].chars().next_back();
        let glued = before.is_some_and(is_ident_char) || code[..pos].ends_with("::");
        if !glued {
            out.push(&code[pos + needle.len()..]);
        }
        from = pos + needle.len();
    }
    out
}

/// Top-level module -> the top-level modules it uses.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let top_of = |path: &[String]| path.first().cloned().unwrap_or_else(|| "lib".to_string());
    let modules: BTreeSet<String> = files.iter().map(|f| top_of(&module_path(src, f))).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let path = module_path(src, f);
        let me = top_of(&path);
        let text = std::fs::read_to_string(f)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        let code = code_only(&text);
        let mut targets = Vec::new();
        for rest in paths_after(&code, "crate") {
            for seg in first_segments(rest) {
                targets.push(if modules.contains(&seg) {
                    seg
                } else {
                    "lib".to_string()
                });
            }
        }
        // `super::` climbs one level per occurrence; it leaves the top-level module only from the
        // module's own file or deeper `super::super::` chains. A `super::` at the top of a module's
        // own file is taken to be inside its `mod tests` (nothing else in this crate does that).
        for rest in paths_after(&code, "super") {
            let mut ups = 1;
            let mut tail = rest;
            while let Some(t) = tail.strip_prefix("super::") {
                ups += 1;
                tail = t;
            }
            if ups < path.len() {
                continue;
            }
            if ups == path.len() && path.len() > 1 {
                // Lands on the top-level module itself.
                continue;
            }
            if ups > path.len() {
                for seg in first_segments(tail) {
                    if modules.contains(&seg) {
                        targets.push(seg);
                    }
                }
            }
        }
        if path.is_empty() {
            for m in &modules {
                if !paths_after(&code, m).is_empty() {
                    targets.push(m.clone());
                }
            }
        }
        let entry = edges.entry(me.clone()).or_default();
        for t in targets {
            if t != me {
                entry.insert(t);
            }
        }
    }
    edges
}

/// One cycle through the graph, if there is any (as the list of modules along it).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|s| s == n).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(n.to_string(), Mark::Open);
        stack.push(n.to_string());
        for next in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, edges, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in edges.keys() {
        let mut stack = Vec::new();
        if let Some(c) = visit(n, edges, &mut marks, &mut stack) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    if let Some(cycle) = find_cycle(&edges) {
        let listing: Vec<String> = edges
            .iter()
            .map(|(m, to)| {
                format!(
                    "  {m} -> {}",
                    to.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "courier-controller's modules import each other in a cycle: {}\nthe graph:\n{}",
            cycle.join(" -> "),
            listing.join("\n")
        );
    }
}

/// The reader itself: a graph with a cycle is found, one without is not (a checker that never
/// fails proves nothing).
#[test]
fn the_reader_finds_cycles_and_edges() {
    let e = |pairs: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    assert!(find_cycle(&e(&[("a", "b"), ("b", "c")])).is_none());
    assert_eq!(
        find_cycle(&e(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let code = code_only(
        "use crate::{a::X, b, self};\n// crate::c\nlet s = \"crate::d\";\ncrate::e::f();\nsuper::super::g::h",
    );
    let segs: Vec<String> = paths_after(&code, "crate")
        .into_iter()
        .flat_map(first_segments)
        .collect();
    assert_eq!(segs, ["a", "b", "e"]);
    assert_eq!(
        paths_after(&code, "super").len(),
        1,
        "super::super is one path"
    );
}
