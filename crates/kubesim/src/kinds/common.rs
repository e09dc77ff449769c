//! Small pieces the built-in kinds share: Go-compatible decoding (base64, `time.Parse`) so decode
//! errors read like the real server's, Go's value formatting (`%v` of floats, `Time.String()`),
//! discovery's storage-version hash, `kubectl` age strings and condition bookkeeping. The
//! apimachinery name checks the kinds run on their own fields are in `crate::validation::names`.

use serde_json::{Map, Value, json};

use crate::errors::{WireOrder, go_quote, write_go_json, write_go_string};

// ---------------------------------------------------------------------------------------------
// Field paths (`field.Path`): `Key` renders `parent[key]` (unquoted), `Index` renders `parent[i]`.

pub fn key(parent: &str, k: &str) -> String {
    format!("{parent}[{k}]")
}

pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

pub fn child(parent: &str, c: &str) -> String {
    if parent.is_empty() {
        c.to_string()
    } else {
        format!("{parent}.{c}")
    }
}

// ---------------------------------------------------------------------------------------------
// base64 as Go's `encoding/json` decodes `[]byte` (StdEncoding, padding required, `\r`/`\n`
// skipped). The error offset is Go's `CorruptInputError`, which the server puts in its message.

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Decodes like Go's `base64.StdEncoding.DecodeString`; `Err(offset)` is the `CorruptInputError`.
pub fn go_base64_decode(s: &str) -> Result<Vec<u8>, usize> {
    let src = s.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0usize;
    while si < src.len() {
        // One quantum (`decodeQuantum`): up to four symbols, newlines skipped, padding ends it.
        let mut dbuf = [0u8; 4];
        let mut dlen = 4usize;
        let mut j = 0usize;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // StdEncoding has padding, so an incomplete final quantum is corrupt.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = b64_value(c) {
                dbuf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            // Padding.
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    // "==" expected; the first '=' is consumed.
                    while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            if si < src.len() {
                // Trailing garbage after padding.
                return Err(si);
            }
            dlen = j;
            break;
        }
        let val = (u32::from(dbuf[0]) << 18)
            | (u32::from(dbuf[1]) << 12)
            | (u32::from(dbuf[2]) << 6)
            | u32::from(dbuf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        // dlen symbols carry dlen-1 bytes.
        out.extend_from_slice(&bytes[..dlen - 1]);
        if dlen < 4 {
            return Ok(out);
        }
    }
    Ok(out)
}

pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

// ---------------------------------------------------------------------------------------------
// Time. `metav1.Time` decodes with `time.Parse(time.RFC3339, s)` and encodes as UTC RFC3339 with
// second precision; `metav1.MicroTime` decodes with `time.Parse(RFC3339Micro, s)` (exactly six
// fractional digits) and encodes as UTC with six digits. The parser below follows Go's
// `time.Parse` for these two layouts, element by element, so errors carry Go's wording.

/// An instant: seconds since the Unix epoch and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoTime {
    pub secs: i64,
    pub nanos: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLayout {
    /// `2006-01-02T15:04:05Z07:00` (`metav1.Time`).
    Rfc3339,
    /// `2006-01-02T15:04:05.000000Z07:00` (`metav1.MicroTime`).
    Rfc3339Micro,
}

impl TimeLayout {
    fn text(self) -> &'static str {
        match self {
            Self::Rfc3339 => "2006-01-02T15:04:05Z07:00",
            Self::Rfc3339Micro => "2006-01-02T15:04:05.000000Z07:00",
        }
    }
}

/// Go's `time.quote` (used in `ParseError` messages): ASCII printable kept, the rest `\x` escaped.
fn time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if (c as u32) >= 0x80 || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

enum Elem {
    Lit(&'static str),
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Frac6,
    Zone,
}

const RFC3339_ELEMS: &[Elem] = &[
    Elem::Year,
    Elem::Lit("-"),
    Elem::Month,
    Elem::Lit("-"),
    Elem::Day,
    Elem::Lit("T"),
    Elem::Hour,
    Elem::Lit(":"),
    Elem::Minute,
    Elem::Lit(":"),
    Elem::Second,
    Elem::Zone,
];

const RFC3339_MICRO_ELEMS: &[Elem] = &[
    Elem::Year,
    Elem::Lit("-"),
    Elem::Month,
    Elem::Lit("-"),
    Elem::Day,
    Elem::Lit("T"),
    Elem::Hour,
    Elem::Lit(":"),
    Elem::Minute,
    Elem::Lit(":"),
    Elem::Second,
    Elem::Frac6,
    Elem::Zone,
];

fn elem_text(e: &Elem) -> &'static str {
    match e {
        Elem::Lit(s) => s,
        Elem::Year => "2006",
        Elem::Month => "01",
        Elem::Day => "02",
        Elem::Hour => "15",
        Elem::Minute => "04",
        Elem::Second => "05",
        Elem::Frac6 => ".000000",
        Elem::Zone => "Z07:00",
    }
}

