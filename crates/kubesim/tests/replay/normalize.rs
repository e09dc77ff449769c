//! Replaces the values that differ on every run by placeholders, by the rules the recordings were
//! written with (`testdata/README.md`, table "written as"), so a replay's document compares with them.
//!
//! Placeholders are numbered by first appearance within one document. Object resourceVersions and
//! `continue` tokens are numbered over the responses first (a message may quote a version before the
//! object carrying it shows up); uids and generated names as they are met while rewriting.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use jiff::Timestamp;
use regex::Regex;
use serde_json::{Map, Value};

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
});
const TIME_RE: &str = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})";
static TIME: LazyLock<Regex> = LazyLock::new(|| Regex::new(TIME_RE).unwrap());
static WHOLE_TIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^(?:{TIME_RE})$")).unwrap());
/// Storage revisions quoted by watch errors (`<listrv>` when they are no object's version).
static MSG_RVS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        Regex::new(r"(too old resource version: \S+ \()(\d+)(\))").unwrap(),
        Regex::new(r"(Too large resource version: \d+, current: )(\d+)()").unwrap(),
        Regex::new(r"(Too large resource version: )(\d+)(, current)").unwrap(),
    ]
});
/// What the server appends to a `generateName` prefix.
const GEN_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
/// The server cuts a `generateName` prefix to this many characters.
const GEN_PREFIX_MAX: usize = 58;
/// Timestamps this close to the run are the server's.
const NOW_WINDOW_SECONDS: i64 = 2 * 86_400;

/// What a run's document needs normalising against.
pub struct Meta {
    /// The run id (in namespace names, labels, messages).
    pub run: String,
    /// The server's `host:port`.
    pub netloc: String,
    pub now: Timestamp,
    /// UUIDs the requests themselves carry: kept as they are.
    pub literal_uids: HashSet<String>,
}

/// The normalised copy of `doc` (`{"scenario", "steps": [...]}`).
pub fn normalize(doc: &Value, meta: &Meta) -> Value {
    let mut n = Normalizer {
        meta,
        rvs: HashMap::new(),
        continues: HashMap::new(),
        gen_prefixes: Vec::new(),
        uids: HashMap::new(),
        gen_names: HashMap::new(),
    };
    for step in doc["steps"].as_array().into_iter().flatten() {
        n.collect(&step["response"], None);
        n.collect_gen(&step["request"]);
    }
    // Longest prefixes first, so a prefix of another prefix does not take its names.
    n.gen_prefixes.sort_by_key(|p| std::cmp::Reverse(p.len()));
    n.walk(doc, None, None)
}

struct Normalizer<'a> {
    meta: &'a Meta,
    rvs: HashMap<String, String>,
    continues: HashMap<String, String>,
    /// `generateName` prefixes, cut like the server cuts them.
    gen_prefixes: Vec<String>,
    uids: HashMap<String, String>,
    gen_names: HashMap<String, String>,
}

fn number(map: &mut HashMap<String, String>, key: &str, tag: &str) -> String {
    let n = map.len() + 1;
    map.entry(key.to_owned())
        .or_insert_with(|| format!("<{tag}:{n}>"))
        .clone()
}

/// A list or a Table (their resourceVersion is a storage revision, not an object's).
fn listlike(m: &Map<String, Value>) -> bool {
    let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default();
    m.contains_key("items") || kind == "Table" || kind.ends_with("List")
}

/// A watch event's type (`{"type", "object"}`).
fn event_type(m: &Map<String, Value>) -> Option<&str> {
    if m.contains_key("object") {
        m.get("type").and_then(Value::as_str)
    } else {
        None
    }
}

