//! Object ids and their generations.
//!
//! Wayland reuses an id once it is freed (`wl_display.delete_id` for client-allocated ids;
//! server-allocated ids ≥ 0xff000000 are simply reused), so one id names a sequence of objects.
//! The generation changes when an object is *created* with an id that was used before, not at
//! `delete_id`: libwayland can print `delete_id(61)` before the last event of object 61 (the
//! display queue is dispatched first), and that late event must still belong to the old object.

use rustc_hash::FxHashMap;

/// First server-allocated object id.
pub const SERVER_ID_BASE: u32 = 0xff00_0000;

/// Ids below this (client side, or above SERVER_ID_BASE on the server side) are kept in a
/// vector; others in a map.
const DENSE_LIMIT: u32 = 1 << 16;

/// One object: its id and which generation of that id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// protocol id
    pub id: u32,
    /// 0 for the first object with this id
    pub generation: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    generation: u32,
    used: bool,
    deleted: bool,
    created: bool,
    /// the object this id names now was made by a span's start ([`Objects::created_elsewhere`])
    spanned: bool,
    /// a span was started under this generation's key ([`Objects::mark_spanned`]): a callback
    /// table may hold the key until the next generation (unlike `spanned`, not cleared when an
    /// unused id is made: the object keeps the key a `sync` without `new id` started under)
    span_keyed: bool,
    /// [`Objects::touch`]ed: a key of a surface, a pending buffer or a feedback, which a
    /// table may hold (touching marks the id used: only a new generation clears it)
    touched: bool,
}

/// The result of creating an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// the new object
    pub key: ObjKey,
    /// the object this id named before, which can no longer receive messages
    pub replaced: Option<Replaced>,
    /// the id was reused while its previous object was still alive (no `delete_id` between):
    /// normal for server-allocated ids, a sign of several connections in one log otherwise
    pub reused_live_id: bool,
}

/// An object whose id was created again, and what it may key: a table holds an object only
/// as a span's callback ([`Objects::mark_spanned`]) or as a surface, buffer or feedback
/// ([`Objects::touch`]), so it need not be looked for in the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replaced {
    /// the old object
    pub key: ObjKey,
    /// a span was started under its key (it may have been made before or after: a `sync`
    /// written without `new id`)
    pub spanned: bool,
    /// it was touched
    pub touched: bool,
}

/// The objects of one connection.
#[derive(Debug, Default)]
pub struct Objects {
    client: Vec<Slot>,
    server: Vec<Slot>,
    sparse: FxHashMap<u32, Slot>,
}

impl Objects {
    #[inline]
    fn slot(&self, id: u32) -> Slot {
        match dense_index(id) {
            Some((false, i)) => self.client.get(i).copied().unwrap_or_default(),
            Some((true, i)) => self.server.get(i).copied().unwrap_or_default(),
            None => self.sparse.get(&id).copied().unwrap_or_default(),
        }
    }

    /// The slot of `id`: a slot of the vectors is found here, where it is called (a call for
    /// every slot, with the frame of the map's look-up, was a cost on every line), a new one or
    /// one of the map by [`Objects::slot_made`].
    #[inline(always)]
    fn slot_mut(&mut self, id: u32) -> &mut Slot {
        match dense_index(id) {
            Some((false, i)) if i < self.client.len() => &mut self.client[i],
            Some((true, i)) if i < self.server.len() => &mut self.server[i],
            _ => self.slot_made(id),
        }
    }

    #[inline(never)]
    fn slot_made(&mut self, id: u32) -> &mut Slot {
        match dense_index(id) {
            Some((server, i)) => {
                let slots = if server {
                    &mut self.server
                } else {
                    &mut self.client
                };
                if slots.len() <= i {
                    slots.resize(i + 1, Slot::default());
                }
                &mut slots[i]
            }
            None => self.sparse.entry(id).or_default(),
        }
    }

    /// The object `id` currently names.
    #[inline]
    pub fn current(&self, id: u32) -> ObjKey {
        ObjKey {
            id,
            generation: self.slot(id).generation,
        }
    }

    /// The object `id` currently names, which is now known to exist even if its creation was
    /// not seen (a log that starts mid-stream): creating `id` again makes a new generation.
    #[inline]
    pub fn touch(&mut self, id: u32) -> ObjKey {
        let slot = self.slot_mut(id);
        slot.used = true;
        slot.touched = true;
        ObjKey {
            id,
            generation: slot.generation,
        }
    }