fn is_digit(s: &[u8], i: usize) -> bool {
    s.get(i).is_some_and(u8::is_ascii_digit)
}

/// Go's `getnum`: one or two digits (`fixed` requires two).
fn getnum(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    if !is_digit(s, 0) {
        return None;
    }
    if !is_digit(s, 1) {
        if fixed {
            return None;
        }
        return Some((i64::from(s[0] - b'0'), &s[1..]));
    }
    Some((
        i64::from(s[0] - b'0') * 10 + i64::from(s[1] - b'0'),
        &s[2..],
    ))
}

/// Go's `atoi` for the digit runs of a layout element (optional sign, then digits only).
fn go_atoi(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        // `leadingInt` of "" is 0 without error in Go; an empty run cannot occur for our callers
        // except after a sign, where Go also yields 0. Keep Go's answer.
        return if digits.is_empty() { Some(0) } else { None };
    }
    let mut x: i64 = 0;
    for d in digits {
        x = x.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if neg { -x } else { x })
}

/// Go's `parseNanoseconds`: `value[0]` must be '.' or ',', then `nbytes-1` digits.
fn parse_nanos(value: &[u8], nbytes: usize) -> Result<u32, Option<&'static str>> {
    if !matches!(value.first(), Some(b'.') | Some(b',')) {
        return Err(None);
    }
    let nbytes = nbytes.min(10);
    let ns = go_atoi(&value[1..nbytes]).ok_or(None)?;
    if ns < 0 {
        return Err(Some("fractional second"));
    }
    let mut ns = ns;
    for _ in 0..(10 - nbytes) {
        ns *= 10;
    }
    u32::try_from(ns).map_err(|_| Some("fractional second"))
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `time.Parse(layout, value)` for the two Kubernetes layouts; the error is Go's `ParseError` text.
pub fn go_parse_time(value: &str, layout: TimeLayout) -> Result<GoTime, String> {
    let elems = match layout {
        TimeLayout::Rfc3339 => RFC3339_ELEMS,
        TimeLayout::Rfc3339Micro => RFC3339_MICRO_ELEMS,
    };
    let cannot = |value_elem: &[u8], layout_elem: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            time_quote(value),
            time_quote(layout.text()),
            time_quote(&String::from_utf8_lossy(value_elem)),
            time_quote(layout_elem)
        )
    };
    let range = |what: &str| format!("parsing time {}: {what} out of range", time_quote(value));

    let (mut year, mut month, mut day, mut hour, mut min, mut sec) = (0i64, 0i64, 0i64, 0, 0, 0);
    let mut nanos = 0u32;
    let mut offset = 0i64;
    let mut rest = value.as_bytes();
    for (i, e) in elems.iter().enumerate() {
        let hold = rest;
        let ok: Option<&[u8]> = match e {
            Elem::Lit(lit) => {
                let l = lit.as_bytes();
                if rest.first() == l.first() {
                    Some(&rest[1..])
                } else {
                    None
                }
            }
            Elem::Year => {
                if rest.len() < 4 || !is_digit(rest, 0) {
                    None
                } else {
                    go_atoi(&rest[..4]).map(|y| {
                        year = y;
                        &rest[4..]
                    })
                }
            }
            Elem::Month => match getnum(rest, true) {
                Some((m, r)) => {
                    if !(1..=12).contains(&m) {
                        return Err(range("month"));
                    }
                    month = m;
                    Some(r)
                }
                None => None,
            },
            Elem::Day => getnum(rest, true).map(|(d, r)| {
                day = d;
                r
            }),
            Elem::Hour => match getnum(rest, false) {
                Some((h, r)) => {
                    if h >= 24 {
                        return Err(range("hour"));
                    }
                    hour = h;
                    Some(r)
                }
                None => None,
            },
            Elem::Minute => match getnum(rest, true) {
                Some((m, r)) => {
                    if m >= 60 {
                        return Err(range("minute"));
                    }
                    min = m;
                    Some(r)
                }
                None => None,
            },
            Elem::Second => match getnum(rest, true) {
                Some((s, r)) => {
                    if s >= 60 {
                        return Err(range("second"));
                    }
                    sec = s;
                    let mut r = r;
                    // A fractional second the layout does not mention is still accepted.
                    let next_is_frac = matches!(elems.get(i + 1), Some(Elem::Frac6));
                    if !next_is_frac
                        && r.len() >= 2
                        && matches!(r[0], b'.' | b',')
                        && is_digit(r, 1)
                    {
                        let mut n = 2;
                        while is_digit(r, n) {
                            n += 1;
                        }
                        match parse_nanos(r, n) {
                            Ok(ns) => nanos = ns,
                            Err(Some(what)) => return Err(range(what)),
                            Err(None) => return Err(cannot(hold, elem_text(e))),
                        }
                        r = &r[n..];
                    }
                    Some(r)
                }
                None => None,
            },
            Elem::Frac6 => {
                if rest.len() < 7 {
                    None
                } else {
                    match parse_nanos(rest, 7) {
                        Ok(ns) => {
                            nanos = ns;
                            Some(&rest[7..])
                        }
                        Err(Some(what)) => return Err(range(what)),
                        Err(None) => None,
                    }
                }
            }
            Elem::Zone => {
                if rest.first() == Some(&b'Z') {
                    Some(&rest[1..])
                } else if rest.len() < 6 || rest[3] != b':' {
                    None
                } else {
                    let hh = getnum(&rest[1..3], true).map(|(v, _)| v);
                    let mm = getnum(&rest[4..6], true).map(|(v, _)| v);
                    match (hh, mm, rest[0]) {
                        (Some(h), Some(m), sign @ (b'+' | b'-')) => {
                            if h > 24 {
                                return Err(range("time zone offset hour"));
                            }
                            if m > 60 {
                                return Err(range("time zone offset minute"));
                            }
                            let off = (h * 60 + m) * 60;
                            offset = if sign == b'-' { -off } else { off };
                            Some(&rest[6..])
                        }
                        _ => None,
                    }
                }
            }
        };
        match ok {
            Some(r) => rest = r,
            None => return Err(cannot(hold, elem_text(e))),
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            time_quote(value),
            time_quote(&String::from_utf8_lossy(rest))
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(format!(
            "parsing time {}: day out of range",
            time_quote(value)
        ));
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
    Ok(GoTime { secs, nanos })
}

impl GoTime {
    pub fn now() -> Self {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: d.subsec_nanos(),
        }
    }

    fn civil(self) -> (i64, i64, i64, i64, i64, i64) {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
    }

    /// `metav1.Time` on the wire: UTC, whole seconds.
    pub fn rfc3339(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }

    /// `metav1.MicroTime` on the wire: UTC, six fractional digits.
    pub fn rfc3339_micro(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
            self.nanos / 1000
        )
    }

    /// Go's `Time.String()` for a UTC time (what `%v`/`%s` print in field errors).
    pub fn go_string(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        let mut out = format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
        if self.nanos > 0 {
            let frac = format!("{:09}", self.nanos);
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        out.push_str(" +0000 UTC");
        out
    }

    /// Go's zero `time.Time` (`0001-01-01 00:00:00 +0000 UTC`).
    pub fn zero() -> Self {
        Self {
            secs: days_from_civil(1, 1, 1) * 86_400,
            nanos: 0,
        }
    }
}