impl Normalizer<'_> {
    fn collect(&mut self, x: &Value, event: Option<&str>) {
        match x {
            Value::Object(m) => {
                if let Some(Value::Object(md)) = m.get("metadata") {
                    let list = listlike(m);
                    if let Some(rv) = md.get("resourceVersion").and_then(Value::as_str)
                        && !rv.is_empty()
                        && !list
                        && event != Some("BOOKMARK")
                    {
                        number(&mut self.rvs, rv, "rv");
                    }
                    self.add_gen_prefix(md);
                    if let Some(c) = md.get("continue").and_then(Value::as_str)
                        && list
                        && !c.is_empty()
                    {
                        number(&mut self.continues, c, "continue");
                    }
                }
                let kind = event_type(m);
                for (k, v) in m {
                    self.collect(v, if k == "object" { kind } else { None });
                }
            }
            Value::Array(a) => a.iter().for_each(|v| self.collect(v, None)),
            _ => {}
        }
    }

    /// Prefixes also come from requests: a rejected create names its generated name only in messages.
    fn collect_gen(&mut self, x: &Value) {
        match x {
            Value::Object(m) => {
                if let Some(Value::Object(md)) = m.get("metadata") {
                    self.add_gen_prefix(md);
                }
                m.values().for_each(|v| self.collect_gen(v));
            }
            Value::Array(a) => a.iter().for_each(|v| self.collect_gen(v)),
            _ => {}
        }
    }

    fn add_gen_prefix(&mut self, md: &Map<String, Value>) {
        if let Some(g) = md.get("generateName").and_then(Value::as_str)
            && !g.is_empty()
        {
            let cut: String = g.chars().take(GEN_PREFIX_MAX).collect();
            if !self.gen_prefixes.contains(&cut) {
                self.gen_prefixes.push(cut);
            }
        }
    }

    fn walk(&mut self, x: &Value, key: Option<&str>, event: Option<&str>) -> Value {
        match x {
            Value::Object(m) => {
                let list = listlike(m);
                let kind = event_type(m).map(str::to_owned);
                let mut out = Map::new();
                for (k, v) in m {
                    let nk = self.norm_str(k, None);
                    let nv = match v {
                        Value::Object(md) if k == "metadata" => {
                            let mut nmd = self.walk(v, Some(k), event);
                            if let Some(rv) = md.get("resourceVersion").and_then(Value::as_str)
                                && !rv.is_empty()
                            {
                                nmd["resourceVersion"] =
                                    Value::String(if event == Some("BOOKMARK") {
                                        "<bookmarkrv>".into()
                                    } else if list && rv != "0" {
                                        "<listrv>".into()
                                    } else if list {
                                        rv.into()
                                    } else {
                                        self.rvs.get(rv).cloned().unwrap_or_else(|| rv.into())
                                    });
                            }
                            nmd
                        }
                        Value::Object(q) if k == "query" && key == Some("request") => {
                            Value::Object(
                                q.iter()
                                    .map(|(qk, qv)| {
                                        let text = qv
                                            .as_str()
                                            .map_or_else(|| qv.to_string(), str::to_owned);
                                        (
                                            qk.clone(),
                                            Value::String(self.norm_str(&text, Some("<query>"))),
                                        )
                                    })
                                    .collect(),
                            )
                        }
                        _ => {
                            let child_event = if k == "object" { kind.as_deref() } else { None };
                            self.walk(v, Some(k), child_event)
                        }
                    };
                    out.insert(nk, nv);
                }
                if let Some(Value::Array(mf)) = out.get_mut("managedFields")
                    && mf.iter().all(Value::is_object)
                {
                    // The server orders entries by operation, then time at 1 s resolution, then manager.
                    let field = |e: &Value, f: &str, absent: &str| match e.get(f) {
                        None | Some(Value::Null) => absent.to_owned(),
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                    };
                    mf.sort_by_key(|e| {
                        (
                            field(e, "operation", ""),
                            field(e, "manager", ""),
                            field(e, "subresource", ""),
                            field(e, "apiVersion", ""),
                        )
                    });
                }
                if out.get("kind").and_then(Value::as_str) == Some("Table") {
                    table_ages(&mut out);
                }
                if let Some(Value::Array(events)) = out.get_mut("events") {
                    events
                        .dedup_by(|later, earlier| later["type"] == "BOOKMARK" && later == earlier);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|v| self.walk(v, key, None)).collect()),
            Value::String(s) if key == Some("resourceVersion") => {
                Value::String(self.rvs.get(s).cloned().unwrap_or_else(|| s.clone()))
            }
            Value::String(s) => Value::String(self.norm_str(s, key)),
            other => other.clone(),
        }
    }

    fn norm_str(&mut self, s: &str, key: Option<&str>) -> String {
        if let Some(c) = self.continues.get(s) {
            return c.clone();
        }
        if key == Some("serverAddress") {
            return "<server-address>".into();
        }
        let mut s = self.uid_sub(s);
        for i in 0..self.gen_prefixes.len() {
            let prefix = self.gen_prefixes[i].clone();
            s = self.gen_sub(&s, &prefix);
        }
        let meta = self.meta;
        s = s
            .replace(&meta.run, "<run>")
            .replace(&meta.netloc, "<server>");
        if is_now(&s, meta.now) {
            return "<time>".into();
        }
        if s.chars().count() > 20 {
            s = TIME
                .replace_all(&s, |c: &regex::Captures| {
                    if is_now(&c[0], meta.now) {
                        "<time>".to_owned()
                    } else {
                        c[0].to_owned()
                    }
                })
                .into_owned();
        }
        if matches!(key, Some("message" | "warning" | "<query>")) {
            s = self.rvs_in_text(&s);
        }
        s
    }

    fn uid_sub(&mut self, s: &str) -> String {
        let mut out = String::new();
        let mut last = 0;
        for m in UUID.find_iter(s) {
            out.push_str(&s[last..m.start()]);
            if self.meta.literal_uids.contains(m.as_str()) {
                out.push_str(m.as_str());
            } else {
                out.push_str(&number(&mut self.uids, m.as_str(), "uid"));
            }
            last = m.end();
        }
        out.push_str(&s[last..]);
        out
    }

    /// `prefix` + 5 characters of the server's alphabet, standing alone, becomes `prefix<gen:N>`.
    fn gen_sub(&mut self, s: &str, prefix: &str) -> String {
        let mut out = String::new();
        let mut pos = 0;
        while let Some(off) = s[pos..].find(prefix) {
            let start = pos + off;
            let after_prefix = start + prefix.len();
            let alone_before = !s[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric());
            let suffix: String = s[after_prefix..].chars().take(5).collect();
            let end = after_prefix + suffix.len();
            let generated =
                suffix.chars().count() == 5 && suffix.chars().all(|c| GEN_ALPHABET.contains(c));
            let alone_after = !s[end..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            if alone_before && generated && alone_after {
                out.push_str(&s[pos..start]);
                let n = self.gen_names.len() + 1;
                let name = self
                    .gen_names
                    .entry(s[start..end].to_owned())
                    .or_insert_with(|| format!("{prefix}<gen:{n}>"));
                out.push_str(name);
                pos = end;
            } else {
                let step = s[start..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&s[pos..start + step]);
                pos = start + step;
            }
        }
        out.push_str(&s[pos..]);
        out
    }

    /// Numbers in a message that are object versions become their `<rv:N>`.
    fn rvs_in_text(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for re in MSG_RVS.iter() {
            s = re
                .replace_all(&s, |c: &regex::Captures| {
                    let rv = self.rvs.get(&c[2]).map_or("<listrv>", String::as_str);
                    format!("{}{rv}{}", &c[1], &c[3])
                })
                .into_owned();
        }
        // Whole digit runs not inside a word, a date, a version, a path or a decimal.
        let chars: Vec<char> = s.chars().collect();
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let mut out = String::new();
        let mut i = 0;
        while i < chars.len() {
            if !chars[i].is_ascii_digit() {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let run: String = chars[start..i].iter().collect();
            let before_ok =
                start == 0 || !(word(chars[start - 1]) || ".:/-".contains(chars[start - 1]));
            let after_ok = i == chars.len()
                || !(word(chars[i])
                    || ":/-".contains(chars[i])
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)));
            match self.rvs.get(&run) {
                Some(rv) if before_ok && after_ok => out.push_str(rv),
                _ => out.push_str(&run),
            }
        }
        out
    }
}

