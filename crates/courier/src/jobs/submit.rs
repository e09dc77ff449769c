//! `courier submit -f FILE|-`: create Jobs in the management cluster, like `kubectl create -f`,
//! setting `spec.managedBy` when a manifest leaves it out (and saying so).

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::MANAGED_BY;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::Value;

use crate::management::{ManagementArgs, deprecated};
use crate::util::{self, FIELD_MANAGER, api_message};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    courier submit -f examples/hello.yaml\n  \
    courier submit -f a.yaml -f b.yaml -n team-a\n  \
    kubectl create job hello --image=busybox --dry-run=client -o yaml | courier submit -f -")]
pub struct SubmitArgs {
    #[command(flatten)]
    pub management: ManagementArgs,
    /// A YAML or JSON file with one or more batch/v1 Jobs (`---` between documents, or a `kind:
    /// List`); `-` reads standard input. Repeatable.
    #[arg(long = "filename", short = 'f', value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Deprecated: the file as an argument; use -f FILE.
    #[arg(value_name = "FILE", hide = true)]
    pub file: Option<PathBuf>,
}

/// Reads the documents of one file (or stdin): YAML (JSON is YAML), empty documents skipped, the
/// items of a `kind: List` taken one by one.
fn read_documents(file: &PathBuf) -> anyhow::Result<(String, Vec<Value>)> {
    let (source, text) = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        ("standard input".to_string(), s)
    } else {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        (file.display().to_string(), text)
    };
    Ok((source.clone(), parse_documents(&text, &source)?))
}

pub fn parse_documents(text: &str, source: &str) -> anyhow::Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| anyhow!("{source} is not valid YAML: {e}"))?;
    let mut out = Vec::new();
    for d in docs.into_iter().filter(|d| !d.is_null()) {
        match (d.get("kind").and_then(Value::as_str), d.get("items")) {
            (Some("List"), Some(Value::Array(items))) => out.extend(items.iter().cloned()),
            _ => out.push(d),
        }
    }
    if out.is_empty() {
        bail!("{source} holds no Job (it is empty)");
    }
    Ok(out)
}

/// Checks one document and sets `spec.managedBy` when absent; returns a note for the user when it
/// did. Errors name the document and the fix.
pub fn prepare_job(doc: &mut Value, what: &str) -> anyhow::Result<Option<String>> {
    let Some(obj) = doc.as_object_mut() else {
        bail!("{what} is not a Kubernetes object (a YAML mapping with apiVersion and kind)");
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if api_version != "batch/v1" || kind != "Job" {
        bail!(
            "{what} is a {} ({}), not a batch/v1 Job; courier submit only takes Jobs",
            if kind.is_empty() { "<no kind>" } else { kind },
            if api_version.is_empty() {
                "<no apiVersion>"
            } else {
                api_version
            }
        );
    }
    let meta = obj.get("metadata").and_then(Value::as_object);
    let has_name = meta.is_some_and(|m| {
        m.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
            || m.get("generateName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
    });
    if !has_name {
        bail!("{what} has no metadata.name; give the Job a name");
    }
    let spec = obj
        .entry("spec")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(spec) = spec.as_object_mut() else {
        bail!("{what}: spec is not a mapping");
    };
    match spec.get("managedBy") {
        None | Some(Value::Null) => {
            spec.insert("managedBy".into(), Value::String(MANAGED_BY.into()));
            Ok(Some(format!(
                "{what}: spec.managedBy was not set; set it to {MANAGED_BY} so that Courier \
                 dispatches the Job (add it to the manifest to silence this note)"
            )))
        }
        Some(Value::String(s)) if s == MANAGED_BY => Ok(None),
        Some(other) => bail!(
            "{what}: spec.managedBy is {other}; Courier only dispatches Jobs whose spec.managedBy is \
             {MANAGED_BY}: set it to that, or remove the field and let courier submit set it"
        ),
    }
}

/// The namespace a document goes to: its own, else -n, else the context's; a document naming
/// another namespace than -n is refused (kubectl's rule).
pub fn namespace_for(
    doc: &Value,
    flag: Option<&str>,
    context_ns: &str,
    what: &str,
) -> anyhow::Result<String> {
    let own = doc.pointer("/metadata/namespace").and_then(Value::as_str);
    match (own, flag) {
        (Some(d), Some(f)) if d != f => bail!(
            "{what}: metadata.namespace is {d} but --namespace is {f}; pass --namespace {d} or \
             drop one of them"
        ),
        (Some(d), _) => Ok(d.to_string()),
        (None, Some(f)) => Ok(f.to_string()),
        (None, None) => Ok(context_ns.to_string()),
    }
}

pub async fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let mut files = a.files.clone();
    if let Some(f) = &a.file {
        deprecated("`courier submit FILE`", "`courier submit -f FILE`");
        files.push(f.clone());
    }
    if files.is_empty() {
        bail!(
            "no Jobs to submit: pass -f FILE (a YAML or JSON manifest; -f - reads standard input)"
        );
    }
    if files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        bail!("-f - (standard input) can be given only once");
    }
    // Every document is read and checked before anything is created.
    let mut prepared = Vec::new();
    let mut notes = Vec::new();
    for file in &files {
        let (source, docs) = read_documents(file)?;
        let count = docs.len();
        for (i, mut doc) in docs.into_iter().enumerate() {
            let what = if count == 1 {
                source.clone()
            } else {
                format!("{source} document {}", i + 1)
            };
            if let Some(note) = prepare_job(&mut doc, &what)? {
                notes.push(note);
            }
            prepared.push((what, doc));
        }
    }
    let m = a.management.connect().await?;
    for n in notes {
        eprintln!("note: {n}");
    }
    let ar = ApiResource::erase::<Job>(&());
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let mut planned = Vec::new();
    for (what, doc) in prepared {
        let ns = namespace_for(&doc, a.management.namespace.as_deref(), &m.namespace, &what)?;
        planned.push((ns, doc));
    }
    for (ns, doc) in planned {
        let obj: DynamicObject =
            serde_json::from_value(doc).context("reading the Job's metadata")?;
        let name = obj
            .metadata
            .name
            .clone()
            .or_else(|| obj.metadata.generate_name.clone())
            .unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(m.client.clone(), &ns, &ar);
        match api.create(&pp, &obj).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or(name);
                println!(
                    "job.batch/{name} created in namespace {ns}; Courier dispatches it to a worker \
                     cluster (follow it with `courier describe job {name} -n {ns}`)"
                );
            }
            Err(e) => {
                let msg = api_message(&e);
                let hint = match util::api_code(&e) {
                    Some(409) => format!(
                        "; delete it first (`kubectl delete job -n {ns} {name}`) or change metadata.name"
                    ),
                    Some(404) => format!(
                        "; does namespace {ns} exist in the management cluster? Create it or pass \
                         --namespace"
                    ),
                    Some(403) => format!(
                        "; you may not create Jobs in namespace {ns} of the management cluster: ask \
                         for `create jobs.batch` there, or pass another --namespace"
                    ),
                    Some(422) => causes(&e),
                    _ => String::new(),
                };
                bail!("creating Job {ns}/{name}: {msg}{hint}");
            }
        }
    }
    Ok(())
}

