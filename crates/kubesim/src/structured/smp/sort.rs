//! Go's `mergeSortedSlice` and `sort.Stable` (insertion sort + SymMerge), reproduced for the
//! same order of equal items.

use super::lists::index_of;
use super::*;

/// `mergeSortedSlice`: interleaves server-only items (left) into the patch items (right) where the
/// original order puts them.
pub(super) fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    k: Kind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        let li = index_of(server_order, &left[i], merge_key, k);
        let ri = index_of(server_order, &right[j], merge_key, k);
        match (li, ri) {
            (Some(a), Some(b)) if a < b => {
                out.push(left[i].clone());
                i += 1;
            }
            _ => {
                out.push(right[j].clone());
                j += 1;
            }
        }
    }
    out.extend(left[i..].iter().cloned());
    out.extend(right[j..].iter().cloned());
    out
}

/// Go's `sort.SliceStable` (insertion sort on blocks of 20, then SymMerge). The comparator used by
/// strategic merge patch is not a strict weak order when items are missing from the order list, so the
/// exact algorithm matters for the result.
pub(super) fn go_stable_sort<F>(data: &mut [Value], less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b, less);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n, less);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(data, a, a + block, b, less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, less);
        }
        block *= 2;
    }
}

pub(super) fn insertion_sort<F>(data: &mut [Value], a: usize, b: usize, less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(data, j, j - 1) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

pub(super) fn sym_merge<F>(data: &mut [Value], a: usize, m: usize, b: usize, less: &F)
where
    F: Fn(&[Value], usize, usize) -> bool,
{
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(data, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = a;
        while k + 1 < i {
            data.swap(k, k + 1);
            k += 1;
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(data, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(data, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, less);
    }
}

pub(super) fn rotate(data: &mut [Value], a: usize, m: usize, b: usize) {
    let mut i = m - a;
    let mut j = b - m;
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

pub(super) fn swap_range(data: &mut [Value], a: usize, b: usize, n: usize) {
    for i in 0..n {
        data.swap(a + i, b + i);
    }
}