/// A timestamp the server made during the run.
fn is_now(s: &str, now: Timestamp) -> bool {
    WHOLE_TIME.is_match(s)
        && s.parse::<Timestamp>()
            .is_ok_and(|t| (t.as_second() - now.as_second()).abs() < NOW_WINDOW_SECONDS)
}

/// `Age` and `Duration` cells depend on the wall clock.
fn table_ages(table: &mut Map<String, Value>) {
    let columns: Vec<usize> = table
        .get("columnDefinitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| matches!(c["name"].as_str(), Some("Age" | "Duration")))
        .map(|(i, _)| i)
        .collect();
    let rows = table.get_mut("rows").and_then(Value::as_array_mut);
    for row in rows.into_iter().flatten() {
        if let Some(Value::Array(cells)) = row.get_mut("cells") {
            for &i in &columns {
                if let Some(cell) = cells.get_mut(i)
                    && !matches!(cell, Value::Null)
                    && cell != ""
                {
                    *cell = Value::String("<age>".into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> Meta {
        Meta {
            run: "zabcdefg".into(),
            netloc: "127.0.0.1:4443".into(),
            now: "2026-03-01T12:00:00Z".parse().unwrap(),
            literal_uids: HashSet::from(["00000000-0000-0000-0000-000000000000".to_owned()]),
        }
    }

    fn doc(steps: Value) -> Value {
        json!({"scenario": "s", "steps": steps})
    }

    #[test]
    fn objects_lists_and_messages() {
        let uid = "0b7c1d2e-1111-4222-8333-444455556666";
        let d = doc(json!([
            {"name": "a", "request": {"method": "PUT", "path": "/x", "query": {"resourceVersion": "17"}},
             "response": {"code": 409, "body": {"message": "the object has been modified; rv 17, 170 and 1.17"}}},
            {"name": "b", "request": {"method": "GET", "path": "/x"},
             "response": {"code": 200, "body": {"kind": "JobList", "metadata": {"resourceVersion": "20", "continue": "tok"},
               "items": [{"metadata": {"name": "j-zabcdefg", "uid": uid, "resourceVersion": "17",
                          "creationTimestamp": "2026-03-01T11:59:58Z"},
                          "spec": {"selector": {"matchLabels": {"controller-uid": uid}}},
                          "status": {"startTime": "2025-06-01T10:00:00Z"}}]}}},
            {"name": "c", "request": {"method": "GET", "path": "/x", "query": {"continue": "tok"}},
             "response": {"code": 200, "body": {"uid": "00000000-0000-0000-0000-000000000000",
                                                "serverAddress": "127.0.0.1:4443"}}}
        ]));
        let n = normalize(&d, &meta());
        let s = &n["steps"];
        assert_eq!(s[0]["request"]["query"]["resourceVersion"], "<rv:1>");
        assert_eq!(
            s[0]["response"]["body"]["message"],
            "the object has been modified; rv <rv:1>, 170 and 1.17"
        );
        let list = &s[1]["response"]["body"];
        assert_eq!(
            list["metadata"],
            json!({"resourceVersion": "<listrv>", "continue": "<continue:1>"})
        );
        let item = &list["items"][0];
        assert_eq!(item["metadata"]["name"], "j-<run>");
        assert_eq!(item["metadata"]["uid"], "<uid:1>");
        assert_eq!(item["metadata"]["resourceVersion"], "<rv:1>");
        assert_eq!(item["metadata"]["creationTimestamp"], "<time>");
        assert_eq!(
            item["spec"]["selector"]["matchLabels"]["controller-uid"],
            "<uid:1>"
        );
        assert_eq!(
            item["status"]["startTime"], "2025-06-01T10:00:00Z",
            "a time the steps sent"
        );
        assert_eq!(s[2]["request"]["query"]["continue"], "<continue:1>");
        assert_eq!(
            s[2]["response"]["body"]["uid"],
            "00000000-0000-0000-0000-000000000000"
        );
        assert_eq!(
            s[2]["response"]["body"]["serverAddress"],
            "<server-address>"
        );
    }

    #[test]
    fn generated_names() {
        let d = doc(json!([
            {"name": "a", "request": {"body": {"metadata": {"generateName": "gen-"}}},
             "response": {"body": {"metadata": {"name": "gen-x7k2p", "generateName": "gen-"},
                                   "message": "gen-x7k2p and gen-b4c5d, not gen-aaaaa or xgen-x7k2p"}}}
        ]));
        let n = normalize(&d, &meta());
        let body = &n["steps"][0]["response"]["body"];
        assert_eq!(body["metadata"]["name"], "gen-<gen:1>");
        assert_eq!(
            body["message"],
            "gen-<gen:1> and gen-<gen:2>, not gen-aaaaa or xgen-x7k2p"
        );
    }

    #[test]
    fn watches_tables_and_managed_fields() {
        let bookmark = json!({"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "90"}}});
        let d = doc(json!([
            {"name": "w", "request": {},
             "response": {"events": [
                 {"type": "ADDED", "object": {"kind": "Job", "metadata": {"resourceVersion": "5"}}},
                 bookmark, bookmark.clone(),
                 {"type": "ERROR", "object": {"message": "too old resource version: 1 (77)"}}]}},
            {"name": "t", "request": {},
             "response": {"body": {"kind": "Table", "metadata": {"resourceVersion": "0"},
               "columnDefinitions": [{"name": "Name"}, {"name": "Age"}],
               "rows": [{"cells": ["a", "5s"]}, {"cells": ["b", ""]}],
               "managedFields": [{"manager": "z", "operation": "Update"},
                                 {"manager": "a", "operation": "Update", "subresource": "status"},
                                 {"manager": "a", "operation": "Apply"}]}}}
        ]));
        let n = normalize(&d, &meta());
        let events = n["steps"][0]["response"]["events"].as_array().unwrap();
        assert_eq!(events.len(), 3, "identical bookmarks collapse: {events:?}");
        assert_eq!(events[0]["object"]["metadata"]["resourceVersion"], "<rv:1>");
        assert_eq!(
            events[1]["object"]["metadata"]["resourceVersion"],
            "<bookmarkrv>"
        );
        assert_eq!(
            events[2]["object"]["message"],
            "too old resource version: 1 (<listrv>)"
        );
        let table = &n["steps"][1]["response"]["body"];
        assert_eq!(table["metadata"]["resourceVersion"], "0");
        assert_eq!(table["rows"][0]["cells"], json!(["a", "<age>"]));
        assert_eq!(table["rows"][1]["cells"], json!(["b", ""]));
        let managers: Vec<(&str, &str)> = table["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["operation"].as_str().unwrap(),
                    e["manager"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(managers, [("Apply", "a"), ("Update", "a"), ("Update", "z")]);
    }
}