/// Normalises a `metav1.Time` field in place: `null` stays, a string is parsed (Go error on
/// failure) and re-encoded the way the server writes it back.
pub fn normalize_time_field(
    parent: &mut Map<String, Value>,
    key: &str,
    layout: TimeLayout,
) -> Result<(), String> {
    let Some(v) = parent.get_mut(key) else {
        return Ok(());
    };
    match v {
        Value::Null => Ok(()),
        Value::String(s) => {
            let t = go_parse_time(s, layout)?;
            *v = Value::String(match layout {
                TimeLayout::Rfc3339 => t.rfc3339(),
                TimeLayout::Rfc3339Micro => t.rfc3339_micro(),
            });
            Ok(())
        }
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            crate::gojson::json_kind(other)
        )),
    }
}

/// The codec's wrapper around a decode error: `<Kind> in version "<v>" cannot be handled as a <Kind>: <err>`.
pub fn decode_error(kind: &str, version: &str, err: &str) -> crate::errors::ApiError {
    crate::errors::ApiError::bad_request(format!(
        "{kind} in version {} cannot be handled as a {kind}: {err}",
        go_quote(version)
    ))
}

// ---------------------------------------------------------------------------------------------
// Field selectors: the refusals of `ConvertFieldLabel`.

/// The core/v1 conversion funcs' refusal (`field label not supported: x`), used by Secrets,
/// Namespaces, core/v1 Events, events.k8s.io/v1 Events and custom resources.
pub fn field_label_not_supported(label: &str) -> String {
    format!("field label not supported: {label}")
}

