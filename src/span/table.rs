//! A value per series, found without hashing when the series is one of the two found last.
//!
//! Every sample and outcome of a span goes to its series' distribution, its counters and its
//! slowest spans: a hash-map look-up of a [`SeriesKey`] (span, side and group, 32 bytes) at
//! each, a measurable share of reading a JSON-lines trace. Consecutive
//! samples mostly fall in one series (every one, without `--group`) or alternate between two,
//! so the table remembers where the last two went and compares the key with them first.

use rustc_hash::FxHashMap;

use super::SeriesKey;

/// Values by series, in the order the series were first seen.
#[derive(Debug, Clone)]
pub struct SeriesTable<V> {
    entries: Vec<(SeriesKey, V)>,
    index: FxHashMap<SeriesKey, usize>,
    /// the entries found last and the one before (a WAYLAND_DEBUG log's sync and commit
    /// spans alternate: one entry remembered, every other look-up was hashed)
    last: [usize; 2],
}

impl<V> Default for SeriesTable<V> {
    fn default() -> Self {
        SeriesTable {
            entries: Vec::new(),
            index: FxHashMap::default(),
            last: [0; 2],
        }
    }
}

impl<V> SeriesTable<V> {
    /// The value of `key`, made by `make` if the series is new.
    ///
    /// The two remembered entries are compared here, inlined; the rest is out of line: with it
    /// inlined (the making of a new value, a hash-map look-up), every look-up saved and
    /// restored registers around a large frame; so, a hit is a few comparisons, inlined where
    /// the sample is recorded.
    #[inline]
    pub fn entry(&mut self, key: &SeriesKey, make: impl FnOnce() -> V) -> &mut V {
        let [last, before] = self.last;
        if self.entries.get(last).is_some_and(|(k, _)| k == key) {
            return &mut self.entries[last].1;
        }
        if self.entries.get(before).is_some_and(|(k, _)| k == key) {
            self.last = [before, last];
            return &mut self.entries[before].1;
        }
        self.find(key, make)
    }

    /// [`SeriesTable::entry`] of a key other than the two remembered.
    #[cold]
    #[inline(never)]
    fn find(&mut self, key: &SeriesKey, make: impl FnOnce() -> V) -> &mut V {
        let at = match self.index.get(key) {
            Some(&at) => at,
            None => {
                self.entries.push((*key, make()));
                self.index.insert(*key, self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        self.last = [at, self.last[0]];
        &mut self.entries[at].1
    }

    /// The value of `key`, if the series exists.
    pub fn get(&self, key: &SeriesKey) -> Option<&V> {
        self.index.get(key).map(|&at| &self.entries[at].1)
    }

    /// Every series and its value, in the order they were first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&SeriesKey, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Whether no series exists.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Group;
    use super::*;

    fn key(span: usize) -> SeriesKey {
        SeriesKey {
            span,
            side: None,
            group: Group::All,
        }
    }

    #[test]
    fn each_series_keeps_its_own_value_whichever_was_found_last() {
        let mut t = SeriesTable::<u32>::default();
        for span in [0, 0, 1, 0, 2, 2, 1, 0] {
            *t.entry(&key(span), || 0) += 1;
        }
        assert_eq!(t.get(&key(0)), Some(&4));
        assert_eq!(t.get(&key(1)), Some(&2));
        assert_eq!(t.get(&key(2)), Some(&2));
        assert_eq!(t.get(&key(3)), None);
        let order: Vec<usize> = t.iter().map(|(k, _)| k.span).collect();
        assert_eq!(order, [0, 1, 2]);
        assert!(!t.is_empty() && SeriesTable::<u32>::default().is_empty());
    }
}
