//! Reading the few arguments the span rules need out of the argument text.
//!
//! Arguments are printed joined by `, ` and strings are not escaped, so a string may contain
//! anything; we only ever look at object references, new ids and plain integers, and split on
//! `, ` outside double quotes.

use crate::ingest::words::{find_near, identifier_len};

/// A reference to an object as printed in arguments: `wl_buffer@44`, `wl_buffer#44`, `nil`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectArg<'a> {
    /// `nil`
    Nil,
    /// `iface@id` (the interface is `[unknown]` for untyped new ids)
    Object {
        /// interface name as printed
        interface: &'a [u8],
        /// object id
        id: u32,
    },
}

/// The `n`-th (0-based) argument, split on `, ` outside double quotes.
pub fn nth(args: &[u8], n: usize) -> Option<&[u8]> {
    split(args).nth(n)
}

/// Iterates over the arguments.
pub fn split(args: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(args);
    std::iter::from_fn(move || {
        let s = rest?;
        let mut in_string = false;
        for i in 0..s.len() {
            match s[i] {
                b'"' => in_string = !in_string,
                b',' if !in_string && s.get(i + 1) == Some(&b' ') => {
                    rest = Some(&s[i + 2..]);
                    return Some(&s[..i]);
                }
                _ => {}
            }
        }
        rest = None;
        (!s.is_empty()).then_some(s)
    })
}

/// Parses `iface@id`, `iface#id`, `[unknown]@id` or `nil`, optionally after `new id `.
pub fn object(arg: &[u8]) -> Option<ObjectArg<'_>> {
    let arg = arg.strip_prefix(b"new id ").unwrap_or(arg);
    if arg == b"nil" {
        return Some(ObjectArg::Nil);
    }
    let at = arg.iter().rposition(|&b| b == b'@' || b == b'#')?;
    let (interface, id) = (&arg[..at], &arg[at + 1..]);
    if interface.is_empty() {
        return None;
    }
    if id == b"nil" {
        return Some(ObjectArg::Nil);
    }
    Some(ObjectArg::Object {
        interface,
        id: number(id)?,
    })
}

/// The id of `iface@id` (or `iface#id`) at the start of `arg`, the interface an identifier and
/// the id of one to nine digits, and where it ends; `None` for anything else. What [`object`]
/// makes of such an argument, without its search from the end.
#[inline]
pub fn plain_object(arg: &[u8]) -> Option<(u32, usize)> {
    let iface = identifier_len(arg);
    if iface == 0 || !matches!(arg.get(iface), Some(b'@' | b'#')) {
        return None;
    }
    let (id, len) = object_id(&arg[iface + 1..])?;
    Some((id, iface + 1 + len))
}

/// The id of one to nine digits at the start of `digits`, and how many digits it has.
#[inline(always)]
pub fn object_id(digits: &[u8]) -> Option<(u32, usize)> {
    let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if len == 0 || len > 9 {
        return None;
    }
    let id = digits[..len]
        .iter()
        .fold(0, |v, &d| v * 10 + u32::from(d - b'0'));
    Some((id, len))
}

/// The id a lone `new id iface@id` argument creates (a `sync`'s or a `frame`'s, as printed):
/// the id [`object`] reads of the first argument, and the one [`for_each_new_id`] finds;
/// `None` when the arguments are anything else.
#[inline]
pub fn lone_new_id(args: &[u8]) -> Option<u32> {
    // The callback of every `sync` and `frame`, read without finding the interface's end (a
    // block of an object shorter than sixteen bytes is read from a copy, which made a `sync`
    // line's argument costly); its id as `plain_object` reads it.
    if let Some(digits) = args.strip_prefix(b"new id wl_callback@")
        && let Some(id) = whole_id(digits)
    {
        return Some(id);
    }
    let object = args.strip_prefix(b"new id ")?;
    match plain_object(object)? {
        (id, end) if end == object.len() => Some(id),
        _ => None,
    }
}

/// The value of `digits` when they are one to nine ASCII digits and nothing else: an id as
/// [`object_id`] reads it, a number as [`number`] reads it.
#[inline(always)]
pub fn whole_id(digits: &[u8]) -> Option<u32> {
    object_id(digits).and_then(|(id, len)| (len == digits.len()).then_some(id))
}

/// The id of a first argument `iface@id` followed by `, ` or nothing (an `attach`'s buffer):
/// what [`object`] reads of [`nth`]`(args, 0)`; `None` for anything else.
#[inline]
pub fn first_plain_object(args: &[u8]) -> Option<u32> {
    let (id, end) = plain_object(args)?;
    (end == args.len() || args[end..].starts_with(b", ")).then_some(id)
}

/// A non-negative decimal integer that fits in 32 bits.
pub fn number(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = s
        .iter()
        .fold(0u64, |acc, &b| acc * 10 + u64::from(b - b'0'));
    u32::try_from(v).ok()
}

/// Finds `new id ` in argument text. Argument texts are short, where a general substring
/// searcher spends more on setup than on searching: this looks for `n` a block at a time and
/// compares the rest in place.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewIdFinder;

impl NewIdFinder {
    /// A finder for `new id `.
    pub fn new() -> Self {
        NewIdFinder
    }

    fn find_iter<'a>(&self, searched: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
        // `find_near`: arguments are a few dozen bytes, where a `memchr` call's setup cost
        // more than the search (the two calls per line here were a measurable share of reading
        // a WAYLAND_DEBUG line)
        let mut from = 0;
        std::iter::from_fn(move || {
            while let Some(at) = find_near(searched, from, b'n') {
                from = at + 1;
                if searched[at..].starts_with(b"new id ") {
                    return Some(at);
                }
            }
            None
        })
    }
}

