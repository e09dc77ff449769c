//! Exponential backoff with full jitter, capped. Used by every per-cluster loop (probes, mirror
//! watches) and by the work queue's per-key retry, so a failing cluster or origin is retried ever
//! more slowly and a fleet of them does not retry in lockstep.

use std::time::Duration;

use rand::Rng;

/// `min * 2^n`, capped at `max`; each delay is drawn uniformly from `[d/2, d]` ("equal jitter": never
/// zero, so a hot failure cannot spin, and never more than the cap).
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Self {
            min,
            max: max.max(min),
            attempt: 0,
        }
    }

    /// The un-jittered delay of attempt `n` (0-based).
    pub fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.min.saturating_mul(factor).min(self.max)
    }

    /// The next delay (and counts the attempt).
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        jitter(ceiling)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Attempts since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

/// A delay drawn from `[d/2, d]`.
pub fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    let spread = u64::try_from((d - half).as_micros()).unwrap_or(u64::MAX);
    if spread == 0 {
        return d;
    }
    half + Duration::from_micros(rand::rng().random_range(0..=spread))
}

impl Iterator for Backoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(self.next_delay())
    }
}

impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        Backoff::reset(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_doubles_and_caps_with_jitter_in_range() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let ceilings = [100, 200, 400, 800, 1000, 1000];
        for c in ceilings {
            let d = b.next_delay();
            let c = Duration::from_millis(c);
            assert!(d >= c / 2 && d <= c, "{d:?} not in [{:?}, {c:?}]", c / 2);
        }
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn huge_attempt_counts_do_not_overflow() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(60));
        assert_eq!(b.ceiling(40), Duration::from_secs(60));
    }
}