/// `runtime.DefaultMetaV1FieldSelectorConversion`'s refusal, for kinds without a conversion func
/// (ConfigMaps, Leases, CRDs).
pub fn field_label_not_known(label: &str) -> String {
    format!(
        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        go_quote(label)
    )
}

/// The cause inside a codec decode error (`X in version "v" cannot be handled as a X: <cause>`),
/// which the PATCH path reports on its own (see `secret::patch_decode_error`).
pub fn decode_error_cause(message: &str) -> &str {
    match message.find(" cannot be handled as a ") {
        Some(i) => match message[i..].find(": ") {
            Some(j) => &message[i + j + 2..],
            None => message,
        },
        None => message,
    }
}

// ---------------------------------------------------------------------------------------------
// JSON as Go's encoder writes a typed object (`errors::write_go_json` with a `WireOrder`): struct
// fields in declaration order, map keys sorted.

/// `metav1.ObjectMeta` field order.
pub const OBJECT_META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
const MANAGED_FIELDS_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];
const OWNER_REFERENCE_ORDER: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// The ObjectMeta part of a `WireOrder` (paths below `metadata`).
pub fn object_meta_order(path: &[&str]) -> Option<&'static [&'static str]> {
    match path {
        ["metadata"] => Some(OBJECT_META_ORDER),
        ["metadata", "managedFields", "*"] => Some(MANAGED_FIELDS_ORDER),
        ["metadata", "ownerReferences", "*"] => Some(OWNER_REFERENCE_ORDER),
        _ => None,
    }
}

/// The document a JSON merge patch (`application/merge-patch+json`) produces on the real server, as
/// text: `gopkg.in/evanphx/json-patch.v4` keeps every node it does not touch as the raw bytes of
/// the current object (Go field order) and re-encodes the objects it merges into as maps (sorted
/// keys). The server puts this text in its 422 when the patched document does not decode.
/// (New subtrees coming from the patch are written with sorted keys; Go keeps the client's order.)
pub fn merge_patch_text(current: &Value, patch: &Value, order: WireOrder) -> String {
    let mut out = String::new();
    let mut path = Vec::new();
    match (current, patch) {
        (Value::Object(_), Value::Object(_)) => {
            write_merged(current, patch, &mut path, order, &mut out)
        }
        // A patch that is not an object replaces the document.
        _ => write_go_json(&prune_nulls(patch), Some(order), &mut path, &mut out),
    }
    out
}

fn prune_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), prune_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(prune_nulls).collect()),
        other => other.clone(),
    }
}

fn write_merged(
    cur: &Value,
    patch: &Value,
    path: &mut Vec<String>,
    order: WireOrder,
    out: &mut String,
) {
    let (Some(c), Some(p)) = (cur.as_object(), patch.as_object()) else {
        return write_go_json(&prune_nulls(patch), Some(order), path, out);
    };
    let mut keys: Vec<&String> = c
        .keys()
        .filter(|k| !matches!(p.get(*k), Some(Value::Null)))
        .chain(
            p.iter()
                .filter(|(k, v)| !v.is_null() && !c.contains_key(*k))
                .map(|(k, _)| k),
        )
        .collect();
    // A merged node is re-encoded from a Go map: sorted keys.
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_string(k, out);
        out.push(':');
        path.push(k.clone());
        match (c.get(k), p.get(k)) {
            (Some(cv), Some(pv)) if !cv.is_null() && cv.is_object() && pv.is_object() => {
                write_merged(cv, pv, path, order, out)
            }
            (_, Some(pv)) => write_go_json(&prune_nulls(pv), Some(order), path, out),
            (Some(cv), None) => write_go_json(cv, Some(order), path, out),
            (None, None) => out.push_str("null"),
        }
        path.pop();
    }
    out.push('}');
}

