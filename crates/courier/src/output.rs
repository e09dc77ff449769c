//! What every listing prints, in one place: `-o table|wide|name|json|yaml`, kubectl's `kind: List`
//! objects for JSON and YAML, and left-aligned tables.

use std::fmt::Write as _;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::{Value, json};

/// `-o`: how a listing is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Columns for people.
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// One `resource.group/name` per line, for scripts (`xargs`, `kubectl get`).
    Name,
    /// A `kind: List` object as JSON, like `kubectl get -o json`.
    Json,
    /// A `kind: List` object as YAML, like `kubectl get -o yaml`.
    Yaml,
}

/// The table of a listing: a header and rows of the same width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

/// What a listing prints: `stdout`, and `stderr` for a note when there is nothing to show (kubectl's
/// "No resources found", which scripts must not read as data).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

/// One listing, ready to print in any format.
pub struct Listing<'a, T> {
    pub items: &'a [T],
    /// `job.batch/hello`: the `-o name` form of an item.
    pub name_of: &'a dyn Fn(&T) -> String,
    /// The table (`wide` = with the extra columns).
    pub table: &'a dyn Fn(&[T], bool) -> Table,
    /// What to say on stderr in table form when there are no items.
    pub empty: &'a str,
}

impl<T: Serialize> Listing<'_, T> {
    pub fn render(&self, format: OutputFormat) -> anyhow::Result<Printed> {
        let mut out = Printed::default();
        match format {
            OutputFormat::Table | OutputFormat::Wide => {
                if self.items.is_empty() {
                    out.stderr = format!("{}\n", self.empty);
                } else {
                    let t = (self.table)(self.items, format == OutputFormat::Wide);
                    out.stdout = render_table(&t.header, &t.rows);
                }
            }
            OutputFormat::Name => {
                for item in self.items {
                    let _ = writeln!(out.stdout, "{}", (self.name_of)(item));
                }
            }
            OutputFormat::Json => {
                let list = list_object(self.items)?;
                out.stdout = serde_json::to_string_pretty(&list).context("writing JSON")? + "\n";
            }
            OutputFormat::Yaml => {
                let list = list_object(self.items)?;
                out.stdout = serde_saphyr::to_string(&list).context("writing YAML")?;
            }
        }
        Ok(out)
    }

    pub fn print(&self, format: OutputFormat) -> anyhow::Result<()> {
        let p = self.render(format)?;
        print!("{}", p.stdout);
        eprint!("{}", p.stderr);
        Ok(())
    }
}

/// Items as kubectl prints a list: `apiVersion: v1, kind: List`, each item a full object with its
/// own apiVersion and kind, without `managedFields` (kubectl hides them by default).
pub fn list_object<T: Serialize>(items: &[T]) -> anyhow::Result<Value> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut v = serde_json::to_value(item).context("serialising an item of the list")?;
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        out.push(v);
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": out,
    }))
}

/// Prints rows as left-aligned columns separated by three spaces (like kubectl).
#[cfg(feature = "sandbox")]
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    print!("{}", render_table(header, rows));
}

pub fn render_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            out.push_str(c);
            if i + 1 < n {
                let pad = widths[i].saturating_sub(c.chars().count()) + 3;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

/// A table indented by two spaces, as `describe` nests them under a heading.
pub fn indented_table(header: &[&str], rows: &[Vec<String>]) -> String {
    render_table(header, rows)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(name: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"template": {}}
        }))
        .expect("job")
    }

    fn listing<'a>(items: &'a [Job]) -> Listing<'a, Job> {
        Listing {
            items,
            name_of: &|j: &Job| {
                format!("job.batch/{}", j.metadata.name.clone().unwrap_or_default())
            },
            table: &|items: &[Job], wide: bool| Table {
                header: if wide {
                    vec!["NAME", "EXTRA"]
                } else {
                    vec!["NAME"]
                },
                rows: items
                    .iter()
                    .map(|j| {
                        let mut r = vec![j.metadata.name.clone().unwrap_or_default()];
                        if wide {
                            r.push("x".into());
                        }
                        r
                    })
                    .collect(),
            },
            empty: "No Jobs found in namespace default.",
        }
    }

    #[test]
    fn every_format() {
        let items = [job("a"), job("b")];
        let l = listing(&items);
        let t = l.render(OutputFormat::Table).expect("table");
        assert_eq!(t.stdout, "NAME\na\nb\n");
        let w = l.render(OutputFormat::Wide).expect("wide");
        assert_eq!(w.stdout, "NAME   EXTRA\na      x\nb      x\n");
        let n = l.render(OutputFormat::Name).expect("name");
        assert_eq!(n.stdout, "job.batch/a\njob.batch/b\n");
        // Break `list_object` (return the bare array) and these fail.
        for f in [OutputFormat::Json, OutputFormat::Yaml] {
            let p = l.render(f).expect("structured");
            let v: Value = serde_saphyr::from_str(&p.stdout).expect("parses (JSON is YAML)");
            assert_eq!(v["kind"], "List", "{f:?}");
            assert_eq!(v["apiVersion"], "v1");
            assert_eq!(v["metadata"]["resourceVersion"], "");
            assert_eq!(v["items"][1]["metadata"]["name"], "b");
            assert_eq!(v["items"][0]["kind"], "Job", "items carry their kind");
            assert_eq!(v["items"][0]["apiVersion"], "batch/v1");
            assert!(v["items"][0]["metadata"].get("managedFields").is_none());
        }
    }

    #[test]
    fn empty_lists() {
        let l = listing(&[]);
        let t = l.render(OutputFormat::Table).expect("table");
        assert_eq!(t.stdout, "");
        assert!(t.stderr.contains("No Jobs found"));
        assert_eq!(l.render(OutputFormat::Name).expect("name").stdout, "");
        let j = l.render(OutputFormat::Json).expect("json");
        let v: Value = serde_json::from_str(&j.stdout).expect("json");
        assert_eq!(v["items"], json!([]));
        assert!(j.stderr.is_empty());
    }

    #[test]
    fn table() {
        let t = render_table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A     BB\nxxx   y\n");
        assert_eq!(indented_table(&["A"], &[vec!["b".into()]]), "  A\n  b\n");
    }
}
