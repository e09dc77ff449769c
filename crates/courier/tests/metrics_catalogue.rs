//! docs/operations.md's metric catalogue (the table under "### Metric catalogue") and the
//! controller's metrics (`Metrics::new().catalogue()`: every registered family, with or without a
//! sample yet) name the same families, with the same types and labels — in both directions.
//!
//! Checked by breaking it: deleting the `courier_origins` row from the table fails it (missing
//! from the docs), and so does adding a row for a family that does not exist (missing from the
//! code) or changing a row's labels.

use std::collections::BTreeMap;

use courier_controller::metrics::Metrics;

/// (type, sorted labels) by family name.
type Table = BTreeMap<String, (String, Vec<String>)>;

fn from_code() -> Table {
    Metrics::new()
        .catalogue()
        .into_iter()
        .map(|f| {
            let mut labels = f.labels.clone();
            labels.sort();
            (f.name.clone(), (f.kind.as_str().to_string(), labels))
        })
        .collect()
}

/// The rows of the markdown table that follows `heading`: `| metric | type | labels | meaning |`.
fn from_docs(text: &str, heading: &str) -> Table {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("docs/operations.md has no {heading:?} section"));
    let mut rows = Table::new();
    let mut in_table = false;
    for line in text[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"metric") || cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
            continue;
        }
        let [name, kind, labels, meaning, ..] = cells.as_slice() else {
            panic!("a catalogue row needs 4 cells: {line}");
        };
        assert!(!meaning.is_empty(), "{name}: say what it means");
        let unquote = |s: &str| s.trim().trim_matches('`').to_string();
        let mut labels: Vec<String> = labels
            .split(',')
            .map(unquote)
            .filter(|l| !l.is_empty())
            .collect();
        labels.sort();
        let name = unquote(name);
        let previous = rows.insert(name.clone(), (kind.to_string(), labels));
        assert!(previous.is_none(), "{name} has two rows");
    }
    assert!(!rows.is_empty(), "no rows under {heading:?}");
    rows
}

#[test]
fn the_docs_catalogue_and_the_code_list_the_same_metrics() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs = from_docs(&text, "### Metric catalogue");
    let code = from_code();
    let mut problems = Vec::new();
    for (name, (kind, labels)) in &code {
        match docs.get(name) {
            None => problems.push(format!(
                "{name} ({kind}, labels {labels:?}) is exposed but not in the docs' table"
            )),
            Some(row) if row != &(kind.clone(), labels.clone()) => problems.push(format!(
                "{name}: the docs say {row:?}, the code has ({kind:?}, {labels:?})"
            )),
            Some(_) => {}
        }
    }
    for name in docs.keys().filter(|n| !code.contains_key(*n)) {
        problems.push(format!(
            "{name} is in the docs' table but the controller does not expose it"
        ));
    }
    assert!(
        problems.is_empty(),
        "docs/operations.md's metric catalogue and crates/courier-controller/src/metrics.rs \
         disagree:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_table_parser_reads_types_and_labels() {
    let text = "### Metric catalogue\n\nintro\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n\
                | `a_total` | counter | `cluster`, `result` | x |\n| `b` | gauge | | y |\n\nafter\n| `c` | gauge | | z |\n";
    let t = from_docs(text, "### Metric catalogue");
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(
        t["a_total"],
        (
            "counter".to_string(),
            vec!["cluster".into(), "result".into()]
        )
    );
    assert_eq!(t["b"], ("gauge".to_string(), vec![]));
}