    /// Records the creation of an object with `id`.
    pub fn create(&mut self, id: u32) -> Created {
        let slot = self.slot_mut(id);
        let replaced = slot.used.then_some(Replaced {
            key: ObjKey {
                id,
                generation: slot.generation,
            },
            spanned: slot.span_keyed,
            touched: slot.touched,
        });
        let reused_live_id = slot.used && !slot.deleted && id < SERVER_ID_BASE;
        if slot.used {
            slot.generation += 1;
            slot.span_keyed = false;
        }
        slot.used = true;
        slot.deleted = false;
        slot.created = true;
        slot.spanned = false;
        slot.touched = false;
        Created {
            key: ObjKey {
                id,
                generation: slot.generation,
            },
            replaced,
            reused_live_id,
        }
    }

    /// Whether the object `id` currently names was created by a message other than one that
    /// starts a span (see [`Objects::mark_spanned`]): such an object's events are not ours.
    pub fn created_elsewhere(&self, id: u32) -> bool {
        let slot = self.slot(id);
        slot.created && !slot.spanned
    }

    /// Records that the object `id` currently names was created by a span's start, and that
    /// a span is keyed by it.
    pub fn mark_spanned(&mut self, id: u32) {
        let slot = self.slot_mut(id);
        slot.spanned = true;
        slot.span_keyed = true;
    }

    /// Records `wl_display.delete_id(id)`.
    pub fn delete(&mut self, id: u32) {
        self.slot_mut(id).deleted = true;
    }
}

fn dense_index(id: u32) -> Option<(bool, usize)> {
    if id < DENSE_LIMIT {
        Some((false, id as usize))
    } else if id >= SERVER_ID_BASE && id - SERVER_ID_BASE < DENSE_LIMIT {
        Some((true, (id - SERVER_ID_BASE) as usize))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reusing_an_id_after_delete_id_makes_a_new_generation() {
        let mut objects = Objects::default();
        let first = objects.create(61);
        assert_eq!(
            first,
            Created {
                key: ObjKey {
                    id: 61,
                    generation: 0
                },
                replaced: None,
                reused_live_id: false,
            }
        );
        objects.delete(61);
        // Late event after delete_id still names the old object.
        assert_eq!(objects.current(61), first.key);
        let second = objects.create(61);
        assert_eq!(second.key.generation, 1);
        assert_eq!(second.replaced.map(|r| r.key), Some(first.key));
        assert!(!second.reused_live_id);
    }

    #[test]
    fn an_object_used_before_its_creation_was_seen_gets_a_new_generation_when_created() {
        let mut objects = Objects::default();
        let seen = objects.touch(7);
        assert!(!objects.created_elsewhere(7));
        objects.delete(7);
        assert_eq!(objects.create(7).replaced.map(|r| r.key), Some(seen));
        assert!(objects.created_elsewhere(7));
        objects.mark_spanned(7);
        assert!(!objects.created_elsewhere(7));
    }

    #[test]
    fn a_replaced_object_says_whether_it_was_touched_or_spanned_in_its_own_life() {
        let mut objects = Objects::default();
        let made = |objects: &mut Objects| match objects.create(9).replaced {
            Some(r) => (true, r.touched, r.spanned),
            None => (false, false, false),
        };
        assert_eq!(made(&mut objects), (false, false, false));
        assert_eq!(made(&mut objects), (true, false, false));
        objects.touch(9);
        assert_eq!(made(&mut objects), (true, true, false));
        assert_eq!(made(&mut objects), (true, false, false));
        objects.mark_spanned(9);
        assert_eq!(made(&mut objects), (true, false, true));
        objects.mark_spanned(9);
        objects.touch(9);
        assert_eq!(made(&mut objects), (true, true, true));
        assert_eq!(made(&mut objects), (true, false, false));
    }

    #[test]
    fn a_span_started_under_an_id_not_yet_made_is_looked_for_when_the_id_is_made_again() {
        // a `sync(wl_callback@7)` written without `new id`: the span's key is generation 0,
        // which the first object made under 7 keeps (the id was not used)
        let mut objects = Objects::default();
        objects.mark_spanned(7);
        let first = objects.create(7);
        assert_eq!((first.key.generation, first.replaced), (0, None));
        assert!(objects.created_elsewhere(7));
        let again = objects.create(7).replaced.unwrap();
        assert_eq!((again.key.generation, again.spanned), (0, true));
        assert!(!objects.create(7).replaced.unwrap().spanned);
    }

    #[test]
    fn reusing_a_live_client_id_is_flagged() {
        let mut objects = Objects::default();
        objects.create(5);
        assert!(objects.create(5).reused_live_id);
    }

    #[test]
    fn server_and_sparse_ids_have_generations_too() {
        let mut objects = Objects::default();
        for id in [SERVER_ID_BASE + 3, 529_381_776] {
            objects.create(id);
            let again = objects.create(id);
            assert_eq!(again.key, ObjKey { id, generation: 1 });
            // Server ids are reused without delete_id by design; a live client id is not.
            assert_eq!(again.reused_live_id, id < SERVER_ID_BASE, "id {id}");
        }
    }
}
