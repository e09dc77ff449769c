//! Virtual-time helpers. All model durations are in seconds at speed 1 and are divided by
//! `SimConfig::speed` once, here; instants are `jiff::Timestamp`s on the host's clock.

use jiff::Timestamp;

/// Nanoseconds, the unit every scaled duration is kept in (exact arithmetic, no float drift).
pub(crate) type Nanos = i64;

const NANOS_PER_SEC: f64 = 1e9;

/// `secs` of model time as host nanoseconds at `speed` (never negative).
pub(crate) fn scaled(secs: f64, speed: f64) -> Nanos {
    let v = (secs.max(0.0) / speed * NANOS_PER_SEC).round();
    if v >= i64::MAX as f64 {
        i64::MAX
    } else {
        v as Nanos
    }
}

/// `t + d`, saturating at the ends of the representable range.
pub(crate) fn shift(t: Timestamp, d: Nanos) -> Timestamp {
    let n = t.as_nanosecond().saturating_add(i128::from(d));
    Timestamp::from_nanosecond(n).unwrap_or(if d >= 0 {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    })
}

/// `a - b` in nanoseconds (saturating).
pub(crate) fn since(a: Timestamp, b: Timestamp) -> Nanos {
    let d = a.as_nanosecond() - b.as_nanosecond();
    i64::try_from(d).unwrap_or(if d > 0 { i64::MAX } else { i64::MIN })
}

/// The API stores times with 1 s resolution, and the controller computes deadlines and backoffs from
/// those stored values. At speed `s` the model keeps that behaviour on a `1/s` s grid, so a 10x run
/// keeps the same relative truncation instead of a 10x larger one.
pub(crate) fn quantize(t: Timestamp, speed: f64) -> Timestamp {
    let grid = i128::from(scaled(1.0, speed).max(1));
    let n = t.as_nanosecond();
    Timestamp::from_nanosecond(n - n.rem_euclid(grid)).unwrap_or(t)
}

/// RFC 3339 with whole seconds, as the API server serialises `metav1.Time`.
pub(crate) fn api_time(t: Timestamp) -> String {
    let secs = t.as_nanosecond().div_euclid(1_000_000_000);
    i64::try_from(secs)
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or(t)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_and_format_truncate() {
        let t: Timestamp = "2027-01-15T10:00:07.8Z".parse().unwrap();
        assert_eq!(api_time(t), "2027-01-15T10:00:07Z");
        assert_eq!(quantize(t, 1.0).to_string(), "2027-01-15T10:00:07Z");
        assert_eq!(quantize(t, 10.0).to_string(), "2027-01-15T10:00:07.8Z");
        assert_eq!(scaled(10.0, 10.0), 1_000_000_000);
        assert_eq!(since(shift(t, 5), t), 5);
    }
}
