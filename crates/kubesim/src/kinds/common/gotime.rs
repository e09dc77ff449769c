//! Go's `time.Parse` for the RFC3339 layouts `metav1.Time` / `metav1.MicroTime` use, so errors
//! carry Go's wording, and the way the server writes those times back.

use serde_json::{Map, Value};

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

/// Go's range check of a parsed element: stores it in `slot` when it lies in `bounds`, `Err(name)` when
/// not; no number (`None`) is left to the layout mismatch that follows.
fn within<'a>(
    parsed: Option<(i64, &'a [u8])>,
    bounds: std::ops::RangeInclusive<i64>,
    name: &'static str,
    slot: &mut i64,
) -> Result<Option<&'a [u8]>, &'static str> {
    match parsed {
        Some((v, rest)) if bounds.contains(&v) => {
            *slot = v;
            Ok(Some(rest))
        }
        Some(_) => Err(name),
        None => Ok(None),
    }
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
            Elem::Month => {
                within(getnum(rest, true), 1..=12, "month", &mut month).map_err(range)?
            }
            Elem::Day => getnum(rest, true).map(|(d, r)| {
                day = d;
                r
            }),
            Elem::Hour => within(getnum(rest, false), 0..=23, "hour", &mut hour).map_err(range)?,
            Elem::Minute => {
                within(getnum(rest, true), 0..=59, "minute", &mut min).map_err(range)?
            }
            Elem::Second => {
                match within(getnum(rest, true), 0..=59, "second", &mut sec).map_err(range)? {
                    Some(mut r) => {
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
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // Go's range checks of time.Parse (hour < 24, minute and second < 60, month 1-12).
        for (value, what) in [
            ("2025-00-01T10:00:00Z", "month"),
            ("2025-06-01T24:00:00Z", "hour"),
            ("2025-06-01T23:60:00Z", "minute"),
            ("2025-06-01T23:59:60Z", "second"),
        ] {
            assert_eq!(
                go_parse_time(value, TimeLayout::Rfc3339).unwrap_err(),
                format!("parsing time \"{value}\": {what} out of range")
            );
        }
        let last = go_parse_time("2025-12-31T23:59:59Z", TimeLayout::Rfc3339).unwrap();
        assert_eq!(last.rfc3339(), "2025-12-31T23:59:59Z");
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
}
