//! Index lists (`completedIndexes`, `failedIndexes`, `succeededIndexes`): `1,3-5,7`.
//! Parsing follows the API server's validation (same error texts); formatting follows the Job
//! controller (a run of two is written `1,2`, a run of three or more `1-3`).

use std::fmt;

/// A set of indexes as sorted, disjoint, non-adjacent inclusive intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexSet {
    intervals: Vec<(i32, i32)>,
}

impl IndexSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses an index list the way the API server validates it: intervals strictly increasing,
    /// every index below `completions`. Errors carry the server's wording (without the
    /// `error parsing <field>: ` prefix the caller adds).
    pub fn parse_checked(s: &str, completions: i32) -> Result<Self, String> {
        let mut set = Self::new();
        if s.is_empty() {
            return Ok(set);
        }
        let mut last: Option<i64> = None;
        for fragment in s.split(',') {
            let parts: Vec<&str> = fragment.split('-').collect();
            if parts.len() > 2 {
                return Err(format!(
                    "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
                    crate::errors::go_quote(fragment)
                ));
            }
            let x = parse_index(parts[0], completions)?;
            if let Some(l) = last
                && l >= x
            {
                return Err(format!("non-increasing order, previous: {l}, current: {x}"));
            }
            last = Some(x);
            let mut end = x;
            if let Some(second) = parts.get(1) {
                let y = parse_index(second, completions)?;
                if x >= y {
                    return Err(format!("non-increasing order, previous: {x}, current: {y}"));
                }
                last = Some(y);
                end = y;
            }
            // Both bounds were checked against `completions` (an i32), so they fit.
            set.insert_range(x as i32, end as i32);
        }
        Ok(set)
    }

    /// Parses a list written by a well-behaved writer, without bounds; `None` if malformed.
    pub fn parse_lenient(s: &str) -> Option<Self> {
        Self::parse_checked(s, i32::MAX).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Number of indexes in the set.
    pub fn len(&self) -> i64 {
        self.intervals
            .iter()
            .map(|(a, b)| i64::from(*b) - i64::from(*a) + 1)
            .sum()
    }

    pub fn contains(&self, i: i32) -> bool {
        self.intervals.iter().any(|(a, b)| *a <= i && i <= *b)
    }

    pub fn insert(&mut self, i: i32) {
        self.insert_range(i, i);
    }

    /// Adds `[a, b]`, merging with overlapping or adjacent intervals.
    pub fn insert_range(&mut self, a: i32, b: i32) {
        let (mut lo, mut hi) = (a.min(b), a.max(b));
        let mut out = Vec::with_capacity(self.intervals.len() + 1);
        let mut placed = false;
        for &(x, y) in &self.intervals {
            if i64::from(y) + 1 < i64::from(lo) {
                out.push((x, y));
            } else if i64::from(hi) + 1 < i64::from(x) {
                if !placed {
                    out.push((lo, hi));
                    placed = true;
                }
                out.push((x, y));
            } else {
                lo = lo.min(x);
                hi = hi.max(y);
            }
        }
        if !placed {
            out.push((lo, hi));
        }
        self.intervals = out;
    }

    /// The smallest index in both sets.
    pub fn first_overlap(&self, other: &IndexSet) -> Option<i32> {
        let mut best: Option<i32> = None;
        for &(a, b) in &self.intervals {
            for &(c, d) in &other.intervals {
                let lo = a.max(c);
                if lo <= b.min(d) {
                    best = Some(best.map_or(lo, |x| x.min(lo)));
                }
            }
        }
        best
    }

    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        self.intervals.iter().flat_map(|&(a, b)| a..=b)
    }
}

fn parse_index(s: &str, completions: i32) -> Result<i64, String> {
    // Go's strconv.ParseInt(s, 10, 32): optional sign, decimal digits, within int32.
    let digits = s
        .strip_prefix('+')
        .or_else(|| s.strip_prefix('-'))
        .unwrap_or(s);
    let parsed = if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        None
    } else {
        s.trim_start_matches('+')
            .parse::<i64>()
            .ok()
            .filter(|v| i32::try_from(*v).is_ok())
    };
    let Some(v) = parsed else {
        return Err(format!(
            "cannot convert string to integer for index: {}",
            crate::errors::go_quote(s)
        ));
    };
    if v >= i64::from(completions) {
        return Err(format!("too large index: {}", crate::errors::go_quote(s)));
    }
    Ok(v)
}

impl fmt::Display for IndexSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for &(a, b) in &self.intervals {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            match b - a {
                0 => write!(f, "{a}")?,
                1 => write!(f, "{a},{b}")?,
                _ => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_like_the_api_server() {
        assert_eq!(
            IndexSet::parse_checked("0,7", 3).unwrap_err(),
            "too large index: \"7\""
        );
        assert_eq!(
            IndexSet::parse_checked("1-0,a", 3).unwrap_err(),
            "non-increasing order, previous: 1, current: 0"
        );
        assert_eq!(
            IndexSet::parse_checked("1-1", 3).unwrap_err(),
            "non-increasing order, previous: 1, current: 1"
        );
        assert_eq!(
            IndexSet::parse_checked("1,1", 3).unwrap_err(),
            "non-increasing order, previous: 1, current: 1"
        );
        assert_eq!(
            IndexSet::parse_checked("3,1", 5).unwrap_err(),
            "non-increasing order, previous: 3, current: 1"
        );
        assert_eq!(
            IndexSet::parse_checked("a", 3).unwrap_err(),
            "cannot convert string to integer for index: \"a\""
        );
        assert!(
            IndexSet::parse_checked("1-2-3", 5)
                .unwrap_err()
                .starts_with("the fragment \"1-2-3\"")
        );
        let s = IndexSet::parse_checked("0,2-4,6", 7).unwrap();
        assert_eq!(s.len(), 5);
        assert!(s.contains(3) && !s.contains(5));
    }

    #[test]
    fn formats_like_the_job_controller() {
        let mut s = IndexSet::new();
        s.insert(0);
        assert_eq!(s.to_string(), "0");
        s.insert(1);
        assert_eq!(s.to_string(), "0,1");
        s.insert(2);
        assert_eq!(s.to_string(), "0-2");
        s.insert(5);
        s.insert(4);
        assert_eq!(s.to_string(), "0-2,4,5");
        s.insert(3);
        assert_eq!(s.to_string(), "0-5");
    }

    #[test]
    fn overlap_finds_the_smallest_shared_index() {
        let a = IndexSet::parse_lenient("0,3-6").unwrap();
        let b = IndexSet::parse_lenient("1,5-9").unwrap();
        assert_eq!(a.first_overlap(&b), Some(5));
        assert_eq!(
            a.first_overlap(&IndexSet::parse_lenient("1,2").unwrap()),
            None
        );
    }
}
