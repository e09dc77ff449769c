//! Timestamps as the API server writes them.

use jiff::Timestamp;

/// RFC 3339 with second resolution, UTC (`metav1.Time`).
pub fn format(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// RFC 3339 with microseconds (`metav1.MicroTime`).
pub fn format_micro(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// RFC 3339 with nanoseconds (log and record times).
pub fn format_nano(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()
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
    }
}
