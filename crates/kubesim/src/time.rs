//! Timestamps as the API server writes them.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::Offset;

// Every write stamps a time (managedFields, creationTimestamp, the create log), so these are written
// digit by digit: `strftime` parses its format string on every call. Years outside 0..=9999 (which
// `%Y` does not pad to four digits) still go through `strftime`; `tests::same_as_strftime` holds the
// two equal.

/// RFC 3339 with second resolution, UTC (`metav1.Time`).
pub fn format(ts: Timestamp) -> String {
    match civil(ts) {
        Some(dt) => written(dt, 0),
        None => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

/// RFC 3339 with microseconds (`metav1.MicroTime`).
pub fn format_micro(ts: Timestamp) -> String {
    match civil(ts) {
        Some(dt) => written(dt, 6),
        None => ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    }
}

/// RFC 3339 with nanoseconds (log and record times).
pub fn format_nano(ts: Timestamp) -> String {
    match civil(ts) {
        Some(dt) => written(dt, 9),
        None => ts.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
    }
}

/// `ts` in UTC when its year has four digits.
fn civil(ts: Timestamp) -> Option<DateTime> {
    let dt = Offset::UTC.to_datetime(ts);
    (0..=9999).contains(&dt.year()).then_some(dt)
}

/// `dt` as `%Y-%m-%dT%H:%M:%S`, then `digits` of its fraction (truncated, after a dot) if any, then `Z`.
fn written(dt: DateTime, digits: u32) -> String {
    fn push(out: &mut String, v: u32, width: u32) {
        for i in (0..width).rev() {
            let d = (v / 10u32.pow(i)) % 10;
            out.push(char::from(b'0' + d as u8));
        }
    }
    let mut out = String::with_capacity(21 + digits as usize);
    // `civil` keeps the year in 0..=9999 and the other fields are small and non-negative.
    let field = |v: i32| u32::try_from(v).unwrap_or(0);
    push(&mut out, field(dt.year().into()), 4);
    out.push('-');
    push(&mut out, field(dt.month().into()), 2);
    out.push('-');
    push(&mut out, field(dt.day().into()), 2);
    out.push('T');
    push(&mut out, field(dt.hour().into()), 2);
    out.push(':');
    push(&mut out, field(dt.minute().into()), 2);
    out.push(':');
    push(&mut out, field(dt.second().into()), 2);
    if digits > 0 {
        out.push('.');
        push(
            &mut out,
            field(dt.subsec_nanosecond()) / 10u32.pow(9 - digits),
            digits,
        );
    }
    out.push('Z');
    out
}

pub fn now_string() -> String {
    format(Timestamp::now())
}

/// A `metav1.Time` as decoded from JSON (RFC 3339); `None` when it does not parse.
pub fn parse(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let t: Timestamp = "2025-06-01T10:00:00.123456789Z".parse().unwrap();
        assert_eq!(format(t), "2025-06-01T10:00:00Z");
        assert_eq!(format_micro(t), "2025-06-01T10:00:00.123456Z");
        assert_eq!(format_nano(t), "2025-06-01T10:00:00.123456789Z");
        let whole: Timestamp = "2025-06-01T10:00:00Z".parse().unwrap();
        assert_eq!(format_micro(whole), "2025-06-01T10:00:00.000000Z");
    }

    proptest::proptest! {
        /// The digit-by-digit forms are `strftime`'s, across the whole range a Timestamp holds
        /// (years -9999..=9999, before and after the epoch, any fraction).
        #[test]
        fn same_as_strftime(secs in Timestamp::MIN.as_second()..=Timestamp::MAX.as_second(),
                            near in -4_000_000_000i64..=4_000_000_000i64,
                            nanos in 0i32..1_000_000_000, whole in proptest::bool::ANY) {
            let nanos = if whole { 0 } else { nanos };
            for s in [secs, near] {
                let Ok(t) = Timestamp::new(s, if s == Timestamp::MAX.as_second() { 0 } else { nanos }) else {
                    continue;
                };
                proptest::prop_assert_eq!(format(t), t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                proptest::prop_assert_eq!(format_micro(t), t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string());
                proptest::prop_assert_eq!(format_nano(t), t.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string());
            }
        }
    }
}
