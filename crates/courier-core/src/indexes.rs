//! Job index lists (`status.completedIndexes`, `status.failedIndexes`): `0,2-5,7`.
//!
//! Parsing accepts exactly what the API server accepts (intervals strictly increasing, `A-B` with
//! `A < B`); formatting is the Job controller's canonical form (a pair is `1,2`, a run of three or
//! more `1-3`). Status translation re-formats worker lists through this, so a malformed list from a
//! worker is detected instead of being copied onto the origin.

use std::fmt;

/// A set of Job indexes, as sorted, disjoint, non-adjacent inclusive intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexList {
    intervals: Vec<(u32, u32)>,
}

/// Why an index list does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexListError {
    #[error("{fragment:?} is not an index or an interval A-B")]
    BadFragment { fragment: String },
    #[error("non-increasing order, previous: {previous}, current: {current}")]
    NotIncreasing { previous: u32, current: u32 },
}

impl IndexList {
    /// The empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a list the way the API server validates it (without the `< completions` bound; see
    /// [`IndexList::max`]). The empty string is the empty list.
    pub fn parse(s: &str) -> Result<Self, IndexListError> {
        let mut list = Self::new();
        if s.is_empty() {
            return Ok(list);
        }
        let mut previous: Option<u32> = None;
        for fragment in s.split(',') {
            let bad = || IndexListError::BadFragment {
                fragment: fragment.to_string(),
            };
            let (first, last) = match fragment.split_once('-') {
                Some((a, b)) => (
                    parse_index(a).ok_or_else(bad)?,
                    Some(parse_index(b).ok_or_else(bad)?),
                ),
                None => (parse_index(fragment).ok_or_else(bad)?, None),
            };
            for current in std::iter::once(first).chain(last) {
                if let Some(previous) = previous
                    && previous >= current
                {
                    return Err(IndexListError::NotIncreasing { previous, current });
                }
                previous = Some(current);
            }
            list.insert_range(first, last.unwrap_or(first));
        }
        Ok(list)
    }

    /// Adds `first..=last`, merging with touching intervals.
    pub fn insert_range(&mut self, first: u32, last: u32) {
        let (mut lo, mut hi) = (first.min(last), first.max(last));
        let mut merged = Vec::with_capacity(self.intervals.len() + 1);
        for &(a, b) in &self.intervals {
            if b.saturating_add(1) < lo || hi.saturating_add(1) < a {
                merged.push((a, b));
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        merged.push((lo, hi));
        merged.sort_unstable();
        self.intervals = merged;
    }

    /// Whether the list has no index.
    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// The number of indexes.
    pub fn len(&self) -> u64 {
        self.intervals
            .iter()
            .map(|&(a, b)| u64::from(b - a) + 1)
            .sum()
    }

    /// The highest index, if any (the API server requires it to be below `completions`).
    pub fn max(&self) -> Option<u32> {
        self.intervals.last().map(|&(_, b)| b)
    }

    /// Whether `index` is in the list.
    pub fn contains(&self, index: u32) -> bool {
        self.intervals
            .iter()
            .any(|&(a, b)| a <= index && index <= b)
    }

    /// Whether the two lists share an index (completed and failed indexes must not).
    pub fn overlaps(&self, other: &IndexList) -> bool {
        self.intervals
            .iter()
            .any(|&(a, b)| other.intervals.iter().any(|&(c, d)| a <= d && c <= b))
    }
}

fn parse_index(s: &str) -> Option<u32> {
    // Digits only: the API server rejects signs and blanks.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for IndexList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            if !std::mem::take(&mut first) {
                f.write_str(",")?;
            }
            Ok(())
        };
        for &(a, b) in &self.intervals {
            sep(f)?;
            match b - a {
                0 => write!(f, "{a}")?,
                1 => {
                    write!(f, "{a}")?;
                    sep(f)?;
                    write!(f, "{b}")?;
                }
                _ => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_format_canonical() {
        for (input, canonical) in [
            ("", ""),
            ("0", "0"),
            ("0,1", "0,1"),
            ("0-2", "0-2"),
            ("1-2", "1,2"),
            ("0,2-5,7", "0,2-5,7"),
            ("0,1,2", "0-2"),
        ] {
            let list = IndexList::parse(input).expect(input);
            assert_eq!(list.to_string(), canonical, "{input}");
        }
    }

    #[test]
    fn rejects_what_the_api_server_rejects() {
        for bad in [
            "1-1", "1,1", "3,1", "1-3,2", "a", "1-", "-1", " 1", "1,", "1-2-3", "+1",
        ] {
            assert!(IndexList::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn queries() {
        let l = IndexList::parse("0,2-5,7").expect("parse");
        assert_eq!(l.len(), 6);
        assert_eq!(l.max(), Some(7));
        assert!(l.contains(3) && !l.contains(6));
        assert!(l.overlaps(&IndexList::parse("6,7").expect("parse")));
        assert!(!l.overlaps(&IndexList::parse("1,6").expect("parse")));
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(indexes in proptest::collection::btree_set(0u32..64, 0..20)) {
            let mut list = IndexList::new();
            for &i in &indexes {
                list.insert_range(i, i);
            }
            prop_assert_eq!(list.len(), indexes.len() as u64);
            let text = list.to_string();
            let back = IndexList::parse(&text).expect("canonical form parses");
            prop_assert_eq!(&back, &list);
            prop_assert_eq!(back.to_string(), text);
            for i in 0..64 {
                prop_assert_eq!(list.contains(i), indexes.contains(&i));
            }
        }
    }
}
