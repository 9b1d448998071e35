//! Scanning a line sixteen bytes at a time, a read buffer sixty-four at a time, and digits
//! eight at a time.
//!
//! The text readers look for a few kinds of byte over short distances: the blank that ends a
//! perf or ftrace token, the space before a field's name, the quotes, brackets and commas of a
//! babeltrace2 group, the end of a WAYLAND_DEBUG interface name, the quote, backslash or
//! control character that ends a JSON string. A byte loop costs three to five instructions a
//! byte, and a `memchr` call costs more than a token is long. A [`Block`] compares sixteen
//! bytes with one value in a few vector instructions (SSE2, which every x86-64 has) and gives
//! a bit per byte, so a reader finds every match of a block at once. Other targets get the
//! same answers from a byte loop. [`Positions`] puts four blocks together to find a read
//! buffer's newlines (a `memchr` call a line cost more than a short line's search),
//! [`leading_digits`] and [`last_digits`] read up to eight digits from one word (stamps and
//! ids: a loop per digit was most of reading them), and [`digits_end`] finds where a number's
//! digits end so. [`ascii_blanks`] reads a whole read buffer once, before its lines are read,
//! for what the readers must know of all of it (UTF-8, and blanks other than spaces); it is the
//! one place that uses AVX2, where the CPU has it, as the pass is long enough to pay for asking.

/// Sixteen bytes of a line from some index; past the end of the line, zero bytes (which no
/// reader of lines looks for; [`Positions`], which may be asked for any byte, cuts them off).
#[derive(Clone, Copy)]
pub struct Block(imp::Lanes);

/// How many bytes a [`Block`] holds.
pub const WIDTH: usize = 16;

/// A bit for every byte of a [`Block`] (what `!` of a mask is cut to).
pub const ALL: u32 = (1 << WIDTH) - 1;

impl Block {
    /// The bytes of `b` from `i`.
    #[inline]
    pub fn at(b: &[u8], i: usize) -> Block {
        Block(imp::load(b, i))
    }

    /// Bit k set where byte k is `c`.
    #[inline]
    pub fn eq(self, c: u8) -> u32 {
        imp::eq(self.0, c)
    }

    /// Bit k set where byte k, with the bits of `or` set, is `c` (`or` 0x20 and `c` b'{': `{`
    /// and `[` alike).
    #[inline]
    pub fn eq_or(self, or: u8, c: u8) -> u32 {
        imp::eq_or(self.0, or, c)
    }

    /// Bit k set where byte k is byte k of `other`.
    #[inline]
    pub fn same(self, other: Block) -> u32 {
        imp::same(self.0, other.0)
    }

    /// Bit k set where byte k is in `lo..=hi` (`lo` at most `hi`).
    #[inline]
    pub fn in_range(self, lo: u8, hi: u8) -> u32 {
        debug_assert!(lo <= hi);
        imp::in_range(self.0, lo, hi)
    }

    /// Bit k set where byte k is a letter, a digit or `_` (a C identifier's bytes).
    #[inline]
    pub fn identifier(self) -> u32 {
        imp::identifier(self.0)
    }
}

/// Length of the identifier (`[A-Za-z0-9_]*`) at the start of `s`, sixteen bytes at a time (a
/// byte loop over WAYLAND_DEBUG interface and message names was a twelfth of the reading of a
/// line). For the start of a line's rest: a slice shorter than sixteen bytes is read from a
/// copy ([`Block::at`]'s padding).
#[inline]
pub fn identifier_len(s: &[u8]) -> usize {
    let mut i = 0;
    while i < s.len() {
        // past the end of `s`, zero bytes: not an identifier's (the `min` is free: it tells
        // the callers' slicing the length is in bounds)
        let other = !Block::at(s, i).identifier() & ALL;
        if other != 0 {
            return (i + other.trailing_zeros() as usize).min(s.len());
        }
        i += WIDTH;
    }
    s.len()
}

/// Where byte `c` first is in `b` at or after `from`: the next two [`Block`]s, then `memchr`
/// (a `memchr` call's setup cost more than the search of the dozen bytes to a stamp's `]` or
/// to the space after a babeltrace2 event name).
#[inline]
pub fn find_near(b: &[u8], from: usize, c: u8) -> Option<usize> {
    for k in 0..2 {
        let at = from.saturating_add(k * WIDTH);
        if at >= b.len() {
            return None;
        }
        let mut hits = Block::at(b, at).eq(c);
        if c == 0 {
            // past the end of `b` a block holds zeros, which are not in `b` (for the bytes
            // the callers look for, a constant, this is compiled away)
            hits &= ALL >> WIDTH.saturating_sub(b.len() - at);
        }
        if hits != 0 {
            return Some(at + hits.trailing_zeros() as usize);
        }
    }
    let at = from.saturating_add(2 * WIDTH);
    memchr::memchr(c, b.get(at..)?).map(|p| at + p)
}

