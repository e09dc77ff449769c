//! [`strict_issues`] against the scanner it replaced, which built every key, string and path
//! segment as a `String`: the borrowed keys and lazily spelled paths must find the same issues.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn by_strings(t: &TypeRef, raw: &[u8]) -> Result<Vec<StrictIssue>, ScanError> {
    let mut s = StringScanner {
        b: raw,
        i: 0,
        schema: t.schema(),
        path: Vec::new(),
        issues: Vec::new(),
        seen: HashSet::new(),
        depth: 0,
    };
    let root = if t.is_custom() {
        Mode::Untyped
    } else {
        Mode::Typed(t.root())
    };
    s.ws();
    s.value(root)?;
    s.ws();
    if s.i != s.b.len() {
        return Err(ScanError(s.i));
    }
    Ok(s.issues)
}

struct StringScanner<'a> {
    b: &'a [u8],
    i: usize,
    schema: &'a Schema,
    /// Path segments as the strict decoder builds them (`spec`, `.template`, `[0]`).
    path: Vec<String>,
    issues: Vec<StrictIssue>,
    seen: HashSet<String>,
    depth: usize,
}

impl StringScanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn issue(&mut self, unknown: bool, key: &str) {
        if self.issues.len() >= MAX_STRICT_ERRORS {
            return;
        }
        let mut p = self.path.concat();
        if !p.is_empty() {
            p.push('.');
        }
        p.push_str(key);
        let issue = if unknown {
            StrictIssue::UnknownField(p)
        } else {
            StrictIssue::DuplicateField(p)
        };
        if self.seen.insert(issue.to_string()) {
            self.issues.push(issue);
        }
    }

    fn value(&mut self, mode: Mode) -> Result<(), ScanError> {
        match self.b.get(self.i) {
            Some(b'{') => self.object(mode),
            Some(b'[') => self.array(mode),
            Some(b'"') => self.string().map(|_| ()),
            Some(_) => self.literal(),
            None => Err(ScanError(self.i)),
        }
    }

    fn enter(&mut self) -> Result<(), ScanError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ScanError(self.i));
        }
        self.i += 1;
        self.ws();
        Ok(())
    }

    fn object(&mut self, mode: Mode) -> Result<(), ScanError> {
        self.enter()?;
        let md = match mode {
            Mode::Typed(t) => self.schema.get(t).map.as_ref(),
            _ => None,
        };
        // A typed value that is not an object is a decode error reported by the decoder proper.
        let mode = match (mode, md) {
            (Mode::Typed(_), None) => Mode::Skip,
            (m, _) => m,
        };
        let mut keys: HashSet<String> = HashSet::new();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return Err(ScanError(self.i));
            }
            self.i += 1;
            self.ws();
            let child = match (mode, md) {
                (Mode::Skip, _) => Mode::Skip,
                (Mode::Untyped, _) => Mode::Untyped,
                (Mode::Typed(_), Some(m)) => match m.field(&key).map(|f| f.ty).or(m.elem) {
                    Some(t) => Mode::Typed(t),
                    None => Mode::Skip,
                },
                (Mode::Typed(_), None) => Mode::Skip,
            };
            if !matches!(mode, Mode::Skip) {
                if !keys.insert(key.clone()) {
                    self.issue(false, &key);
                }
                if matches!(child, Mode::Skip) {
                    self.issue(true, &key);
                }
            }
            let seg = if self.path.is_empty() {
                key
            } else {
                format!(".{key}")
            };
            self.path.push(seg);
            self.value(child)?;
            self.path.pop();
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(ScanError(self.i)),
            }
        }
    }

    fn array(&mut self, mode: Mode) -> Result<(), ScanError> {
        self.enter()?;
        let elem = match mode {
            Mode::Typed(t) => match &self.schema.get(t).list {
                Some(l) => Mode::Typed(l.elem),
                None => Mode::Skip,
            },
            m => m,
        };
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        let mut idx = 0usize;
        loop {
            self.ws();
            self.path.push(format!("[{idx}]"));
            self.value(elem)?;
            self.path.pop();
            idx += 1;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(ScanError(self.i)),
            }
        }
    }

    fn literal(&mut self) -> Result<(), ScanError> {
        let start = self.i;
        while self.i < self.b.len()
            && !matches!(
                self.b[self.i],
                b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
            )
        {
            self.i += 1;
        }
        if self.i == start {
            return Err(ScanError(start));
        }
        Ok(())
    }

    /// Parses a JSON string (the cursor on its opening quote) and returns its unescaped content.
    fn string(&mut self) -> Result<String, ScanError> {
        if self.b.get(self.i) != Some(&b'"') {
            return Err(ScanError(self.i));
        }
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                b'"' => {
                    self.i += 1;
                    let raw = &self.b[start..self.i];
                    if !escaped {
                        return std::str::from_utf8(&raw[1..raw.len() - 1])
                            .map(str::to_string)
                            .map_err(|_| ScanError(start));
                    }
                    return serde_json::from_slice::<String>(raw).map_err(|_| ScanError(start));
                }
                _ => self.i += 1,
            }
        }
        Err(ScanError(start))
    }
}