/// The shortest argument text that creates an object: `new id ` and an object (`a@1`) are ten
/// bytes.
pub const NEW_ID_SHORTEST: usize = 10;

/// Calls `f(interface, id)` for every object created by a `new id` argument.
///
/// Shorter arguments than one could be (a `delete_id`'s, a `done`'s, none: most lines) are
/// told here, where it is called, without the call of the search: most lines need no search,
/// and the call alone was a measurable cost on each (as for the span rules' reading).
#[inline(always)]
pub fn for_each_new_id<'a>(args: &'a [u8], finder: &NewIdFinder, f: impl FnMut(&'a [u8], u32)) {
    if args.len() >= NEW_ID_SHORTEST {
        search_new_ids(args, finder, f);
    }
}

#[inline(never)]
fn search_new_ids<'a>(args: &'a [u8], finder: &NewIdFinder, mut f: impl FnMut(&'a [u8], u32)) {
    for at in finder.find_iter(args) {
        let tail = &args[at..];
        let end = find_near(tail, 0, b',').unwrap_or(tail.len());
        if let Some(ObjectArg::Object { interface, id }) = object(&tail[..end]) {
            f(interface, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_on_comma_space_outside_strings() {
        let args: Vec<_> = split(b"4, \"a, b\", 3, new id [unknown]@6").collect();
        assert_eq!(args, [&b"4"[..], b"\"a, b\"", b"3", b"new id [unknown]@6"]);
        // Comma-locale fixed-point numbers have no space after the comma.
        let args: Vec<_> = split(b"12885, wl_surface@16, 499,597656").collect();
        assert_eq!(args.len(), 3);
        assert_eq!(split(b"").count(), 0);
    }

    #[test]
    fn object_references_parse_in_both_spellings() {
        assert_eq!(
            object(b"wl_buffer@44"),
            Some(ObjectArg::Object {
                interface: b"wl_buffer",
                id: 44
            })
        );
        assert_eq!(
            object(b"new id wl_callback#61"),
            Some(ObjectArg::Object {
                interface: b"wl_callback",
                id: 61
            })
        );
        assert_eq!(object(b"nil"), Some(ObjectArg::Nil));
        assert_eq!(object(b"new id wl_buffer#nil"), Some(ObjectArg::Nil));
        assert_eq!(object(b"42"), None);
    }

    #[test]
    fn new_ids_are_found_anywhere_in_the_arguments() {
        let finder = NewIdFinder::new();
        let ids_of = |args: &'static [u8]| {
            let mut ids = Vec::new();
            for_each_new_id(args, &finder, |iface, id| ids.push((iface, id)));
            ids
        };
        assert_eq!(
            ids_of(b"4, \"wl_compositor\", 3, new id [unknown]@6"),
            [(&b"[unknown]"[..], 6)]
        );
        assert_eq!(
            ids_of(b"wl_surface@3, new id wp_presentation_feedback@9"),
            [(&b"wp_presentation_feedback"[..], 9)]
        );
        assert!(ids_of(b"0, 0").is_empty());
    }

    /// Argument texts near the shapes the short readers take, changed at every byte.
    fn argument_variants() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for args in [
            "new id wl_callback@3",
            "new id wl_callback#123456789",
            "new id wl_callback@1234567890",
            "new id [unknown]@6",
            "new id wl_callback@nil",
            "wl_buffer@44, 0, 0",
            "wl_buffer#44",
            "nil, 0, 0",
            "wl_buffer@4294967295, 0, 0",
            "\"a, b\", wl_buffer@4",
        ] {
            let args = args.as_bytes();
            out.push(args.to_vec());
            for at in 0..args.len() {
                for b in *b" 0a_@#,\"n" {
                    let mut v = args.to_vec();
                    v[at] = b;
                    out.push(v);
                }
                let mut v = args.to_vec();
                v.remove(at);
                out.push(v);
                out.push([&args[..at], b", new id x@5"].concat());
            }
        }
        out
    }

    /// The general readers read the first argument of `args` as object `id`.
    fn assert_first_argument_is(args: &[u8], id: u32) {
        let read = nth(args, 0).and_then(object);
        assert!(
            matches!(read, Some(ObjectArg::Object { id: i, .. }) if i == id),
            "{:?}",
            args.escape_ascii()
        );
    }

    #[test]
    fn a_lone_new_id_is_the_object_read_and_the_only_one_created() {
        let finder = NewIdFinder::new();
        let mut taken = 0;
        for args in argument_variants() {
            let Some(id) = lone_new_id(&args) else {
                continue;
            };
            taken += 1;
            assert_first_argument_is(&args, id);
            let mut created = Vec::new();
            for_each_new_id(&args, &finder, |_, id| created.push(id));
            assert_eq!(created, [id], "{:?}", args.escape_ascii());
        }
        assert!(taken > 20, "{taken}");
    }

    #[test]
    fn a_callback_read_by_its_name_is_what_the_plain_object_reader_reads() {
        let mut taken = 0;
        for args in argument_variants() {
            let by_object = args
                .strip_prefix(b"new id ")
                .and_then(|o| plain_object(o).filter(|&(_, end)| end == o.len()))
                .map(|(id, _)| id);
            assert_eq!(lone_new_id(&args), by_object, "{:?}", args.escape_ascii());
            taken += usize::from(args.starts_with(b"new id wl_callback@") && by_object.is_some());
        }
        assert!(taken > 10, "{taken}");
    }

    #[test]
    fn a_plain_first_object_is_the_object_the_first_argument_reads_as() {
        let mut taken = 0;
        for args in argument_variants() {
            let Some(id) = first_plain_object(&args) else {
                continue;
            };
            taken += 1;
            assert_first_argument_is(&args, id);
        }
        assert!(taken > 20, "{taken}");
    }
}
