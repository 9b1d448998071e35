//! What a message carries, so that every transport can be checked to move the right bytes.
//!
//! A message of `len` bytes is a fixed body pattern with the message's sequence number stamped
//! over its first (up to) 8 bytes and mixed into its last byte. Stamping costs O(1) per message,
//! so it does not distort what is measured; a stale, truncated, reordered or shifted message
//! fails [`check_quick`]. [`check_full`] (`--verify`) compares every byte.
//!
//! Besides messages, two small control units cross the transport: a segments note
//! ([`note`], [`NOTE_BYTES`]) and an acknowledgement ([`ACK_BYTES`]). Their sizes are here, in
//! a module that imports nothing, because both [`super::pattern`] (which sends them) and
//! [`super::validate`] (which checks that they fit a ring slot) need them.

/// The first word of a segments note that asks for a sync.
pub const SYNC: u64 = u64::MAX;
/// Bytes of a segments note: segment index (or [`SYNC`]) and sequence number.
pub const NOTE_BYTES: usize = 16;
/// Bytes of an acknowledgement: the number of messages the peer has received.
pub const ACK_BYTES: usize = 8;

/// A segments note: `[segment or SYNC, seq]`.
pub fn note(first: u64, seq: u64) -> [u8; NOTE_BYTES] {
    let mut n = [0u8; NOTE_BYTES];
    n[..8].copy_from_slice(&first.to_le_bytes());
    n[8..].copy_from_slice(&seq.to_le_bytes());
    n
}

/// The body byte at offset `i`.
#[inline]
fn body(i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(7)
}

/// The last byte of a message longer than 8 bytes.
#[inline]
fn tail(len: usize, seq: u64) -> u8 {
    body(len - 1) ^ (seq as u8) ^ 0xA5
}

/// Fills `buf` with the body pattern (once per buffer).
pub fn fill_body(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = body(i);
    }
}

/// Stamps sequence number `seq` into a buffer already holding the body pattern.
#[inline]
pub fn stamp(buf: &mut [u8], seq: u64) {
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    if buf.len() > 8 {
        let last = buf.len() - 1;
        buf[last] = tail(buf.len(), seq);
    }
}

/// Whether `msg` carries sequence number `seq` (header and last byte).
#[inline]
pub fn check_quick(msg: &[u8], seq: u64) -> bool {
    let n = msg.len().min(8);
    if msg[..n] != seq.to_le_bytes()[..n] {
        return false;
    }
    msg.len() <= 8 || msg[msg.len() - 1] == tail(msg.len(), seq)
}

/// Whether `msg` is exactly message `seq`, byte for byte.
pub fn check_full(msg: &[u8], seq: u64) -> bool {
    if !check_quick(msg, seq) {
        return false;
    }
    let end = if msg.len() > 8 {
        msg.len() - 1
    } else {
        msg.len()
    };
    msg.iter()
        .enumerate()
        .take(end)
        .skip(8)
        .all(|(i, &b)| b == body(i))
}

/// The first offset where `msg` differs from message `seq`, for error messages.
pub fn first_difference(msg: &[u8], seq: u64) -> Option<usize> {
    let mut expected = vec![0; msg.len()];
    fill_body(&mut expected);
    stamp(&mut expected, seq);
    msg.iter().zip(&expected).position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: usize, seq: u64) -> Vec<u8> {
        let mut m = vec![0; len];
        fill_body(&mut m);
        stamp(&mut m, seq);
        m
    }

    #[test]
    fn a_stamped_message_passes_both_checks() {
        for len in [1, 7, 8, 9, 1024, 65536] {
            let m = message(len, 123_456);
            assert!(
                check_quick(&m, 123_456) && check_full(&m, 123_456),
                "len {len}"
            );
        }
    }

    #[test]
    fn a_message_with_another_sequence_number_fails() {
        let m = message(1024, 5);
        assert!(!check_quick(&m, 6));
        assert_eq!(first_difference(&m, 6), Some(0));
    }

    #[test]
    fn a_corrupted_body_byte_fails_only_the_full_check() {
        let mut m = message(1024, 5);
        m[500] ^= 1;
        assert!(check_quick(&m, 5));
        assert!(!check_full(&m, 5));
        assert_eq!(first_difference(&m, 5), Some(500));
    }

    #[test]
    fn a_stale_last_byte_fails_the_quick_check() {
        let mut m = message(64, 5);
        let stale = message(64, 4);
        m[63] = stale[63];
        assert!(!check_quick(&m, 5));
    }
}
