//! The key an open span is found by: a span's index and the values of its key fields, as bytes.
//!
//! Every event a rule names builds one (a start to keep, an end to look up), so how it is built
//! is on the path of every event: written into a `Vec` it took a capacity check per byte pushed
//! and a `memcpy` call per value (a measurable share of the pairing of a babeltrace2 event
//! keyed by two fields). [`KeyBuf`] builds it in place, in the inline array a [`SpanKey`]
//! keeps, with the usual short values copied as two overlapping words; longer keys go to the
//! heap.

use crate::ingest::words::equal;

/// The key of an open span ([`KeyBuf`]'s bytes), kept inline when it is short (every key of a
/// pid, an id or an address and a thread): a span that starts then costs no allocation, and one
/// that ends no free.
#[derive(Debug, Clone)]
pub(super) enum SpanKey {
    /// at most [`INLINE`] bytes: the length, then the bytes (what lies past them is not part of
    /// the key)
    Inline(u8, [u8; INLINE]),
    /// longer keys
    Heap(Box<[u8]>),
}

/// The longest key a [`SpanKey`] keeps inline.
pub(super) const INLINE: usize = 31;

impl SpanKey {
    /// The key of `bytes`.
    #[cfg(test)]
    pub(super) fn new(bytes: &[u8]) -> SpanKey {
        let mut buf = KeyBuf::default();
        buf.push(bytes);
        buf.key()
    }

    fn bytes(&self) -> &[u8] {
        match self {
            SpanKey::Inline(len, inline) => &inline[..usize::from(*len)],
            SpanKey::Heap(bytes) => bytes,
        }
    }
}

// Equal and hashed as its bytes, so that a table of them is looked up by them ([`KeyBytes`]).
// (Compared and hashed as four words instead, perf text read more slowly on one thread with
// fewer instructions, likely because the words were read right after the bytes were written.)
impl PartialEq for SpanKey {
    fn eq(&self, other: &SpanKey) -> bool {
        equal(self.bytes(), other.bytes())
    }
}

impl Eq for SpanKey {}

impl std::hash::Hash for SpanKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

impl std::borrow::Borrow<KeyBytes> for SpanKey {
    fn borrow(&self) -> &KeyBytes {
        KeyBytes::of(self.bytes())
    }
}

/// A key's bytes as an end looks its span up: hashed as the bytes (as [`SpanKey`] is), and
/// compared as words ([`equal`]). As `[u8]`, the comparison of an end's key with the one open
/// span was a `memcmp` call, a visible share of a profile of reading JSON lines, for keys of a
/// few bytes.
#[derive(Debug)]
#[repr(transparent)]
pub(super) struct KeyBytes([u8]);

impl KeyBytes {
    /// `bytes` as a key.
    pub(super) fn of(bytes: &[u8]) -> &KeyBytes {
        // SAFETY: `KeyBytes` is `repr(transparent)` over `[u8]`: the same layout and the
        // same pointer metadata (the length), so the reference keeps its lifetime and length.
        unsafe { &*(std::ptr::from_ref::<[u8]>(bytes) as *const KeyBytes) }
    }
}

impl PartialEq for KeyBytes {
    #[inline]
    fn eq(&self, other: &KeyBytes) -> bool {
        equal(&self.0, &other.0)
    }
}

impl Eq for KeyBytes {}

impl std::hash::Hash for KeyBytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// A key being built: bytes pushed into an inline array while they fit, then into a `Vec`.
#[derive(Debug, Clone, Default)]
pub(super) struct KeyBuf {
    len: usize,
    inline: [u8; INLINE],
    /// the key once it outgrew [`INLINE`] bytes, and whether it did
    long: Vec<u8>,
    spilled: bool,
}

