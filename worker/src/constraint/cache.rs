//! A small bounded map from content hash to compiled constraint, evicting the oldest entry first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

pub(super) struct ConstraintCache<V> {
    capacity: usize,
    inner: Mutex<Inner<V>>,
}

struct Inner<V> {
    map: HashMap<[u8; 32], V>,
    order: VecDeque<[u8; 32]>,
}

impl<V: Clone> ConstraintCache<V> {
    pub(super) fn new(capacity: usize) -> Self {
        Self { capacity, inner: Mutex::new(Inner { map: HashMap::new(), order: VecDeque::new() }) }
    }

    pub(super) fn get(&self, key: &[u8; 32]) -> Option<V> {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.map.get(key).cloned()
    }

    pub(super) fn insert(&self, key: [u8; 32], value: V) {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.map.insert(key, value).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > self.capacity {
            if let Some(oldest) = inner.order.pop_front() {
                inner.map.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest_past_capacity() {
        let cache = ConstraintCache::new(2);
        cache.insert([1; 32], 1);
        cache.insert([2; 32], 2);
        cache.insert([3; 32], 3);
        assert_eq!(cache.get(&[1; 32]), None);
        assert_eq!(cache.get(&[2; 32]), Some(2));
        assert_eq!(cache.get(&[3; 32]), Some(3));
    }
}
