//! `metadata.managedFields` entries: decoding, the manager identity rules, ordering and the cap on update
//! entries, as the API server's field manager (k8s.io/apimachinery/pkg/util/managedfields) does them.

use serde_json::{Map, Value};

use super::Manager;
use super::fieldset::FieldSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: String,
    /// RFC 3339, UTC, second precision.
    pub time: Option<String>,
    pub set: FieldSet,
}

impl Entry {
    /// Whether `self` is the entry of this manager identity. Entries are keyed by (manager, operation,
    /// subresource) plus, for updates only, the API version (`BuildManagerIdentifier`): an applier keeps one
    /// entry whatever version it applies through.
    pub fn is(
        &self,
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    fn same_identity(&self, other: &Entry) -> bool {
        self.is(
            &other.manager,
            other.operation,
            &other.api_version,
            &other.subresource,
        )
    }

    /// The manager identifier string (`{"manager":"fm1","operation":"Apply"}`), which orders conflicts.
    pub fn identifier(&self) -> String {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert(
            "operation".into(),
            Value::String(self.operation.as_str().into()),
        );
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        }
        if !self.subresource.is_empty() {
            m.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        // Go marshals the struct in field order: manager, operation, apiVersion, ..., subresource.
        let mut s = String::from("{");
        for (i, k) in ["manager", "operation", "apiVersion", "subresource"]
            .iter()
            .filter(|k| m.contains_key(**k))
            .enumerate()
        {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!("\"{k}\":{}", crate::errors::go_json(&m[*k])));
        }
        s.push('}');
        s
    }

    /// How conflict messages name the manager (`printManager`): `"fm1"`,
    /// `"courier" with subresource "status"`, `"kubectl-edit" using batch/v1`.
    pub fn printable(&self) -> String {
        let mut s = crate::errors::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                crate::errors::go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// Why stored or submitted managedFields cannot be used (`DecodeManagedFields` errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("managedFields must be a list")]
    NotAList,
    #[error("operation must be `Apply` or `Update`")]
    BadOperation,
    #[error("apiVersion must not be empty")]
    NoApiVersion,
    #[error("missing fieldsType in managed fields entry {0}")]
    MissingFieldsType(usize),
    #[error("invalid fieldsType {0:?} in managed fields entry {1}")]
    BadFieldsType(String, usize),
}

fn str_field<'a>(e: &'a Map<String, Value>, k: &str) -> &'a str {
    e.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Decodes a `managedFields` list. `canonicalize` re-serializes keys and times (for lists a client sent;
/// stored ones are already in canonical form). An entry repeating an earlier identity replaces it.
pub fn decode(v: Option<&Value>, canonicalize: bool) -> Result<Vec<Entry>, DecodeError> {
    decode_owned(v.cloned(), canonicalize)
}

/// [`decode`] taking the list by value (its field sets are moved, not copied).
pub fn decode_owned(v: Option<Value>, canonicalize: bool) -> Result<Vec<Entry>, DecodeError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(DecodeError::NotAList),
    };
    let mut out: Vec<Entry> = Vec::with_capacity(list.len());
    for (i, e) in list.into_iter().enumerate() {
        let Value::Object(mut e) = e else {
            return Err(DecodeError::BadOperation);
        };
        let operation = match str_field(&e, "operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err(DecodeError::BadOperation),
        };
        let api_version = str_field(&e, "apiVersion").to_string();
        if api_version.is_empty() {
            return Err(DecodeError::NoApiVersion);
        }
        match str_field(&e, "fieldsType") {
            "FieldsV1" => {}
            "" => return Err(DecodeError::MissingFieldsType(i)),
            other => return Err(DecodeError::BadFieldsType(other.to_string(), i)),
        }
        let mut set = e
            .remove("fieldsV1")
            .map(FieldSet::from_fields_v1_owned)
            .unwrap_or_default();
        let mut time = e.get("time").and_then(Value::as_str).map(str::to_string);
        if canonicalize {
            set = set.canonicalize();
            time = time.map(|t| canonical_time(&t));
        }
        let entry = Entry {
            manager: str_field(&e, "manager").to_string(),
            operation,
            api_version,
            subresource: str_field(&e, "subresource").to_string(),
            time,
            set,
        };
        match out.iter_mut().find(|x| x.same_identity(&entry)) {
            Some(x) => *x = entry,
            None => out.push(entry),
        }
    }
    Ok(out)
}

/// A timestamp as metav1.Time re-encodes it (RFC 3339, UTC, seconds).
pub fn canonical_time(t: &str) -> String {
    match crate::time::parse(t) {
        Some(ts) => crate::time::format(ts),
        None => t.to_string(),
    }
}