/// [`find_near`] without the `memchr` call: sixteen bytes at a time however far, for a byte that
/// ends a token of a line (a babeltrace2 event name, `provider:event:`, is often longer than
/// two blocks, and the call's setup cost more than its search).
#[inline]
pub fn find_by_blocks(b: &[u8], from: usize, c: u8) -> Option<usize> {
    let mut at = from;
    while at < b.len() {
        let mut hits = Block::at(b, at).eq(c);
        if c == 0 {
            // (past the end of `b` a block holds zeros: see `find_near`)
            hits &= ALL >> WIDTH.saturating_sub(b.len() - at);
        }
        if hits != 0 {
            return Some(at + hits.trailing_zeros() as usize);
        }
        at += WIDTH;
    }
    None
}

/// `b` as text when every byte of it is ASCII and none is `except`, sixteen bytes at a time (the
/// names and categories of a Chrome JSON element: a search for a backslash and a `from_utf8`
/// call per string were a measurable share of reading one). `None` otherwise, for the caller to
/// decode.
#[inline]
pub fn ascii_without(b: &[u8], except: u8) -> Option<&str> {
    let mut i = 0;
    while i < b.len() {
        let block = Block::at(b, i);
        // the bytes of `b` only: past its end a block holds zeros
        let bad = (block.in_range(0x80, 0xff) | block.eq(except))
            & (ALL >> WIDTH.saturating_sub(b.len() - i));
        if bad != 0 {
            return None;
        }
        i += WIDTH;
    }
    // SAFETY: every byte of `b` is below 0x80: ASCII, which is UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(b) })
}

/// `a == b` for the dozen bytes of a name or of what lies between two JSON values: eight bytes
/// at a time, the last eight overlapping the ones before (a `bcmp` call cost more than the
/// comparison).
#[inline]
pub fn equal(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    let half = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap_or([0; 4]));
    match n {
        0..4 => a.iter().zip(b).all(|(x, y)| x == y),
        4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => {
            let mut i = 0;
            while i + 8 < n {
                if word(a, i) != word(b, i) {
                    return false;
                }
                i += 8;
            }
            word(a, n - 8) == word(b, n - 8)
        }
    }
}

/// What a block of lines read holds, in one pass, sixty-four bytes at a time: `None` when a
/// byte is not ASCII (the caller then decodes the block as UTF-8), else whether a tab, `\r`
/// or `\x0c` is among its bytes (the white space other than spaces and newlines that a token
/// reader splits at). An ASCII block is UTF-8 without decoding it: one pass, where a
/// `from_utf8` call and a `memchr3` search were two over every byte of every line.
///
/// With AVX2 (asked of the CPU once, by `std`), 32 bytes a vector: the blanks' three
/// comparisons a vector are most of the pass, which takes fewer instructions than with SSE2's
/// 16-byte vectors. Without `BLANKS` (a reader that does not split at blanks), the
/// blanks are not looked for, and an ASCII block gives `Some(false)`.
#[inline]
pub fn ascii_blanks<const BLANKS: bool>(b: &[u8]) -> Option<bool> {
    let whole = b.len() - b.len() % (4 * WIDTH);
    let (high, blanks) = imp::high_and_blanks_all::<BLANKS>(&b[..whole]);
    let rest = &b[whole..];
    if high || !rest.is_ascii() {
        return None;
    }
    Some(BLANKS && (blanks || memchr::memchr3(b'\t', b'\r', 0x0c, rest).is_some()))
}

/// Where byte `c` is in `b`, in order, sixty-four bytes at a time: the newlines of a read
/// buffer. A `memchr` call per line cost more than the search itself on short lines (most of it
/// the call's setup); four [`Block`]s make a mask of a 64-byte stretch, and each match is then
/// a `trailing_zeros`.
pub struct Positions<'a> {
    b: &'a [u8],
    c: u8,
    /// where the stretch of `mask` begins
    base: usize,
    /// the matches of the stretch not yet given, a bit per byte
    mask: u64,
}

