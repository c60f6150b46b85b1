// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Index-linked doubly linked lists over caller-provided slots.

use crate::tree::NIL;

/// Links of one list embedded in a slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListLink {
    pub(crate) prev: u32,
    pub(crate) next: u32,
}

impl ListLink {
    pub(crate) const EMPTY: ListLink = ListLink {
        prev: NIL,
        next: NIL,
    };
}

/// Head of one list; `get` selects which embedded [`ListLink`] the list threads through.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
}

impl List {
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    pub(crate) fn push_back<T>(&mut self, s: &mut [T], i: u32, get: fn(&mut T) -> &mut ListLink) {
        *get(&mut s[i as usize]) = ListLink {
            prev: self.tail,
            next: NIL,
        };
        if self.tail == NIL {
            self.head = i;
        } else {
            get(&mut s[self.tail as usize]).next = i;
        }
        self.tail = i;
        self.len += 1;
    }

    pub(crate) fn unlink<T>(&mut self, s: &mut [T], i: u32, get: fn(&mut T) -> &mut ListLink) {
        let ListLink { prev, next } = *get(&mut s[i as usize]);
        if prev == NIL {
            self.head = next;
        } else {
            get(&mut s[prev as usize]).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            get(&mut s[next as usize]).prev = prev;
        }
        *get(&mut s[i as usize]) = ListLink::EMPTY;
        self.len -= 1;
    }
}