fn unix_seconds(t: Option<&str>) -> i64 {
    t.and_then(crate::time::parse)
        .map(|ts| ts.as_second())
        .unwrap_or(0)
}

/// Whether a submitted list asks for managedFields to be reset: an empty list, or one empty entry.
pub fn is_reset(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) if a.is_empty() => true,
        Some(Value::Array(a)) if a.len() == 1 => match &a[0] {
            Value::Object(m) => m.values().all(|v| match v {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            }),
            _ => false,
        },
        _ => false,
    }
}

/// Encodes entries as the server stores them: sorted by operation, time (seconds), manager, API version,
/// subresource. `None` for no entries (the field is then absent).
pub fn encode(mut entries: Vec<Entry>) -> Option<Value> {
    if entries.is_empty() {
        return None;
    }
    if entries.len() > 1 {
        // Times are parsed once per entry, not per comparison.
        let mut keyed: Vec<(i64, Entry)> = entries
            .into_iter()
            .map(|e| (unix_seconds(e.time.as_deref()), e))
            .collect();
        keyed.sort_by(|(ps, p), (qs, q)| {
            p.operation
                .cmp(&q.operation)
                .then_with(|| ps.cmp(qs))
                .then_with(|| p.manager.cmp(&q.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.subresource.cmp(&q.subresource))
        });
        entries = keyed.into_iter().map(|(_, e)| e).collect();
    }
    Some(Value::Array(entries.into_iter().map(entry_json).collect()))
}

fn entry_json(e: Entry) -> Value {
    let mut m = Map::new();
    m.insert("manager".into(), Value::String(e.manager));
    m.insert(
        "operation".into(),
        Value::String(e.operation.as_str().into()),
    );
    if !e.api_version.is_empty() {
        m.insert("apiVersion".into(), Value::String(e.api_version));
    }
    if let Some(t) = e.time {
        m.insert("time".into(), Value::String(t));
    }
    m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
    m.insert("fieldsV1".into(), e.set.into_fields_v1());
    if !e.subresource.is_empty() {
        m.insert("subresource".into(), Value::String(e.subresource));
    }
    Value::Object(m)
}

/// At most this many update entries are kept (`DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT: &str = "ancient-changes";

/// `capManagersManager`: past the cap, the oldest update entries are merged, per API version, into an
/// `ancient-changes` entry.
pub fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == Operation::Update)
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|&a, &b| {
        unix_seconds(entries[a].time.as_deref())
            .cmp(&unix_seconds(entries[b].time.as_deref()))
            .then_with(|| entries[a].identifier().cmp(&entries[b].identifier()))
    });
    // Work on identities, since entries move and disappear while merging.
    let order: Vec<Entry> = updaters.iter().map(|&i| entries[i].clone()).collect();
    let mut first_of_version: Vec<(String, Entry)> = Vec::new();
    let mut length = order.len();
    for e in order {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = e.api_version.clone();
        let Some((_, first)) = first_of_version
            .iter()
            .find(|(v, _)| *v == version)
            .cloned()
        else {
            first_of_version.push((version, e));
            continue;
        };
        let bucket_pos = entries
            .iter()
            .position(|x| x.is(ANCIENT, Operation::Update, &version, ""));
        let bucket_pos = match bucket_pos {
            Some(p) => p,
            None => {
                let Some(p) = entries.iter().position(|x| x.same_identity(&first)) else {
                    continue;
                };
                let mut moved = entries.remove(p);
                moved.manager = ANCIENT.to_string();
                moved.subresource = String::new();
                moved.operation = Operation::Update;
                entries.push(moved);
                entries.len() - 1
            }
        };
        let Some(cur) = entries.iter().position(|x| x.same_identity(&e)) else {
            continue;
        };
        let union = e.set.union(&entries[bucket_pos].set);
        entries[bucket_pos].set = union;
        entries[bucket_pos].time = e.time.clone();
        entries[bucket_pos].api_version = version;
        entries.remove(cur);
        length -= 1;
    }
}

/// A [`Manager`] that owns its strings: built once per write (the time taken when it is built) and
/// lent to the field manager as [`Stamp::manager`].
#[derive(Debug, Clone)]
pub struct Stamp {
    name: String,
    api_version: String,
    subresource: Option<&'static str>,
    now: String,
}

impl Stamp {
    /// A write by `name` through `api_version`, on the `status` subresource or the main resource, now.
    pub fn new(name: &str, api_version: String, status: bool) -> Self {
        Self {
            name: name.to_string(),
            api_version,
            subresource: status.then_some("status"),
            now: crate::time::now_string(),
        }
    }

    pub fn manager(&self) -> Manager<'_> {
        Manager {
            name: &self.name,
            api_version: &self.api_version,
            subresource: self.subresource,
            now: &self.now,
        }
    }
}