/// Go's `%v` / `%+v` of a decoded JSON value (`map[string]interface{}` and friends): maps as
/// `map[k:v ...]` with sorted keys, slices as `[a b]`, nil as `<nil>`, numbers as float64.
pub fn go_print_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float_v(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_print_v).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print_v(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What every kind with a spec and a status does on update (`PrepareForUpdate`,
// `PrepareForStatusUpdate`).

/// Keeps the stored object's `part` in `new` (removed if the stored object has none): an update
/// through the main resource keeps the status (the status subresource owns it), one through
/// `/status` (or `/finalize`) keeps the spec, as the API server's `PrepareForUpdate` and
/// `PrepareForStatusUpdate` of every kind with a status do.
pub fn keep_stored(new: &mut Value, old: &Value, part: &str) {
    // Already the stored part (an in-process writer's object is built over the stored one): left
    // as it is instead of replaced by a copy of it.
    if let (Some(n), Some(o)) = (new.get(part), old.get(part))
        && crate::json::identical(n, o)
    {
        return;
    }
    if let Some(m) = new.as_object_mut() {
        match old.get(part) {
            Some(s) => m.insert(part.into(), s.clone()),
            None => m.remove(part),
        };
    }
}

/// `metadata.generation` on update: the stored one, plus one when the desired state (`changed`:
/// the spec, or for a custom resource everything but metadata and status) changed.
pub fn next_generation(new: &mut Value, old: &Value, changed: bool) {
    let old_gen = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(meta) = crate::json::ensure_obj(new, "metadata") {
        meta.insert(
            "generation".into(),
            json!(if changed { old_gen + 1 } else { old_gen }),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Go's `%v` of a float64: `strconv.FormatFloat(f, 'g', -1, 64)`, i.e. the shortest digits, in
// exponent form when the exponent is below -4 or at least 6 (`fmt.Println(1e6)` prints `1e+06`).

pub fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Go's shortest formatting does.
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if neg { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        // %e form with at least two exponent digits.
        let mut m = String::new();
        m.push_str(&digits[..1]);
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let es = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{es}{:02}", exp.abs());
    }
    // Plain decimal.
    let dp = exp + 1; // position of the decimal point relative to the digits
    let mut out = String::from(sign);
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if (dp as usize) >= digits.len() {
        out.push_str(&digits);
        for _ in 0..(dp as usize - digits.len()) {
            out.push('0');
        }
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Discovery's `storageVersionHash`: base64 of the first 8 bytes of sha256("<group>/<version>/<kind>").

pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = sha256(format!("{group}/{version}/{kind}").as_bytes());
    base64_encode(&digest[..8])
}

/// SHA-256 (FIPS 180-4). Small and only used when a CRD is registered, so no dependency for it.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for chunk in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in chunk.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Table cells.

/// `duration.HumanDuration` (what `kubectl get` shows in AGE / LAST SEEN columns).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".to_string();
    }
    if secs < 0 {
        return "0s".to_string();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: `<unknown>` for a missing timestamp, else the human age.
pub fn age_of(ts: Option<&str>) -> String {
    let parsed = ts.and_then(|s| {
        go_parse_time(s, TimeLayout::Rfc3339)
            .or_else(|_| go_parse_time(s, TimeLayout::Rfc3339Micro))
            .ok()
    });
    match parsed {
        Some(t) => human_duration(GoTime::now().secs - t.secs),
        None => "<unknown>".to_string(),
    }
}

/// The AGE cell of an object.
pub fn creation_age(obj: &Value) -> String {
    age_of(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    )
}

/// The verbs discovery lists for an ordinary namespaced built-in resource.
pub fn standard_verbs() -> Vec<String> {
    [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// Column descriptions shared by every printer (swagger docs of `ObjectMeta.name` and
/// `.creationTimestamp`, as the recorded Job table shows them).
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

// ---------------------------------------------------------------------------------------------
// Conditions.

/// Sets a condition the way the apiextensions helpers do (`SetCRDCondition`): replace the entry of
/// that type, keeping its `lastTransitionTime` unless the status changed; append if new. Conditions
/// are written `{type, status, lastTransitionTime, reason, message}`.
pub fn set_condition(
    conditions: &mut Vec<Value>,
    ctype: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let mut cond = json!({"type": ctype, "status": status, "lastTransitionTime": now});
    if let Value::Object(m) = &mut cond {
        if !reason.is_empty() {
            m.insert("reason".into(), json!(reason));
        }
        if !message.is_empty() {
            m.insert("message".into(), json!(message));
        }
    }
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
    {
        Some(existing) => {
            let same_status = existing.get("status").and_then(Value::as_str) == Some(status);
            if same_status
                && let (Some(old_t), Value::Object(m)) =
                    (existing.get("lastTransitionTime").cloned(), &mut cond)
            {
                m.insert("lastTransitionTime".into(), old_t);
            }
            *existing = cond;
        }
        None => conditions.push(cond),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_errors_carry_go_offsets() {
        assert_eq!(go_base64_decode("%%%"), Err(0));
        assert_eq!(go_base64_decode("!!!not-base64"), Err(0));
        assert_eq!(go_base64_decode("abc"), Err(0));
        assert_eq!(go_base64_decode("abcdab"), Err(4));
        assert_eq!(go_base64_decode("ab=c"), Err(2));
        assert_eq!(go_base64_decode("YQ==x"), Err(4));
        assert_eq!(go_base64_decode("YQ="), Err(3));
        assert_eq!(go_base64_decode("YXBp\nVmVy"), Ok(b"apiVer".to_vec()));
        assert_eq!(go_base64_decode("dg=="), Ok(b"v".to_vec()));
        assert_eq!(go_base64_decode(""), Ok(Vec::new()));
        assert_eq!(go_base64_decode("YWI="), Ok(b"ab".to_vec()));
    }

    #[test]
    fn time_parse_errors_read_like_go() {
        assert_eq!(
            go_parse_time("2025-06-01T10:00:00Z", TimeLayout::Rfc3339Micro).unwrap_err(),
            "parsing time \"2025-06-01T10:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\""
        );
        assert_eq!(
            go_parse_time("2025-13-01T10:00:00Z", TimeLayout::Rfc3339).unwrap_err(),
            "parsing time \"2025-13-01T10:00:00Z\": month out of range"
        );
        assert_eq!(
            go_parse_time("2025-02-30T10:00:00Z", TimeLayout::Rfc3339).unwrap_err(),
            "parsing time \"2025-02-30T10:00:00Z\": day out of range"
        );
        assert_eq!(
            go_parse_time("yesterday", TimeLayout::Rfc3339).unwrap_err(),
            "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\""
        );
        assert_eq!(
            go_parse_time("2025-06-01T10:00:00Zjunk", TimeLayout::Rfc3339).unwrap_err(),
            "parsing time \"2025-06-01T10:00:00Zjunk\": extra text: \"junk\""
        );
        let t = go_parse_time("2025-06-01T12:00:00.5+02:00", TimeLayout::Rfc3339).unwrap();
        assert_eq!(t.rfc3339(), "2025-06-01T10:00:00Z");
        assert_eq!(t.rfc3339_micro(), "2025-06-01T10:00:00.500000Z");
        assert_eq!(t.go_string(), "2025-06-01 10:00:00.5 +0000 UTC");
        let m = go_parse_time("2025-06-01T10:00:00.000000Z", TimeLayout::Rfc3339Micro).unwrap();
        assert_eq!(m.rfc3339_micro(), "2025-06-01T10:00:00.000000Z");
        assert_eq!(GoTime::zero().go_string(), "0001-01-01 00:00:00 +0000 UTC");
    }

    #[test]
    fn floats_print_like_go_v() {
        assert_eq!(go_float_v(1.0), "1");
        assert_eq!(go_float_v(1.5), "1.5");
        assert_eq!(go_float_v(100000.0), "100000");
        assert_eq!(go_float_v(1e21), "1e+21");
        assert_eq!(go_float_v(1e6), "1e+06");
        assert_eq!(go_float_v(1234567.0), "1.234567e+06");
        assert_eq!(go_float_v(0.0001), "0.0001");
        assert_eq!(go_float_v(0.00001), "1e-05");
        assert_eq!(go_float_v(-2.25), "-2.25");
    }

    #[test]
    fn storage_version_hashes_match_discovery() {
        assert_eq!(storage_version_hash("", "v1", "Secret"), "S6u1pOWzb84=");
        assert_eq!(
            storage_version_hash("coordination.k8s.io", "v1", "Lease"),
            "gqkMMb/YqFM="
        );
        assert_eq!(
            storage_version_hash("courier.dev", "v1alpha1", "WorkerCluster"),
            "EScOB2oMCPI="
        );
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(-5), "<invalid>");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(3 * 365 * 86400 + 86400), "3y1d");
        assert_eq!(human_duration(9 * 365 * 86400), "9y");
    }
}
