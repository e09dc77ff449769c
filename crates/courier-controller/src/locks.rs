//! Locks that survive a poisoned state. What they guard are caches and bookkeeping that stay
//! consistent at every await-free step, so a task that panicked while holding one must not take
//! every other reconcile down with it.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub trait RwLockExt<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockExt<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}

pub trait MutexExt<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_hands_out_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let r = std::sync::Arc::new(RwLock::new(2));
        let (m2, r2) = (m.clone(), r.clone());
        let joined = std::thread::spawn(move || {
            let _g = m2.lock();
            let _w = r2.write();
            panic!("poison both");
        })
        .join();
        assert!(joined.is_err() && m.is_poisoned() && r.is_poisoned());
        *m.lock_or_recover() += 1;
        *r.write_or_recover() += 1;
        assert_eq!((*m.lock_or_recover(), *r.read_or_recover()), (2, 3));
    }
}