impl<'a> Positions<'a> {
    /// The places of `c` in `b`.
    #[inline]
    pub fn of(c: u8, b: &'a [u8]) -> Positions<'a> {
        Positions {
            b,
            c,
            base: 0,
            mask: stretch(b, 0, c),
        }
    }
}

/// A bit for every byte of `b[from..from + 64]` that is `c` (none past the end of `b`).
#[inline]
fn stretch(b: &[u8], from: usize, c: u8) -> u64 {
    let bits = |block: Block| u64::from(block.eq(c));
    match b.get(from..from + 4 * WIDTH) {
        Some(s) => {
            bits(Block::at(s, 0))
                | bits(Block::at(s, WIDTH)) << WIDTH
                | bits(Block::at(s, 2 * WIDTH)) << (2 * WIDTH)
                | bits(Block::at(s, 3 * WIDTH)) << (3 * WIDTH)
        }
        None => {
            let all = (0..4).fold(0, |mask, k| {
                mask | bits(Block::at(b, from + k * WIDTH)) << (k * WIDTH)
            });
            // the padding past the end is zero bytes: cut off (fewer than 64 bytes are left)
            all & ((1u64 << b.len().saturating_sub(from).min(63)) - 1)
        }
    }
}

impl Iterator for Positions<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.base += 4 * WIDTH;
            if self.base >= self.b.len() {
                return None;
            }
            self.mask = stretch(self.b, self.base, self.c);
        }
        let at = self.base + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// The run of ASCII digits at the start of `b`'s first eight bytes, and its value: `None`
/// when `b` is shorter than eight bytes. One word instead of a loop of a compare, a branch,
/// a multiply and an add per digit (the stamp and the ids of every WAYLAND_DEBUG line).
#[inline(always)]
pub fn leading_digits(b: &[u8]) -> Option<(u64, usize)> {
    let word = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    // Each byte less `0`: a digit is 0 to 9 ([`not_digits`]). Borrows and carries only cross
    // into the bytes after the first that is not a digit, which are not read.
    let less = word.wrapping_sub(0x3030_3030_3030_3030);
    let n = digits_of(less);
    if n == 0 {
        return Some((0, 0));
    }
    // The n digits to the top of the word (byte 0, the first digit, is the lowest): the
    // zero bytes below them are leading zeros.
    Some((value_of_eight(less << (8 * (8 - n))), n))
}

