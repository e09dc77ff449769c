//! The retry backoff as the watches use it: kube's `Backoff` trait, an endless iterator of delays
//! plus `reset` (issue #12 §11: these kill mutants of `backoff.rs` that survived the unit tests;
//! docs/testing.md lists them). A backoff that ends stops the watch for good (kube ends a
//! `StreamBackoff` when its backoff yields `None`); one that never resets stays at the cap after a
//! recovery; one without jitter retries a fleet of failing workers in lockstep.

use std::collections::BTreeSet;
use std::time::Duration;

use courier_controller::backoff::{Backoff, jitter};
use kube::runtime::utils::Backoff as KubeBackoff;

const MIN: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(1);

#[test]
fn as_a_watch_backoff_it_never_ends_grows_to_the_cap_and_resets() {
    let mut b = Backoff::new(MIN, MAX);
    let delays: Vec<Duration> = (&mut b).take(8).collect();
    assert_eq!(delays.len(), 8, "the backoff ran out: {delays:?}");
    for (n, d) in delays.iter().enumerate() {
        let ceiling = (MIN * 2u32.pow(u32::try_from(n).unwrap_or(u32::MAX).min(10))).min(MAX);
        assert!(
            *d >= ceiling / 2 && *d <= ceiling,
            "delay {n} is {d:?}, not in [{:?}, {ceiling:?}]",
            ceiling / 2
        );
    }
    assert_eq!(b.attempts(), 8);
    KubeBackoff::reset(&mut b);
    assert_eq!(b.attempts(), 0, "kube's reset must reset the attempts");
    assert!(
        matches!(b.next(), Some(d) if d >= MIN / 2 && d <= MIN),
        "after a reset the first delay is back at the minimum"
    );
}

#[test]
fn delays_are_spread_so_a_fleet_does_not_retry_in_lockstep() {
    let d = Duration::from_secs(1);
    let draws: BTreeSet<Duration> = (0..50).map(|_| jitter(d)).collect();
    assert!(draws.iter().all(|x| *x >= d / 2 && *x <= d), "{draws:?}");
    // 50 draws from half a million microsecond values: all equal only if nothing is drawn.
    assert!(draws.len() > 1, "no jitter: {draws:?}");
    // Too short to spread: returned as it is.
    assert_eq!(jitter(Duration::from_micros(1)), Duration::from_micros(1));
    assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
}
