//! Scanning a line eight bytes at a time, in portable code.
//!
//! The text readers look for a few kinds of byte over short distances: the blank that ends a
//! token, the quote or backslash that ends a JSON string, the space before a field's name.
//! Byte loops cost three to five instructions a byte, and a `memchr` call costs more than a
//! token is long. A `u64` word tests eight bytes at once with the exact zero-byte test (no
//! false positives, unlike the classic `(x - 0x01..) & !x & 0x80..`, so every flagged byte is
//! a match, not only the first), without `unsafe` or a target's vector instructions.

/// `0x01` in every byte: `ONES * c` is byte `c` eight times.
pub const ONES: u64 = 0x0101_0101_0101_0101;

const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Bit 7 of each byte of `x` that is 0, and only of those.
#[inline]
pub fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW) + LOW) | x) & !LOW
}

/// Bit 7 of each byte of `word` equal to `c`.
#[inline]
pub fn bytes_equal(word: u64, c: u8) -> u64 {
    zero_bytes(word ^ (ONES * u64::from(c)))
}

/// The eight bytes of `b` from `i` as a little-endian word (byte `i` lowest), past the end of
/// `b` padded with zero bytes: a search for a byte other than 0 finds nothing there.
#[inline]
pub fn word_at(b: &[u8], i: usize) -> u64 {
    match b.get(i..i + 8) {
        Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        None => {
            let mut w = [0u8; 8];
            let tail = b.get(i..).unwrap_or_default();
            w[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(w)
        }
    }
}

/// The index, within its word, of the byte a mask's lowest set bit flags.
#[inline]
pub fn first_byte(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_equal_to_the_one_looked_for_is_flagged_and_no_other() {
        for c in [0u8, b' ', b'"', 0x7f, 0x80, 0xff] {
            for other in 0..=255u8 {
                for at in 0..8 {
                    let mut w = [other; 8];
                    w[at] = c;
                    let mask = bytes_equal(u64::from_le_bytes(w), c);
                    let expected: u64 = (0..8)
                        .filter(|&k| w[k] == c)
                        .map(|k| 0x80u64 << (8 * k))
                        .sum();
                    assert_eq!(mask, expected, "{c:#x} among {other:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn a_word_past_the_end_is_padded_with_zero_bytes() {
        let b = b"abcdefghij";
        assert_eq!(word_at(b, 0), u64::from_le_bytes(*b"abcdefgh"));
        assert_eq!(word_at(b, 8), u64::from_le_bytes(*b"ij\0\0\0\0\0\0"));
        assert_eq!(word_at(b, 10), 0);
        assert_eq!(word_at(b, 11), 0);
        assert_eq!(first_byte(bytes_equal(word_at(b, 0), b'c')), 2);
    }
}