fn causes(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s
            .details
            .as_ref()
            .map(|d| {
                d.causes
                    .iter()
                    .map(|c| format!("\n  - {}: {}", c.field, c.message))
                    .collect::<String>()
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepare_sets_managed_by() {
        let mut d =
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}, "spec": {}});
        let note = prepare_job(&mut d, "f").expect("ok");
        assert!(note.is_some());
        assert_eq!(d["spec"]["managedBy"], MANAGED_BY);
        let note = prepare_job(&mut d, "f").expect("ok");
        assert!(note.is_none());
    }

    #[test]
    fn prepare_errors() {
        let mut d = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("Pod") && e.contains("not a batch/v1 Job"), "{e}");
        let mut d = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("metadata.name"), "{e}");
        let mut d = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"},
            "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}});
        let e = prepare_job(&mut d, "f").unwrap_err().to_string();
        assert!(e.contains("multikueue") && e.contains(MANAGED_BY), "{e}");
        let mut d = json!([1]);
        assert!(prepare_job(&mut d, "f").is_err());
    }

    #[test]
    fn documents_and_lists() {
        let text = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\n---\n---\n\
                    {\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\
                    {\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", \"metadata\": {\"name\": \"b\"}},\
                    {\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", \"metadata\": {\"name\": \"c\"}}]}\n";
        let docs = parse_documents(text, "t").expect("parses");
        let names: Vec<&str> = docs
            .iter()
            .filter_map(|d| d.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(
            parse_documents("---\n", "empty.yaml")
                .unwrap_err()
                .to_string()
                .contains("empty.yaml holds no Job")
        );
        assert!(
            parse_documents("a: [", "bad.yaml")
                .unwrap_err()
                .to_string()
                .contains("bad.yaml is not valid YAML")
        );
    }

    #[test]
    fn namespaces_follow_kubectl() {
        let own = json!({"metadata": {"name": "a", "namespace": "x"}});
        let none = json!({"metadata": {"name": "a"}});
        assert_eq!(namespace_for(&own, None, "ctx", "f").expect("ok"), "x");
        assert_eq!(namespace_for(&own, Some("x"), "ctx", "f").expect("ok"), "x");
        assert_eq!(
            namespace_for(&none, Some("y"), "ctx", "f").expect("ok"),
            "y"
        );
        assert_eq!(namespace_for(&none, None, "ctx", "f").expect("ok"), "ctx");
        let e = namespace_for(&own, Some("y"), "ctx", "f")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metadata.namespace is x but --namespace is y"),
            "{e}"
        );
    }
}