/// JSON text (not a `Value`: duplicate keys, escapes and the body's own spelling must survive) whose
/// keys are Job fields, unknown ones, empty and escaped ones.
fn body() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "metadata",
        "spec",
        "template",
        "containers",
        "name",
        "image",
        "env",
        "value",
        "labels",
        "status",
        "conditions",
        "type",
        "kind",
        "bogus",
        "x",
        "",
        "sp\\u0065c",
        "a\\\"b",
        "na\\/me",
        "\\u00e9t\\u00e9",
    ]);
    let leaf = prop_oneof![
        Just("1".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("\"v\"".to_string()),
        Just("\"\\u00e9\\n\"".to_string()),
        Just("\"\u{e9}t\u{e9}\"".to_string()),
    ];
    let value = leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec((key.clone(), inner.clone()), 0..6).prop_map(|kv| {
                let items: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\": {v}"))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }),
            prop::collection::vec(inner, 0..4).prop_map(|v| format!("[{}]", v.join(","))),
        ]
    });
    // Also placed where the schema has lists of objects, so issues inside list items are reached.
    (value.clone(), value).prop_map(|(v, w)| {
        format!(
            "{{\"kind\": \"Job\", \"spec\": {v}, \"metadata\": {{\"managedFields\": [{w}, {v}], \"labels\": {w}}}, \
             \"zz\": {v}, \"spec\": {{\"template\": {{\"spec\": {{\"containers\": [{w}, {v}]}}}}}}}}"
        )
    })
}

proptest! {
    #[test]
    fn finds_what_the_string_scanner_found(raw in body()) {
        let t = crate::schema::builtin("batch/v1", "Job").expect("Job schema");
        let at = |e: ScanError| e.0;
        prop_assert_eq!(
            strict_issues(&t, raw.as_bytes()).map_err(at),
            by_strings(&t, raw.as_bytes()).map_err(at),
            "{}", raw
        );
    }
}

#[test]
fn the_generator_reaches_issues_in_arrays_and_under_escaped_keys() {
    let t = crate::schema::builtin("batch/v1", "Job").expect("Job schema");
    let raw = br#"{"sp\u0065c": {"template": {"spec": {"containers": [{"name": "a", "n\u0061me": 1, "x": 2, "x": 3}]}}}, "": 1, "": 2}"#;
    let found = strict_issues(&t, raw).map_err(|e| e.0);
    assert_eq!(found, by_strings(&t, raw).map_err(|e| e.0));
    let text: Vec<String> = found
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        [
            "duplicate field \"spec.template.spec.containers[0].name\"",
            "unknown field \"spec.template.spec.containers[0].x\"",
            "duplicate field \"spec.template.spec.containers[0].x\"",
            "unknown field \"\"",
            "duplicate field \"\"",
        ]
    );
}