impl KeyBuf {
    /// Empties the key for the next event.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.spilled = false;
    }

    /// Appends `bytes`.
    #[inline]
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let (at, n) = (self.len, bytes.len());
        match self.inline.get_mut(at..at + n) {
            Some(to) if !self.spilled => {
                copy_short(to, bytes);
                self.len += n;
            }
            _ => self.push_long(bytes),
        }
    }

    /// Makes the key `span`, U+001F, `value`, U+001F (`span` one byte): what [`KeyBuf::clear`]
    /// then the four pushes make, written at once while it fits inline.
    #[inline]
    pub(super) fn set_one(&mut self, span: u8, value: &[u8]) {
        let n = value.len();
        match self.inline.get_mut(..n + 3) {
            Some(to) => {
                to[0] = span;
                to[1] = 0x1f;
                copy_short(&mut to[2..n + 2], value);
                to[n + 2] = 0x1f;
                self.len = n + 3;
                self.spilled = false;
            }
            None => {
                self.clear();
                self.push_byte(span);
                self.push_byte(0x1f);
                self.push(value);
                self.push_byte(0x1f);
            }
        }
    }

    /// Appends one byte.
    #[inline]
    pub(super) fn push_byte(&mut self, byte: u8) {
        match self.inline.get_mut(self.len) {
            Some(to) if !self.spilled => {
                *to = byte;
                self.len += 1;
            }
            _ => self.push_long(&[byte]),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_long(&mut self, bytes: &[u8]) {
        if !self.spilled {
            self.long.clear();
            self.long.extend_from_slice(&self.inline[..self.len]);
            self.spilled = true;
        }
        self.long.extend_from_slice(bytes);
    }

    /// The key's bytes, to find an open span by.
    #[inline]
    pub(super) fn as_bytes(&self) -> &KeyBytes {
        KeyBytes::of(self.as_slice())
    }

    /// The key's bytes.
    #[inline]
    pub(super) fn as_slice(&self) -> &[u8] {
        match self.spilled {
            false => &self.inline[..self.len],
            true => &self.long,
        }
    }

    /// The key, to keep with an open span.
    #[inline]
    pub(super) fn key(&self) -> SpanKey {
        match self.spilled {
            false => SpanKey::Inline(self.len as u8, self.inline),
            true => SpanKey::Heap(self.long.as_slice().into()),
        }
    }
}

/// `to.copy_from_slice(from)` (equal lengths) without a `memcpy` call for up to 16 bytes: two
/// words, or two halves, that overlap in the middle. Always inlined: a call here costs what it
/// saves.
#[inline(always)]
fn copy_short(to: &mut [u8], from: &[u8]) {
    let n = from.len();
    match n {
        0..4 => to.iter_mut().zip(from).for_each(|(t, f)| *t = *f),
        4..8 => {
            to[..4].copy_from_slice(&from[..4]);
            to[n - 4..].copy_from_slice(&from[n - 4..]);
        }
        8..=16 => {
            to[..8].copy_from_slice(&from[..8]);
            to[n - 8..].copy_from_slice(&from[n - 8..]);
        }
        _ => to.copy_from_slice(from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_built_in_pieces_has_the_bytes_pushed_whatever_its_length() {
        let mut buf = KeyBuf::default();
        for total in 0..80usize {
            buf.clear();
            let mut expected = Vec::new();
            let mut piece = 0u8;
            while expected.len() < total {
                let n = usize::from(piece % 19).min(total - expected.len());
                let bytes: Vec<u8> = (0..n)
                    .map(|i| b'a' + ((i + expected.len()) % 26) as u8)
                    .collect();
                match n {
                    1 => buf.push_byte(bytes[0]),
                    _ => buf.push(&bytes),
                }
                expected.extend_from_slice(&bytes);
                piece += 1;
            }
            assert_eq!(buf.as_slice(), expected.as_slice(), "{total} bytes");
            let key = buf.key();
            assert_eq!(key.bytes(), expected.as_slice());
            assert_eq!(matches!(key, SpanKey::Inline(..)), total <= INLINE);
            assert_eq!(key, SpanKey::new(&expected), "{total} bytes");
        }
    }

    #[test]
    fn keys_are_equal_and_hashed_alike_exactly_when_their_bytes_are() {
        use std::hash::BuildHasher;
        let hash = |k: &SpanKey| rustc_hash::FxBuildHasher.hash_one(k);
        let bytes: Vec<Vec<u8>> = ["", "a", "a\0", "\0a", "ab", "ba"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([
                vec![7; 31],
                vec![7; 32],
                vec![7; 33],
                [vec![7; 30], vec![8]].concat(),
            ])
            .collect();
        for a in &bytes {
            for b in &bytes {
                let (ka, kb) = (SpanKey::new(a), SpanKey::new(b));
                assert_eq!(ka == kb, a == b, "{a:?} {b:?}");
                if a == b {
                    assert_eq!(hash(&ka), hash(&kb));
                }
            }
        }
    }

    #[test]
    fn a_key_is_found_by_its_bytes_exactly_when_they_are_its_bytes() {
        use std::borrow::Borrow;
        use std::hash::BuildHasher;
        let hasher = rustc_hash::FxBuildHasher;
        // every length to 40, and the same bytes with one byte changed at each place
        for len in 0..40usize {
            let bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let key = SpanKey::new(&bytes);
            let kept: &KeyBytes = key.borrow();
            assert_eq!(kept, KeyBytes::of(&bytes));
            assert_eq!(hasher.hash_one(&key), hasher.hash_one(KeyBytes::of(&bytes)));
            for at in 0..len {
                let mut other = bytes.clone();
                other[at] ^= 0x20;
                assert_ne!(kept, KeyBytes::of(&other), "{len} bytes, changed at {at}");
            }
            if let Some(shorter) = len.checked_sub(1) {
                assert_ne!(kept, KeyBytes::of(&bytes[..shorter]), "{len} bytes");
            }
            let table: rustc_hash::FxHashMap<SpanKey, usize> =
                [(key.clone(), len)].into_iter().collect();
            assert_eq!(table.get(KeyBytes::of(&bytes)), Some(&len));
        }
    }

    #[test]
    fn a_key_of_one_field_set_at_once_is_the_key_pushed_in_pieces() {
        let mut pushed = KeyBuf::default();
        let mut set = KeyBuf::default();
        for n in 0..40 {
            let value: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            // after a long key and after a short one
            for before in [&[b'x'; 40][..], b"7"] {
                set.push(before);
                pushed.clear();
                for piece in [&b"3"[..], b"\x1f", &value, b"\x1f"] {
                    pushed.push(piece);
                }
                set.set_one(b'3', &value);
                assert_eq!(set.as_slice(), pushed.as_slice(), "{n} bytes");
                assert_eq!(set.key(), pushed.key(), "{n} bytes");
                assert_eq!(matches!(set.key(), SpanKey::Inline(..)), n + 3 <= INLINE);
            }
        }
    }

    #[test]
    fn a_cleared_key_that_was_long_is_short_again() {
        let mut buf = KeyBuf::default();
        buf.push(&[b'x'; 40]);
        buf.clear();
        buf.push(b"12");
        buf.push_byte(0x1f);
        assert_eq!(buf.as_slice(), b"12\x1f");
        assert_eq!(buf.key(), SpanKey::new(b"12\x1f"));
    }
}