/// The index past the run of ASCII digits that begins at `b[i]`, eight bytes at a time (the
/// stamps of a Chrome JSON trace have eleven digits, where a loop per digit showed in the
/// instructions of reading it).
#[inline(always)]
pub fn digits_end(b: &[u8], mut i: usize) -> usize {
    while let Some(w) = b.get(i..i + 8) {
        let word = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        let n = digits_of(word.wrapping_sub(0x3030_3030_3030_3030));
        i += n;
        if n < 8 {
            return i;
        }
    }
    // Fewer than eight bytes left (an id at the end of a row): the last word of `b`, shifted
    // down to begin at `b[i]`, zeros (not digits) shifted in above (a loop per digit here was
    // a measurable share of a short JSON-lines row).
    let left = b.len().saturating_sub(i);
    if left > 0
        && let Some(w) = b.get(b.len().wrapping_sub(8)..)
        && let Ok(w) = <[u8; 8]>::try_from(w)
    {
        let word = u64::from_le_bytes(w) >> (8 * (8 - left));
        return i + digits_of(word.wrapping_sub(0x3030_3030_3030_3030));
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The value of the last `k` bytes of `b` (`k` at most 8, `b` at least 8 bytes long) when
/// they are all digits: one word, as [`leading_digits`] reads one. `None` when `b` is
/// shorter, `k` larger or a byte not a digit.
#[inline]
pub fn last_digits(b: &[u8], k: usize) -> Option<u64> {
    if k == 0 || k > 8 {
        return None;
    }
    let word = u64::from_le_bytes(b.get(b.len().checked_sub(8)?..)?.try_into().ok()?);
    // The last k bytes are the top k of the word. The bytes below them are made `0` first: a
    // borrow from one of them would go up into the bytes read.
    let below = 8 * (8 - k) as u32;
    let low = (1u64 << below) - 1; // (k is at least 1: a shift of at most 56)
    let word = (word & !low) | (0x3030_3030_3030_3030 & low);
    let less = word.wrapping_sub(0x3030_3030_3030_3030);
    if not_digits(less) != 0 {
        return None;
    }
    Some(value_of_eight(less))
}

/// How many of the bytes of `less` (a word's bytes less `0` each), from the first, are digits.
#[inline]
fn digits_of(less: u64) -> usize {
    (not_digits(less).trailing_zeros() / 8) as usize
}

/// The top bit of each byte of `less` (a word's bytes less `0` each) that was not a digit: it
/// borrowed (below `0`) or adding 0x76 reaches 0x80 (above `9`).
#[inline]
pub fn not_digits(less: u64) -> u64 {
    (less | less.wrapping_add(0x7676_7676_7676_7676)) & 0x8080_8080_8080_8080
}

/// The value of eight digits, one a byte (values 0 to 9, the first in the lowest byte): pairs,
/// then fours, then the eight, each step a multiply and a shift.
#[inline]
pub fn value_of_eight(x: u64) -> u64 {
    let x = (x.wrapping_mul(10) + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
    let x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_ffff_0000_ffff;
    (x.wrapping_mul(10_000) + (x >> 32)) & 0xffff_ffff
}

/// The first 16 bytes of `s`, zeros after them when it is shorter (what it is used for), as two
/// little-endian words (bytes 0-7, bytes 8-15): read with two loads that overlap instead of a
/// copy onto the stack (a `memcpy` call, and a load that waited on its stores: a measurable
/// cost on the hot path, where short arguments and names are searched a block at a time).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
fn short_words(s: &[u8]) -> (u64, u64) {
    let m = s.len();
    let w8 = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    let w4 = |at: usize| {
        u64::from(u32::from_le_bytes(
            s[at..at + 4].try_into().unwrap_or([0; 4]),
        ))
    };
    match m {
        // the last word's top `m - 8` bytes are bytes 8.. (a shift of 8 to 56 bits)
        16.. => (w8(0), w8(8)),
        9..16 => (w8(0), w8(m - 8) >> (8 * (16 - m))),
        8 => (w8(0), 0),
        // the last half-word's top `m - 4` bytes are bytes 4.. (a shift of 8 to 32 bits)
        4..8 => (w4(0) | (w4(m - 4) >> (8 * (8 - m))) << 32, 0),
        _ => (s.iter().rev().fold(0, |w, &c| w << 8 | u64::from(c)), 0),
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8, _mm_setzero_si128, _mm_srli_si128, _mm_sub_epi8, _mm_subs_epu8,
    };

    pub type Lanes = __m128i;

    #[inline]
    pub fn load(b: &[u8], i: usize) -> Lanes {
        match b.get(i..i + super::WIDTH) {
            // SAFETY: the slice holds 16 bytes, and an unaligned load reads exactly those.
            Some(bytes) => unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) },
            None => load_tail(b, i),
        }
    }

    /// The last bytes of a line, padded with zero bytes. A line of sixteen bytes or more: its
    /// last sixteen, moved down so that byte `i` comes first (the bytes past the end are the
    /// zeros shifted in). A copy onto the stack, loaded back whole, stalled the load behind the
    /// copy's narrower stores: the field looked up at the end of a perf or ftrace line (its
    /// tokens cross the end) spent a sixth of its time there.
    #[inline(never)]
    fn load_tail(b: &[u8], i: usize) -> Lanes {
        let n = b.len();
        if let Some(last) = n.checked_sub(super::WIDTH).and_then(|from| b.get(from..))
            && i < n
        {
            // SAFETY: `last` holds 16 bytes, and an unaligned load reads exactly those.
            let last = unsafe { _mm_loadu_si128(last.as_ptr().cast()) };
            // 1 to 15: `i + 16 > n` here (else `load` read it), and `i < n`
            return down(last, i + super::WIDTH - n);
        }
        let (lo, hi) = super::short_words(b.get(i..).unwrap_or_default());
        // SAFETY: SSE2 (see below).
        unsafe { _mm_set_epi64x(hi as i64, lo as i64) }
    }

    /// `x`'s bytes moved down by `by` (byte k is byte k + `by` of `x`), zeros shifted in
    /// (`psrldq` takes its count as an immediate: one arm per count).
    fn down(x: Lanes, by: usize) -> Lanes {
        macro_rules! by {
            ($($n:literal)*) => {
                match by {
                    // SAFETY: SSE2 (see below).
                    $($n => unsafe { _mm_srli_si128::<$n>(x) },)*
                    _ => unsafe { _mm_setzero_si128() },
                }
            };
        }
        by!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    }

    // SAFETY (every `unsafe` below): SSE2 is part of x86-64 itself; every x86-64 CPU has it.

    #[inline]
    pub fn eq(x: Lanes, c: u8) -> u32 {
        unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8))) as u32 }
    }

    #[inline]
    pub fn eq_or(x: Lanes, or: u8, c: u8) -> u32 {
        eq(unsafe { _mm_or_si128(x, _mm_set1_epi8(or as i8)) }, c)
    }

    #[inline]
    pub fn same(x: Lanes, y: Lanes) -> u32 {
        unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) as u32 }
    }

    /// A letter, a digit or `_`: the three tests joined before one mask is taken (three masks,
    /// or-ed, take more instructions, on the identifiers of every WAYLAND_DEBUG line).
    #[inline]
    pub fn identifier(x: Lanes) -> u32 {
        // `| 0x20` makes capitals small and leaves small letters; no other byte lands there.
        // c - lo (wrapping) at most hi - lo: the saturating subtraction of hi - lo leaves 0.
        unsafe {
            let zero = _mm_setzero_si128();
            let small = _mm_sub_epi8(
                _mm_or_si128(x, _mm_set1_epi8(0x20)),
                _mm_set1_epi8(b'a' as i8),
            );
            let letter = _mm_cmpeq_epi8(_mm_subs_epu8(small, _mm_set1_epi8(25)), zero);
            let from_0 = _mm_sub_epi8(x, _mm_set1_epi8(b'0' as i8));
            let digit = _mm_cmpeq_epi8(_mm_subs_epu8(from_0, _mm_set1_epi8(9)), zero);
            let under = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'_' as i8));
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, digit), under)) as u32
        }
    }

    /// Of 64 bytes (`chunk` holds that many): a mask whose bits are set where a byte is not
    /// ASCII, and one whose bits are set where one is a tab, `\r` or `\x0c` (each with the
    /// bytes of the four blocks or-ed together: which byte it was is not asked). The vectors
    /// are or-ed before one mask is taken of each.
    #[inline]
    pub fn high_and_blanks(chunk: &[u8]) -> (u32, u32) {
        assert!(chunk.len() >= 4 * super::WIDTH);
        // SAFETY: SSE2 (see above); each load reads 16 of the 64 bytes of `chunk`.
        unsafe {
            let at = |k: usize| _mm_loadu_si128(chunk.as_ptr().add(k * super::WIDTH).cast());
            let (a, b, c, d) = (at(0), at(1), at(2), at(3));
            let high = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
            let blank = |x: Lanes| {
                let tab = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\t' as i8));
                let cr = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\r' as i8));
                let ff = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x0c));
                _mm_or_si128(_mm_or_si128(tab, cr), ff)
            };
            let blanks = _mm_or_si128(
                _mm_or_si128(blank(a), blank(b)),
                _mm_or_si128(blank(c), blank(d)),
            );
            (
                _mm_movemask_epi8(high) as u32,
                _mm_movemask_epi8(blanks) as u32,
            )
        }
    }

    /// Whether a byte of `b` (a multiple of 64 bytes long) is not ASCII, and (`BLANKS`) whether
    /// one is a tab, `\r` or `\x0c`: AVX2 where the CPU has it, else [`high_and_blanks`] a
    /// stretch at a time. Stops at the first stretch with a byte that is not ASCII.
    #[inline]
    pub fn high_and_blanks_all<const BLANKS: bool>(b: &[u8]) -> (bool, bool) {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { high_and_blanks_avx2::<BLANKS>(b) };
        }
        let mut blanks = false;
        for chunk in b.chunks_exact(4 * super::WIDTH) {
            let (high, other) = high_and_blanks(chunk);
            if high != 0 {
                return (true, blanks);
            }
            blanks |= other != 0;
        }
        (false, blanks)
    }

    /// [`high_and_blanks_all`] in 32-byte vectors.
    #[target_feature(enable = "avx2")]
    fn high_and_blanks_avx2<const BLANKS: bool>(b: &[u8]) -> (bool, bool) {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
            _mm256_set1_epi8, _mm256_setzero_si256,
        };
        let blank = |x: __m256i| {
            let tab = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\t' as i8));
            let cr = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\r' as i8));
            let ff = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(0x0c));
            _mm256_or_si256(_mm256_or_si256(tab, cr), ff)
        };
        let mut blanks = _mm256_setzero_si256();
        for chunk in b.chunks_exact(64) {
            // SAFETY: each load reads 32 of the 64 bytes of `chunk`.
            let (x, y) = unsafe {
                (
                    _mm256_loadu_si256(chunk.as_ptr().cast()),
                    _mm256_loadu_si256(chunk.as_ptr().add(32).cast()),
                )
            };
            if _mm256_movemask_epi8(_mm256_or_si256(x, y)) != 0 {
                return (true, _mm256_movemask_epi8(blanks) != 0);
            }
            if BLANKS {
                blanks = _mm256_or_si256(blanks, _mm256_or_si256(blank(x), blank(y)));
            }
        }
        (false, _mm256_movemask_epi8(blanks) != 0)
    }

    #[inline]
    pub fn in_range(x: Lanes, lo: u8, hi: u8) -> u32 {
        // c - lo (wrapping) at most hi - lo: the saturating subtraction of hi - lo leaves 0
        unsafe {
            let from_lo = _mm_sub_epi8(x, _mm_set1_epi8(lo as i8));
            let past = _mm_subs_epu8(from_lo, _mm_set1_epi8(hi.wrapping_sub(lo) as i8));
            _mm_movemask_epi8(_mm_cmpeq_epi8(past, _mm_setzero_si128())) as u32
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
use portable as imp;

/// The same answers, a byte at a time: other targets' code, and what the tests hold the vector
/// code to.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
mod portable {
    pub type Lanes = [u8; super::WIDTH];

    #[inline]
    pub fn load(b: &[u8], i: usize) -> Lanes {
        let mut lanes = [0u8; super::WIDTH];
        let bytes = b.get(i..).unwrap_or_default();
        let n = bytes.len().min(super::WIDTH);
        lanes[..n].copy_from_slice(&bytes[..n]);
        lanes
    }

    pub fn bits(x: Lanes, f: impl Fn(u8) -> bool) -> u32 {
        x.iter()
            .enumerate()
            .filter(|&(_, &c)| f(c))
            .map(|(k, _)| 1u32 << k)
            .sum()
    }

    pub fn eq(x: Lanes, c: u8) -> u32 {
        bits(x, |b| b == c)
    }

    pub fn eq_or(x: Lanes, or: u8, c: u8) -> u32 {
        bits(x, |b| b | or == c)
    }

    pub fn same(x: Lanes, y: Lanes) -> u32 {
        (0..super::WIDTH)
            .filter(|&k| x[k] == y[k])
            .map(|k| 1u32 << k)
            .sum()
    }

    pub fn in_range(x: Lanes, lo: u8, hi: u8) -> u32 {
        bits(x, |b| (lo..=hi).contains(&b))
    }

    pub fn identifier(x: Lanes) -> u32 {
        bits(x, |b| b.is_ascii_alphanumeric() || b == b'_')
    }

    pub fn high_and_blanks_all<const BLANKS: bool>(b: &[u8]) -> (bool, bool) {
        let (high, blanks) = high_and_blanks(b);
        (high != 0, blanks != 0)
    }

    pub fn high_and_blanks(chunk: &[u8]) -> (u32, u32) {
        (
            u32::from(!chunk.is_ascii()),
            u32::from(chunk.iter().any(|&c| matches!(c, b'\t' | b'\r' | 0x0c))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of every length up to 40 bytes, of every byte value, each at every offset.
    fn lines() -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        for len in 0..40usize {
            for seed in 0..9u32 {
                let line = (0..len)
                    .map(|k| (k as u32 * 37 + seed * 101).wrapping_mul(2_654_435_761) >> 24)
                    .map(|x| x as u8)
                    .collect();
                lines.push(line);
            }
        }
        lines.push((0..=255).collect());
        lines.push(b"  \t{[a]}, \"\\\x1f\x7f\x80\xff".to_vec());
        lines
    }

    #[test]
    fn a_block_answers_as_the_byte_loop_does_at_every_offset_and_past_the_end() {
        for line in lines() {
            for i in 0..line.len() + 3 {
                let (block, bytes) = (Block::at(&line, i), portable::load(&line, i));
                for c in [
                    0u8, b' ', b'\t', b'"', b'\\', b'{', b'}', b',', 0x7f, 0x80, 0xff,
                ] {
                    assert_eq!(block.eq(c), portable::eq(bytes, c), "{line:?} at {i}: {c}");
                    assert_eq!(block.eq_or(0x20, c), portable::eq_or(bytes, 0x20, c));
                }
                for (lo, hi) in [(b'a', b'z'), (b'0', b'9'), (0, 0), (0x7f, 0xff), (0, 0xff)] {
                    assert_eq!(block.in_range(lo, hi), portable::in_range(bytes, lo, hi));
                }
                let identifier: u32 =
                    portable::bits(bytes, |b| b.is_ascii_alphanumeric() || b == b'_');
                assert_eq!(block.identifier(), identifier, "{line:?} at {i}");
                // against the block one byte on, and itself
                let (next, next_bytes) = (Block::at(&line, i + 1), portable::load(&line, i + 1));
                assert_eq!(
                    block.same(next),
                    portable::same(bytes, next_bytes),
                    "{line:?} at {i}"
                );
                assert_eq!(block.same(block), ALL);
            }
        }
    }

    #[test]
    fn the_byte_loop_flags_each_byte_by_its_place() {
        let line = b"a{b[c}d]e,\"\\\x01z";
        let bytes = portable::load(line, 0);
        assert_eq!(portable::eq(bytes, b'{'), 1 << 1);
        assert_eq!(portable::eq_or(bytes, 0x20, b'{'), 1 << 1 | 1 << 3);
        assert_eq!(portable::eq_or(bytes, 0x20, b'}'), 1 << 5 | 1 << 7);
        // the padding past the line's 14 bytes is zero bytes, below 0x20 as \x01 is
        assert_eq!(
            portable::in_range(bytes, 0, 0x1f),
            1 << 12 | 1 << 14 | 1 << 15
        );
        assert_eq!(portable::load(line, 20), [0; WIDTH]);
    }

    #[test]
    fn positions_are_where_memchr_finds_the_byte_at_every_length_and_offset() {
        for len in 0..200 {
            for step in [1, 2, 3, 7, 13, 63, 64, 65, 200] {
                for first in 0..step.min(len + 1) {
                    let mut b = vec![b'x'; len];
                    for at in (first..len).step_by(step) {
                        b[at] = b'\n';
                    }
                    let ours: Vec<usize> = Positions::of(b'\n', &b).collect();
                    let theirs: Vec<usize> = memchr::memchr_iter(b'\n', &b).collect();
                    assert_eq!(ours, theirs, "{len} bytes, every {step} from {first}");
                }
            }
        }
        // bytes that differ from the one looked for only in one bit, at every offset of a block
        let b: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        for c in [b'\n', 0, 0x80, 0xff, b'{'] {
            let ours: Vec<usize> = Positions::of(c, &b[3..]).collect();
            let theirs: Vec<usize> = memchr::memchr_iter(c, &b[3..]).collect();
            assert_eq!(ours, theirs, "{c}");
        }
    }

    #[test]
    fn a_short_slice_is_its_bytes_then_zeros_at_every_length() {
        let b: Vec<u8> = (1..=16u8).map(|c| c * 15).collect();
        for m in 0..=16 {
            let mut want = [0u8; 16];
            want[..m].copy_from_slice(&b[..m]);
            let (lo, hi) = short_words(&b[..m]);
            let mut got = [0u8; 16];
            got[..8].copy_from_slice(&lo.to_le_bytes());
            got[8..].copy_from_slice(&hi.to_le_bytes());
            assert_eq!(got, want, "{m} bytes");
        }
    }

    /// Blocks of every length to three stretches of 64 bytes and more, with one byte of each
    /// kind that matters (and a near miss) at every place.
    #[test]
    fn a_block_scanned_once_is_ascii_and_holds_blanks_as_the_two_passes_say() {
        let mut checked = 0;
        for len in 0..200usize {
            let base: Vec<u8> = (0..len).map(|k| b"ab c\n09_:x"[k % 10]).collect();
            let mut blocks = vec![base.clone()];
            for at in 0..len {
                for c in [b'\t', b'\r', 0x0c, 0x0b, 0x7f, 0x80, 0xc3, 0xff] {
                    let mut b = base.clone();
                    b[at] = c;
                    blocks.push(b);
                }
            }
            for b in &blocks {
                let want = b
                    .is_ascii()
                    .then(|| memchr::memchr3(b'\t', b'\r', 0x0c, b).is_some());
                assert_eq!(ascii_blanks::<true>(b), want, "{b:?}");
                assert_eq!(
                    ascii_blanks::<false>(b),
                    b.is_ascii().then_some(false),
                    "{b:?}"
                );
                if let Some(chunk) = b.get(..64) {
                    // the vector code as the byte loop (other targets') has it, as flags
                    let (high, blank) = imp::high_and_blanks(chunk);
                    let (high_bytes, blank_bytes) = portable::high_and_blanks(chunk);
                    assert_eq!((high != 0, blank != 0), (high_bytes != 0, blank_bytes != 0));
                }
                checked += 1;
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn find_near_and_find_by_blocks_are_where_memchr_finds_the_byte_at_every_length_and_start() {
        // (a zero byte too: the padding past the end of a short slice is zeros)
        for (c, other) in [(b']', b' '), (0, b'x')] {
            for len in 0..90 {
                for place in (0..len).map(Some).chain([None]) {
                    let mut b = vec![other; len];
                    if let Some(p) = place {
                        b[p] = c;
                        // a second one after it, which is not the first
                        if p + 5 < len {
                            b[p + 5] = c;
                        }
                    }
                    for from in (0..=len + 2).chain([usize::MAX]) {
                        let theirs = b
                            .get(from..)
                            .and_then(|s| memchr::memchr(c, s))
                            .map(|p| from + p);
                        assert_eq!(
                            find_near(&b, from, c),
                            theirs,
                            "{len} bytes, {place:?}, from {from}"
                        );
                        assert_eq!(
                            find_by_blocks(&b, from, c),
                            theirs,
                            "{len} bytes, {place:?}, from {from}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn leading_digits_are_what_a_digit_loop_reads_for_every_byte_after_them() {
        let by_loop = |b: &[u8]| {
            let n = b[..8].iter().take_while(|c| c.is_ascii_digit()).count();
            let v = b[..n]
                .iter()
                .fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
            (v, n)
        };
        for n in 0..=8 {
            for digits in ["98765432", "00000001", "10000000", "99999999", "05060708"] {
                for stop in 0..=255u8 {
                    let mut b = digits.as_bytes()[..n].to_vec();
                    b.push(stop);
                    b.extend_from_slice(b"9.1]");
                    b.truncate(8.max(n));
                    while b.len() < 8 {
                        b.push(b'7');
                    }
                    assert_eq!(leading_digits(&b), Some(by_loop(&b)), "{b:?}");
                }
            }
        }
        assert_eq!(leading_digits(b"1234567"), None);
    }

    #[test]
    fn digits_end_where_a_digit_loop_ends_them_for_every_byte_after_them() {
        let by_loop =
            |b: &[u8], i: usize| i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        for n in 0..=20 {
            for from in 0..3 {
                // 256: the digits end `b`
                for stop in 0..=256u16 {
                    for tail in [&b""[..], b"9", b"12345678901"] {
                        let mut b: Vec<u8> = b"x:".to_vec();
                        b.extend(b"90817263540918273645".iter().take(n));
                        if let Ok(stop) = u8::try_from(stop) {
                            b.push(stop);
                            b.extend_from_slice(tail);
                        }
                        assert_eq!(digits_end(&b, from), by_loop(&b, from), "{b:?} {from}");
                    }
                }
            }
        }
        assert_eq!(digits_end(b"123", 3), 3);
    }

    #[test]
    fn ascii_without_is_text_exactly_when_every_byte_is_ascii_and_not_the_exception() {
        for len in 0..40 {
            for at in 0..len {
                for c in 0..=255u8 {
                    let mut b: Vec<u8> = b"ThreadControllerImpl::RunTask/x.cc:12"
                        .iter()
                        .copied()
                        .cycle()
                        .take(len)
                        .collect();
                    b[at] = c;
                    for except in [b'\\', 0] {
                        let want = b.iter().all(|&x| x < 0x80 && x != except);
                        let got = ascii_without(&b, except);
                        assert_eq!(got.is_some(), want, "{b:?} {except}");
                        if let Some(s) = got {
                            assert_eq!(s.as_bytes(), &b[..]);
                        }
                    }
                }
            }
        }
        assert_eq!(ascii_without(b"", 0), Some(""));
    }

    #[test]
    fn last_digits_are_what_a_digit_loop_reads_for_every_byte_among_them() {
        let by_loop = |b: &[u8], k: usize| {
            let tail = &b[b.len() - k..];
            tail.iter()
                .all(u8::is_ascii_digit)
                .then(|| tail.iter().fold(0u64, |v, &c| v * 10 + u64::from(c - b'0')))
        };
        for k in 1..=8 {
            for len in 8..=10 {
                for at in 0..len {
                    for other in 0..=255u8 {
                        let mut b: Vec<u8> =
                            b"9081726354".iter().copied().cycle().take(len).collect();
                        b[at] = other;
                        assert_eq!(last_digits(&b, k), by_loop(&b, k), "{b:?} {k}");
                    }
                }
            }
        }
        assert_eq!(last_digits(b"1234567", 3), None);
        assert_eq!(last_digits(b"12345678", 9), None);
        assert_eq!(last_digits(b"12345678", 0), None);
    }

    #[test]
    fn an_identifier_ends_where_the_byte_table_says_at_every_length() {
        let bodies: Vec<Vec<u8>> = (0..40)
            .flat_map(|n| {
                let ident: Vec<u8> = b"wl_Surface_09az".iter().copied().cycle().take(n).collect();
                [
                    b"@".as_slice(),
                    b"",
                    b".x",
                    "é".as_bytes(),
                    b"\0",
                    b"`",
                    b"{",
                    b"/",
                    b":",
                    b"[",
                    b"^",
                ]
                .map(|end| [ident.as_slice(), end].concat())
            })
            .collect();
        for body in bodies {
            let by_table = body
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
                .unwrap_or(body.len());
            assert_eq!(identifier_len(&body), by_table, "{body:?}");
        }
    }

    #[test]
    fn equal_is_slice_equality_at_every_length_and_difference() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(equal(&a, &a.clone()));
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 1;
                assert!(!equal(&a, &b), "{n} {at}");
            }
            assert!(!equal(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }
}
