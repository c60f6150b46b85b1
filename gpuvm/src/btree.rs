// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An index-linked B+tree over a caller-provided node pool: the VM's address index.
//!
//! A binary tree over the VA slots costs one cache miss per level when it is searched, and
//! with a million mappings that is twenty-odd levels of nodes scattered over the whole slot
//! array. A B+tree keeps the search keys themselves (the VAs' start addresses) packed in
//! arrays of [`CAP`] per node, so a search reads about `log_CAP(n)` small nodes instead, and
//! never a VA slot.
//!
//! - A *leaf* holds up to [`CAP`] sorted keys, each with the `u32` index of its VA slot, and
//!   the index of the next leaf, so walking the VAs in address order never climbs the tree.
//! - An *inner* node holds up to [`CAP`] children. Entry `i` has the child's node index and,
//!   for `i > 0`, a lower bound of the child's keys (the *separator*): every key of child
//!   `i - 1` is below it, every key of child `i` at or above it. Entry 0's key is not used.
//! - Every node except the root holds at least [`CAP`]` / 2` entries; the root leaf at least
//!   one, the root inner node at least two children. All leaves are at the same depth.
//! - A full node that gets one more entry first passes entries to its left sibling if that
//!   has room, and only splits (into halves) otherwise. Keys inserted in ascending order, the
//!   common way to populate a VM, then leave full nodes behind instead of half-full ones, and
//!   the tree is shorter (log_16 instead of log_8 of n levels).
//!
//! # Where the nodes live
//!
//! The tree owns no memory: its nodes are the elements of a slice the VM hands to every call
//! (the node storage, apart from the VA slots), linked by `u32` indices, with the free ones
//! on a free list. Keeping them apart from the VA slots keeps the index dense: a million VAs
//! use 14 to 20 MB of nodes (full leaves to leaves two-thirds full), of which the inner
//! levels take 1 to 2 MB in one range of the pool, instead of nodes spread over every VA slot.
//!
//! The fill rule above bounds the number of nodes a tree of `m` keys uses ([`nodes_for`]):
//! fewer than `2 * MIN` keys fit in the root leaf alone; otherwise there are at most
//! `m / MIN` leaves, each non-root inner node has at least `MIN` children and the root two,
//! so inner nodes number at most `leaves / (MIN - 1) + 1`, and all nodes together at most
//! `m / (MIN - 1) + 1`. The VM sizes its node storage for as many keys as it has VA slots
//! and grows both together, so the pool can never run dry: an insertion's splits always find
//! free nodes, and no operation needs to reserve any. A range of nodes can be set aside to
//! serve inner nodes first ([`Index::set_inner_range`]); the VM uses the top 1/16 of its
//! initial nodes, so that the upper levels of a large tree sit together in a few pages instead
//! of being spread among the leaves (either pool lends to the other when it runs out).
//!
//! # Finger
//!
//! The tree remembers the leaf of its latest operation (the *hint*) and a range of keys known
//! to belong in it (its keys when it became the hint, widened by keys removed from it since).
//! A lookup, removal or insertion whose key lies in that range skips the descent, which makes
//! the "find, step to the next VA, remove or replace, insert next to it" pattern of a
//! split/merge step cost one descent instead of four; stepping to the next VA also looks in
//! the leaf after the hint, so a walk over k VAs is O(k). Any operation that moves separators
//! (a split, borrow, merge or separator fix) resets the hint to the leaf it ends in.

use crate::tree::NIL;

/// Entries per node: keys per leaf, children per inner node.
pub(crate) const CAP: usize = 16;
const MIN: usize = CAP / 2;
/// Height bound: a non-root node has at least `MIN` entries, and there are fewer than 2^32
/// slots, so the height is at most `1 + log_MIN(2^32)`, under 12.
const MAX_HEIGHT: usize = 24;

/// The most nodes a tree of up to `keys` keys can use at once (see the module docs).
pub(crate) const fn nodes_for(keys: usize) -> usize {
    if keys == 0 {
        0
    } else if keys < 2 * MIN {
        // Two leaves hold at least `2 * MIN` keys: fewer fit in the root leaf alone.
        1
    } else {
        keys.div_ceil(MIN - 1) + 1
    }
}

/// Storage slot for one node of the VM's address index (a B+tree).
///
/// The VM keeps these in their own storage, apart from the VA slots, so that a search
/// reads only this dense array of small nodes: up to 16 start addresses and their `u32` slot
/// or child indices, 200 bytes. A VM with `n` VA slots needs [`Node::needed`]`(n)` of them,
/// about `n / 7` (at most 29 bytes per VA slot; a tree built in address order uses 14 bytes
/// per VA, one churned at random about 20). [`Gpuvm::new`](crate::Gpuvm::new) takes the node storage
/// from the VA storage's [`Storage::new_nodes`](crate::Storage::new_nodes);
/// [`Gpuvm::with_nodes`](crate::Gpuvm::with_nodes) takes it from the caller.
///
/// # Examples
///
/// ```
/// use gpuvm::IndexNode;
///
/// let nodes: [IndexNode; 4] = [IndexNode::new(); 4];
/// assert_eq!(nodes.len(), 4);
/// ```
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Node {
    keys: [u64; CAP],
    vals: [u32; CAP],
    /// Leaf: the next leaf in key order. Free node: the next free node.
    next: u32,
    len: u32,
}

impl Default for Node {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Node {
    pub(crate) const EMPTY: Node = Node {
        keys: [u64::MAX; CAP],
        vals: [NIL; CAP],
        next: NIL,
        len: 0,
    };

    /// An empty node.
    pub const fn new() -> Self {
        Self::EMPTY
    }

    /// The number of nodes the address index of a VM with `vas` VA slots can need: one for up
    /// to 15 VAs, `vas.div_ceil(7) + 1` from 16 on.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::IndexNode;
    ///
    /// assert_eq!(IndexNode::needed(0), 0);
    /// assert_eq!(IndexNode::needed(15), 1);
    /// assert_eq!(IndexNode::needed(1_000_000), 142_859);
    /// ```
    pub const fn needed(vas: usize) -> usize {
        nodes_for(vas)
    }

    #[inline]
    fn len(&self) -> usize {
        (self.len as usize).min(CAP)
    }

    /// Number of the node's keys that are `<= key`.
    ///
    /// A binary search over all [`CAP`] key slots, unrolled and without branches: five loads
    /// and conditional adds, whatever the node's length. It relies on the node invariant that
    /// the slots past `len` hold `u64::MAX` (so they sort after every key; a search for
    /// `u64::MAX` itself is clamped to `len`). A linear scan costs about four times the
    /// instructions where it cannot be vectorised, and the kernel is built without SIMD
    /// (`-mno-sse` on x86, `-mgeneral-regs-only` on arm64).
    ///
    /// In an inner node the first key is not a separator and may hold any value: the search
    /// reads it only once it knows that the second key is above `key`, and then the answer
    /// is child 0 either way (see [`Node::child`]).
    #[inline]
    fn count_le(&self, key: u64) -> usize {
        const _: () = assert!(
            CAP == 16,
            "the unrolled search below is written for 16 keys"
        );
        let k = &self.keys;
        let mut b = 0usize;
        // Each step halves the candidates; `b + w - 1 <= 15` keeps every index in range, and
        // the masks only spare the bounds checks.
        b += 8 * usize::from(k[7] <= key);
        b += 4 * usize::from(k[(b + 3) & (CAP - 1)] <= key);
        b += 2 * usize::from(k[(b + 1) & (CAP - 1)] <= key);
        b += usize::from(k[b & (CAP - 1)] <= key);
        b += usize::from(k[b & (CAP - 1)] <= key);
        b.min(self.len())
    }

    /// The child of an inner node whose key range holds `key`.
    #[inline]
    fn child(&self, key: u64) -> usize {
        // Counting the unused first key as `<= key`: one more than the separators `<= key`.
        self.count_le(key).saturating_sub(1)
    }

    #[inline]
    fn insert_at(&mut self, pos: usize, key: u64, val: u32) {
        let len = self.len();
        let mut i = len.min(CAP - 1);
        while i > pos {
            self.keys[i] = self.keys[i - 1];
            self.vals[i] = self.vals[i - 1];
            i -= 1;
        }
        self.keys[pos] = key;
        self.vals[pos] = val;
        self.len = (len + 1) as u32;
    }

    #[inline]
    fn remove_at(&mut self, pos: usize) {
        let len = self.len();
        let mut i = pos;
        while i + 1 < len {
            self.keys[i] = self.keys[i + 1];
            self.vals[i] = self.vals[i + 1];
            i += 1;
        }
        // The vacated slot sorts after every key again (see `count_le`).
        if let Some(last) = len.checked_sub(1) {
            self.keys[last] = u64::MAX;
            self.vals[last] = NIL;
        }
        self.len = len.saturating_sub(1) as u32;
    }
}

/// A slot that carries one tree node.
pub(crate) trait NodeSlot {
    fn node(&self) -> &Node;
    fn node_mut(&mut self) -> &mut Node;
}

impl NodeSlot for Node {
    #[inline]
    fn node(&self) -> &Node {
        self
    }
    #[inline]
    fn node_mut(&mut self) -> &mut Node {
        self
    }
}

fn nd<T: NodeSlot>(s: &[T], n: u32) -> &Node {
    s[n as usize].node()
}

fn ndm<T: NodeSlot>(s: &mut [T], n: u32) -> &mut Node {
    s[n as usize].node_mut()
}

/// A position in the tree: a leaf and an entry in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    leaf: u32,
    pos: u32,
}

impl Cursor {
    pub(crate) const END: Cursor = Cursor { leaf: NIL, pos: 0 };
}

/// The path of a descent: the inner nodes and the child taken in each.
struct Path {
    node: [u32; MAX_HEIGHT],
    pos: [u8; MAX_HEIGHT],
}

/// The root of one tree and its node pool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Index {
    root: u32,
    /// Levels, leaves included (0: empty).
    height: u32,
    pub(crate) len: u32,
    /// Free nodes, linked through `Node::next`.
    free: u32,
    /// Free nodes of the slots in `inner`, handed to inner nodes first: packing the inner
    /// nodes into one range of slots keeps the upper levels in few pages and cache lines.
    free_inner: u32,
    inner: (u32, u32),
    /// The leaf of the latest operation, or `NIL`; always a live leaf.
    hint: u32,
    /// Keys known to belong in the hint leaf: `[hint_lo, hint_hi]` lies within the leaf's
    /// bounds (the keys it held when it became the hint, and keys removed from it since).
    hint_lo: u64,
    hint_hi: u64,
}

impl Index {
    pub(crate) const EMPTY: Index = Index {
        root: NIL,
        height: 0,
        len: 0,
        free: NIL,
        free_inner: NIL,
        inner: (0, 0),
        hint: NIL,
        hint_lo: 1,
        hint_hi: 0,
    };

    /// Makes `leaf` (or `NIL`) the hint, with its current keys as the known range.
    fn set_hint<T: NodeSlot>(&mut self, s: &[T], leaf: u32) {
        self.hint = leaf;
        let (lo, hi) = if leaf == NIL {
            (1, 0)
        } else {
            let node = nd(s, leaf);
            match node.len() {
                0 => (1, 0),
                l => (node.keys[0], node.keys[l - 1]),
            }
        };
        self.hint_lo = lo;
        self.hint_hi = hi;
    }

    /// Reserves the nodes of slots `[lo, hi)` for inner nodes (when they enter the pool).
    pub(crate) fn set_inner_range(&mut self, lo: u32, hi: u32) {
        self.inner = (lo, hi);
    }

    /// Puts slot `n`'s node into the pool. The node must not be in use.
    pub(crate) fn add_node<T: NodeSlot>(&mut self, s: &mut [T], n: u32) {
        let list = if self.inner.0 <= n && n < self.inner.1 {
            &mut self.free_inner
        } else {
            &mut self.free
        };
        *ndm(s, n) = Node {
            next: *list,
            ..Node::EMPTY
        };
        *list = n;
    }

    /// Takes a node from the pool; the module docs show why it never runs dry.
    fn alloc_node<T: NodeSlot>(&mut self, s: &mut [T], inner: bool) -> u32 {
        let list = if (inner && self.free_inner != NIL) || self.free == NIL {
            &mut self.free_inner
        } else {
            &mut self.free
        };
        let n = *list;
        *list = nd(s, n).next;
        *ndm(s, n) = Node::EMPTY;
        n
    }

    fn free_node<T: NodeSlot>(&mut self, s: &mut [T], n: u32) {
        if self.hint == n {
            self.set_hint(s, NIL);
        }
        self.add_node(s, n);
    }

    /// The hint leaf and the number of its keys `<= key`, if `key` belongs in the hint leaf.
    #[inline]
    fn in_hint<T: NodeSlot>(&self, s: &[T], key: u64) -> Option<(u32, usize)> {
        if self.hint == NIL || key < self.hint_lo || key > self.hint_hi {
            return None;
        }
        Some((self.hint, nd(s, self.hint).count_le(key)))
    }

    /// Descends to the leaf whose key range holds `key`, recording the path.
    fn descend<T: NodeSlot>(&self, s: &[T], key: u64, path: &mut Path) -> u32 {
        let mut n = self.root;
        for d in 0..(self.height as usize).saturating_sub(1) {
            let node = nd(s, n);
            let c = node.child(key);
            path.node[d] = n;
            path.pos[d] = c as u8;
            n = node.vals[c];
        }
        n
    }

    /// The leaf and entry holding exactly `key`.
    fn locate<T: NodeSlot>(&self, s: &[T], key: u64) -> Option<(u32, usize)> {
        let (leaf, le) = match self.in_hint(s, key) {
            Some(found) => found,
            None => {
                if self.root == NIL {
                    return None;
                }
                let mut n = self.root;
                for _ in 1..self.height {
                    let node = nd(s, n);
                    n = node.vals[node.child(key)];
                }
                (n, nd(s, n).count_le(key))
            }
        };
        (le > 0 && nd(s, leaf).keys[le - 1] == key).then(|| (leaf, le - 1))
    }

    /// The position of exactly `key` in leaf `leaf` (or `NIL`), if it is there.
    fn locate_in<T: NodeSlot>(&self, s: &[T], leaf: u32, key: u64) -> Option<(u32, usize)> {
        if leaf == NIL {
            return None;
        }
        let le = nd(s, leaf).count_le(key);
        (le > 0 && nd(s, leaf).keys[le - 1] == key).then(|| (leaf, le - 1))
    }

    /// The slot with exactly this key, or `NIL`.
    pub(crate) fn find<T: NodeSlot>(&self, s: &[T], key: u64) -> u32 {
        match self.locate(s, key) {
            Some((leaf, pos)) => nd(s, leaf).vals[pos],
            None => NIL,
        }
    }

    /// A cursor at the first entry.
    pub(crate) fn first<T: NodeSlot>(&self, s: &[T]) -> Cursor {
        if self.root == NIL {
            return Cursor::END;
        }
        let mut n = self.root;
        for _ in 1..self.height {
            n = nd(s, n).vals[0];
        }
        Cursor { leaf: n, pos: 0 }
    }

    /// The slot at `c`, or `NIL` at the end.
    pub(crate) fn get<T: NodeSlot>(&self, s: &[T], c: Cursor) -> u32 {
        if c.leaf == NIL {
            NIL
        } else {
            nd(s, c.leaf).vals[(c.pos as usize).min(CAP - 1)]
        }
    }

    /// The slot and key at `c`, or `(NIL, 0)` at the end.
    fn entry<T: NodeSlot>(&self, s: &[T], c: Cursor) -> (u32, u64) {
        if c.leaf == NIL {
            (NIL, 0)
        } else {
            let node = nd(s, c.leaf);
            let pos = (c.pos as usize).min(CAP - 1);
            (node.vals[pos], node.keys[pos])
        }
    }

    /// The cursor after `c`.
    pub(crate) fn advance<T: NodeSlot>(&self, s: &[T], c: Cursor) -> Cursor {
        if c.leaf == NIL {
            return c;
        }
        let node = nd(s, c.leaf);
        if (c.pos as usize) + 1 < node.len() {
            Cursor {
                leaf: c.leaf,
                pos: c.pos + 1,
            }
        } else if node.next != NIL {
            Cursor {
                leaf: node.next,
                pos: 0,
            }
        } else {
            Cursor::END
        }
    }

    /// The slot and key of the entry following the one with key `key` (which must be in the
    /// tree), or `(NIL, 0)`. Remembers the leaf for the next operation.
    pub(crate) fn next<T: NodeSlot>(&mut self, s: &[T], key: u64) -> (u32, u64) {
        // A walk in address order leaves the hint leaf for the one after it: look there before
        // descending, so that walking k VAs stays O(k).
        let mut found = self.locate_in(s, self.hint, key);
        if found.is_none() && self.hint != NIL {
            found = self.locate_in(s, nd(s, self.hint).next, key);
        }
        match found.or_else(|| self.locate(s, key)) {
            Some((leaf, pos)) => {
                if leaf != self.hint {
                    self.set_hint(s, leaf);
                }
                self.entry(
                    s,
                    self.advance(
                        s,
                        Cursor {
                            leaf,
                            pos: pos as u32,
                        },
                    ),
                )
            }
            None => (NIL, 0),
        }
    }

    /// A cursor at the first entry whose slot ends after `addr`, given that slots do not
    /// overlap (`end` gives a slot's end; keys are start addresses).
    pub(crate) fn seek<T: NodeSlot>(&self, s: &[T], addr: u64, end: impl Fn(u32) -> u64) -> Cursor {
        if self.root == NIL {
            return Cursor::END;
        }
        // The entry with the greatest key <= addr, if any, and the first one after it.
        let (leaf, le, mut pred) = match self.in_hint(s, addr) {
            // A key of the hint leaf is <= addr: the predecessor is in it.
            Some((h, le)) if le > 0 => (h, le, Cursor::END),
            _ => {
                let mut n = self.root;
                // The subtree just left of the path, and its depth.
                let mut left = (NIL, 0);
                for d in 1..self.height {
                    let node = nd(s, n);
                    let c = node.child(addr);
                    if c > 0 {
                        left = (node.vals[c - 1], d);
                    }
                    n = node.vals[c];
                }
                let le = nd(s, n).count_le(addr);
                let mut pred = Cursor::END;
                if le == 0 && left.0 != NIL {
                    // Every key here is above addr: the predecessor ends the subtree on
                    // the left.
                    let mut m = left.0;
                    for _ in left.1..self.height - 1 {
                        let node = nd(s, m);
                        m = node.vals[node.len().saturating_sub(1)];
                    }
                    pred = Cursor {
                        leaf: m,
                        pos: nd(s, m).len().saturating_sub(1) as u32,
                    };
                }
                (n, le, pred)
            }
        };
        if le > 0 {
            pred = Cursor {
                leaf,
                pos: (le - 1) as u32,
            };
        }
        if pred.leaf != NIL && end(self.get(s, pred)) > addr {
            return pred;
        }
        if le < nd(s, leaf).len() {
            Cursor {
                leaf,
                pos: le as u32,
            }
        } else if nd(s, leaf).next != NIL {
            Cursor {
                leaf: nd(s, leaf).next,
                pos: 0,
            }
        } else {
            Cursor::END
        }
    }

    /// [`Index::seek`] that remembers the leaf for the next operation; returns the slot and
    /// key there and those of the entry after it (each `(NIL, 0)` past the end), so that a
    /// walk over overlapping entries does not have to find its second one again.
    pub(crate) fn seek_mut<T: NodeSlot>(
        &mut self,
        s: &[T],
        addr: u64,
        end: impl Fn(u32) -> u64,
    ) -> [(u32, u64); 2] {
        let c = self.seek(s, addr, end);
        if c.leaf != NIL && c.leaf != self.hint {
            self.set_hint(s, c.leaf);
        }
        [self.entry(s, c), self.entry(s, self.advance(s, c))]
    }

    /// Inserts `key` (not in the tree yet) for slot `val`.
    pub(crate) fn insert<T: NodeSlot>(&mut self, s: &mut [T], key: u64, val: u32) {
        self.len += 1;
        if self.root == NIL {
            let n = self.alloc_node(s, false);
            ndm(s, n).insert_at(0, key, val);
            self.root = n;
            self.height = 1;
            self.set_hint(s, n);
            return;
        }
        if let Some((h, le)) = self.in_hint(s, key) {
            let node = ndm(s, h);
            if node.len() < CAP {
                node.insert_at(le, key, val);
                return;
            }
        }
        let mut path = Path {
            node: [NIL; MAX_HEIGHT],
            pos: [0; MAX_HEIGHT],
        };
        let leaf = self.descend(s, key, &mut path);
        let le = nd(s, leaf).count_le(key);
        if nd(s, leaf).len() < CAP {
            ndm(s, leaf).insert_at(le, key, val);
            self.set_hint(s, leaf);
            return;
        }
        let depth = self.height as usize - 1;
        if let Some(l) = self.shift_left(s, &path, depth, leaf, le, key, val) {
            let hint = if l {
                nd(s, path.node[depth - 1]).vals[path.pos[depth - 1] as usize - 1]
            } else {
                leaf
            };
            self.set_hint(s, hint);
            return;
        }
        let (mut sep, mut right) = self.split_insert(s, leaf, le, key, val, true);
        let hint = if le >= CAP / 2 { right } else { leaf };
        self.set_hint(s, hint);
        for d in (0..depth).rev() {
            let p = path.node[d];
            let pos = path.pos[d] as usize + 1;
            if nd(s, p).len() < CAP {
                ndm(s, p).insert_at(pos, sep, right);
                return;
            }
            if self.shift_left(s, &path, d, p, pos, sep, right).is_some() {
                return;
            }
            (sep, right) = self.split_insert(s, p, pos, sep, right, false);
        }
        // The root split: grow a level.
        let r = self.alloc_node(s, true);
        let node = ndm(s, r);
        node.keys[1] = sep;
        node.vals[0] = self.root;
        node.vals[1] = right;
        node.len = 2;
        self.root = r;
        self.height += 1;
    }

    /// Inserts into the full node `n` at depth `depth` (at `pos`) by moving its first entries
    /// to its left sibling, if that has room: this keeps nodes full when keys arrive in
    /// ascending order. Returns `None` if it could not, else whether the new entry went left.
    #[allow(clippy::too_many_arguments)]
    fn shift_left<T: NodeSlot>(
        &mut self,
        s: &mut [T],
        path: &Path,
        depth: usize,
        n: u32,
        pos: usize,
        key: u64,
        val: u32,
    ) -> Option<bool> {
        if depth == 0 {
            return None;
        }
        let leaf = depth + 1 == self.height as usize;
        let (p, c) = (path.node[depth - 1], path.pos[depth - 1] as usize);
        if c == 0 {
            return None;
        }
        let l = nd(s, p).vals[c - 1];
        let llen = nd(s, l).len();
        if llen >= CAP - 1 {
            return None;
        }
        // Share the CAP + 1 entries with the left sibling.
        let moved = (CAP + 1 - llen) / 2;
        let mut node = *nd(s, n);
        let mut left = *nd(s, l);
        if !leaf {
            // The first child's lower bound is the parent's separator.
            node.keys[0] = nd(s, p).keys[c];
        }
        let mut keys = [0u64; CAP + 1];
        let mut vals = [NIL; CAP + 1];
        keys[..pos].copy_from_slice(&node.keys[..pos]);
        vals[..pos].copy_from_slice(&node.vals[..pos]);
        keys[pos] = key;
        vals[pos] = val;
        keys[pos + 1..].copy_from_slice(&node.keys[pos..]);
        vals[pos + 1..].copy_from_slice(&node.vals[pos..]);
        left.keys[llen..llen + moved].copy_from_slice(&keys[..moved]);
        left.vals[llen..llen + moved].copy_from_slice(&vals[..moved]);
        left.len = (llen + moved) as u32;
        node.keys = [u64::MAX; CAP];
        node.vals = [NIL; CAP];
        node.keys[..CAP + 1 - moved].copy_from_slice(&keys[moved..]);
        node.vals[..CAP + 1 - moved].copy_from_slice(&vals[moved..]);
        node.len = (CAP + 1 - moved) as u32;
        ndm(s, p).keys[c] = keys[moved];
        *ndm(s, l) = left;
        *ndm(s, n) = node;
        Some(pos < moved)
    }

    /// Inserts an entry into the full node `n` by splitting it; returns the new right node and
    /// its lower bound.
    fn split_insert<T: NodeSlot>(
        &mut self,
        s: &mut [T],
        n: u32,
        pos: usize,
        key: u64,
        val: u32,
        leaf: bool,
    ) -> (u64, u32) {
        let old = *nd(s, n);
        let mut keys = [0u64; CAP + 1];
        let mut vals = [NIL; CAP + 1];
        keys[..pos].copy_from_slice(&old.keys[..pos]);
        vals[..pos].copy_from_slice(&old.vals[..pos]);
        keys[pos] = key;
        vals[pos] = val;
        keys[pos + 1..].copy_from_slice(&old.keys[pos..]);
        vals[pos + 1..].copy_from_slice(&old.vals[pos..]);
        let half = CAP / 2;
        let r = self.alloc_node(s, !leaf);
        let mut left = Node {
            next: old.next,
            len: half as u32,
            ..Node::EMPTY
        };
        left.keys[..half].copy_from_slice(&keys[..half]);
        left.vals[..half].copy_from_slice(&vals[..half]);
        let mut right = Node {
            next: old.next,
            len: (CAP + 1 - half) as u32,
            ..Node::EMPTY
        };
        right.keys[..CAP + 1 - half].copy_from_slice(&keys[half..]);
        right.vals[..CAP + 1 - half].copy_from_slice(&vals[half..]);
        if leaf {
            left.next = r;
        } else {
            left.next = NIL;
            right.next = NIL;
        }
        *ndm(s, n) = left;
        *ndm(s, r) = right;
        (keys[half], r)
    }

    /// Removes `key`, which must be in the tree.
    pub(crate) fn remove<T: NodeSlot>(&mut self, s: &mut [T], key: u64) {
        if let Some((h, le)) = self.in_hint(s, key) {
            let node = ndm(s, h);
            if le > 0 && node.keys[le - 1] == key && (node.len() > MIN || self.height == 1) {
                // The known range keeps `key`: it still belongs here.
                node.remove_at(le - 1);
                self.len -= 1;
                if node.len == 0 {
                    self.free_node(s, h);
                    self.root = NIL;
                    self.height = 0;
                }
                return;
            }
        }
        if self.root == NIL {
            return;
        }
        let mut path = Path {
            node: [NIL; MAX_HEIGHT],
            pos: [0; MAX_HEIGHT],
        };
        let leaf = self.descend(s, key, &mut path);
        let le = nd(s, leaf).count_le(key);
        if le == 0 || nd(s, leaf).keys[le - 1] != key {
            return;
        }
        ndm(s, leaf).remove_at(le - 1);
        self.len -= 1;
        self.hint = leaf;
        let mut d = self.height as usize - 1;
        let mut n = leaf;
        while d > 0 && nd(s, n).len() < MIN {
            let p = path.node[d - 1];
            let c = path.pos[d - 1] as usize;
            if !self.fix_underflow(s, p, c, d + 1 == self.height as usize) {
                break;
            }
            n = p;
            d -= 1;
        }
        let root = *nd(s, self.root);
        if self.height > 1 && root.len == 1 {
            let old = self.root;
            self.root = root.vals[0];
            self.height -= 1;
            self.free_node(s, old);
        } else if self.height == 1 && root.len == 0 {
            let old = self.root;
            self.free_node(s, old);
            self.root = NIL;
            self.height = 0;
        }
        // Separators may have moved: recompute the known range.
        let hint = self.hint;
        self.set_hint(s, hint);
    }

    /// Child `c` of `p` has too few entries: borrows one from a sibling, or merges it with
    /// one. Returns whether `p` lost an entry (a merge).
    fn fix_underflow<T: NodeSlot>(&mut self, s: &mut [T], p: u32, c: usize, leaf: bool) -> bool {
        let par = *nd(s, p);
        if c > 0 {
            let l = par.vals[c - 1];
            if nd(s, l).len() > MIN {
                self.borrow_left(s, p, c, leaf);
                return false;
            }
        }
        if c + 1 < par.len() {
            let r = par.vals[c + 1];
            if nd(s, r).len() > MIN {
                self.borrow_right(s, p, c, leaf);
                return false;
            }
        }
        if c > 0 {
            self.merge(s, p, c - 1, leaf);
        } else if c + 1 < par.len() {
            self.merge(s, p, c, leaf);
        } else {
            return false;
        }
        true
    }

    fn borrow_left<T: NodeSlot>(&mut self, s: &mut [T], p: u32, c: usize, leaf: bool) {
        let mut par = *nd(s, p);
        let (l, n) = (par.vals[c - 1], par.vals[c]);
        let mut left = *nd(s, l);
        let mut node = *nd(s, n);
        let last = left.len() - 1;
        let (k, v) = (left.keys[last], left.vals[last]);
        left.remove_at(last);
        if leaf {
            node.insert_at(0, k, v);
        } else {
            // The old first child's lower bound is the parent's separator.
            node.keys[0] = par.keys[c];
            node.insert_at(0, k, v);
        }
        par.keys[c] = k;
        *ndm(s, p) = par;
        *ndm(s, l) = left;
        *ndm(s, n) = node;
    }

    fn borrow_right<T: NodeSlot>(&mut self, s: &mut [T], p: u32, c: usize, leaf: bool) {
        let mut par = *nd(s, p);
        let (n, r) = (par.vals[c], par.vals[c + 1]);
        let mut node = *nd(s, n);
        let mut right = *nd(s, r);
        let (k, v) = (right.keys[0], right.vals[0]);
        let len = node.len();
        node.insert_at(len, if leaf { k } else { par.keys[c + 1] }, v);
        right.remove_at(0);
        par.keys[c + 1] = right.keys[0];
        *ndm(s, p) = par;
        *ndm(s, n) = node;
        *ndm(s, r) = right;
    }

    /// Merges child `i + 1` of `p` into child `i`.
    fn merge<T: NodeSlot>(&mut self, s: &mut [T], p: u32, i: usize, leaf: bool) {
        let mut par = *nd(s, p);
        let (l, r) = (par.vals[i], par.vals[i + 1]);
        let mut left = *nd(s, l);
        let right = *nd(s, r);
        let base = left.len();
        for j in 0..right.len() {
            let k = if j == 0 && !leaf {
                par.keys[i + 1]
            } else {
                right.keys[j]
            };
            left.insert_at(base + j, k, right.vals[j]);
        }
        if leaf {
            left.next = right.next;
        }
        par.remove_at(i + 1);
        *ndm(s, p) = par;
        *ndm(s, l) = left;
        let hinted = self.hint == r;
        self.free_node(s, r);
        if hinted || (leaf && self.hint == NIL) {
            self.set_hint(s, l);
        }
    }

    /// Gives the entry with key `old` the key `new` and slot `val`. The caller guarantees that
    /// `new` lies strictly between the keys of `old`'s neighbours.
    pub(crate) fn replace<T: NodeSlot>(&mut self, s: &mut [T], old: u64, new: u64, val: u32) {
        if let Some((h, le)) = self.in_hint(s, old) {
            let node = ndm(s, h);
            if le > 0 && node.keys[le - 1] == old && (new == old || (le > 1 && le < node.len())) {
                node.keys[le - 1] = new;
                node.vals[le - 1] = val;
                return;
            }
        }
        if self.root == NIL {
            return;
        }
        let mut path = Path {
            node: [NIL; MAX_HEIGHT],
            pos: [0; MAX_HEIGHT],
        };
        let leaf = self.descend(s, old, &mut path);
        let le = nd(s, leaf).count_le(old);
        if le == 0 || nd(s, leaf).keys[le - 1] != old {
            return;
        }
        let pos = le - 1;
        let len = nd(s, leaf).len();
        ndm(s, leaf).keys[pos] = new;
        ndm(s, leaf).vals[pos] = val;
        let inner = self.height as usize - 1;
        if new > old && pos + 1 == len {
            // The leaf's upper bound is the separator right of the path at the lowest level
            // that has one; it must stay above `new` (and at most the next key, > `new`).
            if let Some(d) = (0..inner)
                .rev()
                .find(|&d| (path.pos[d] as usize) + 1 < nd(s, path.node[d]).len())
            {
                let at = path.pos[d] as usize + 1;
                let sep = &mut ndm(s, path.node[d]).keys[at];
                if *sep <= new {
                    *sep = new.saturating_add(1);
                }
            }
        } else if new < old && pos == 0 {
            // Likewise the lower bound must not exceed `new`.
            if let Some(d) = (0..inner).rev().find(|&d| path.pos[d] > 0) {
                let at = path.pos[d] as usize;
                let sep = &mut ndm(s, path.node[d]).keys[at];
                if *sep > new {
                    *sep = new;
                }
            }
        }
        self.set_hint(s, leaf);
    }

    /// The number of nodes in the pool (tests only).
    #[cfg(test)]
    pub(crate) fn free_nodes<T: NodeSlot>(&self, s: &[T]) -> usize {
        let mut free = 0;
        for head in [self.free, self.free_inner] {
            let mut f = head;
            while f != NIL {
                free += 1;
                f = nd(s, f).next;
            }
        }
        free
    }

    /// Checks every invariant (tests only); `key_of` gives a slot's own idea of its key.
    /// Returns the number of entries.
    #[cfg(test)]
    pub(crate) fn check<T: NodeSlot>(&self, s: &[T], key_of: impl Fn(u32) -> u64) -> u32 {
        use std::vec::Vec;
        let mut leaves = Vec::new();
        let mut in_use = 0usize;
        #[allow(clippy::too_many_arguments)]
        fn walk<T: NodeSlot>(
            s: &[T],
            n: u32,
            depth: u32,
            height: u32,
            lo: Option<u64>,
            hi: Option<u64>,
            leaves: &mut Vec<u32>,
            in_use: &mut usize,
            key_of: &dyn Fn(u32) -> u64,
            hint: (u32, u64, u64),
        ) {
            *in_use += 1;
            let node = nd(s, n);
            let len = node.len as usize;
            assert!(len <= CAP);
            assert!(
                node.keys[len..].iter().all(|&k| k == u64::MAX),
                "a key slot past the length is not u64::MAX"
            );
            if depth > 0 {
                assert!(len >= MIN, "underfull node");
            }
            let leaf = depth + 1 == height;
            if leaf {
                assert!(len >= 1);
                for i in 0..len {
                    let k = node.keys[i];
                    assert!(lo.is_none_or(|lo| k >= lo));
                    assert!(hi.is_none_or(|hi| k < hi));
                    if i > 0 {
                        assert!(node.keys[i - 1] < k, "unsorted leaf");
                    }
                    assert_eq!(key_of(node.vals[i]), k, "stale key");
                }
                if n == hint.0 && hint.1 <= hint.2 {
                    // The known key range of the hint lies within the leaf's bounds.
                    assert!(lo.is_none_or(|lo| hint.1 >= lo), "stale hint range");
                    assert!(hi.is_none_or(|hi| hint.2 < hi), "stale hint range");
                }
                leaves.push(n);
            } else {
                assert!(len >= 2);
                for i in 0..len {
                    let clo = if i == 0 { lo } else { Some(node.keys[i]) };
                    let chi = if i + 1 < len {
                        Some(node.keys[i + 1])
                    } else {
                        hi
                    };
                    if i > 0 {
                        assert!(lo.is_none_or(|lo| node.keys[i] > lo));
                        assert!(hi.is_none_or(|hi| node.keys[i] < hi));
                    }
                    if i + 1 < len {
                        assert!(node.keys[i] < node.keys[i + 1] || i == 0);
                    }
                    walk(
                        s,
                        node.vals[i],
                        depth + 1,
                        height,
                        clo,
                        chi,
                        leaves,
                        in_use,
                        key_of,
                        hint,
                    );
                }
            }
        }
        if self.root == NIL {
            assert_eq!(self.height, 0);
            assert_eq!(self.len, 0);
        } else {
            walk(
                s,
                self.root,
                0,
                self.height,
                None,
                None,
                &mut leaves,
                &mut in_use,
                &key_of,
                (self.hint, self.hint_lo, self.hint_hi),
            );
        }
        // The leaf chain visits the leaves in order.
        for w in leaves.windows(2) {
            assert_eq!(nd(s, w[0]).next, w[1]);
        }
        if let Some(&last) = leaves.last() {
            assert_eq!(nd(s, last).next, NIL);
        }
        let count: usize = leaves.iter().map(|&l| nd(s, l).len as usize).sum();
        assert_eq!(count, self.len as usize);
        assert!(
            self.hint == NIL || leaves.contains(&self.hint),
            "stale hint"
        );
        // Every node is in the tree or in the pool.
        let free = self.free_nodes(s);
        assert_eq!(free + in_use, s.len(), "node leaked");
        assert!(
            in_use <= nodes_for(self.len as usize),
            "more nodes than the bound"
        );
        count as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    /// A slot: its key (start) and its length.
    struct S {
        key: u64,
        len: u64,
    }

    const KEYS: u64 = if cfg!(miri) { 48 } else { 600 };
    const OPS: usize = if cfg!(miri) { 120 } else { 1500 };

    #[derive(Clone, Debug)]
    enum TOp {
        Insert(u64),
        Remove(u64),
        /// Move the entry of a slot to a free slot, with a key anywhere between its neighbours.
        Replace(u64, u64),
        /// Query around a key.
        Probe(u64),
    }

    fn op() -> impl Strategy<Value = TOp> {
        prop_oneof![
            4 => (0..KEYS).prop_map(TOp::Insert),
            3 => (0..KEYS).prop_map(TOp::Remove),
            2 => (0..KEYS, any::<u64>()).prop_map(|(k, r)| TOp::Replace(k, r)),
            1 => (0..KEYS).prop_map(TOp::Probe),
        ]
    }

    /// Slot `k` is inserted with key `8 * k + 10` (replacing moves keys in between); every
    /// slot covers one unit, so a probe can fall in a gap or on a key.
    fn key(k: u64) -> u64 {
        8 * k + 10
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            // Miri isolates the test from the file system: no failure persistence there.
            failure_persistence: if cfg!(miri) {
                None
            } else {
                ProptestConfig::default().failure_persistence
            },
            ..ProptestConfig::with_cases(if cfg!(miri) { 3 } else { 64 })
        })]
        #[test]
        fn index_matches_btreemap(ops in proptest::collection::vec(op(), 0..OPS)) {
            let mut slots: Vec<S> = (0..KEYS)
                .map(|k| S { key: key(k), len: 1 })
                .collect();
            let nn = nodes_for(KEYS as usize);
            let mut nodes = std::vec![Node::EMPTY; nn];
            let mut t = Index::EMPTY;
            // The top eighth of the nodes serve inner nodes first.
            t.set_inner_range((nn - nn / 8) as u32, nn as u32);
            for i in (0..nn as u32).rev() {
                t.add_node(&mut nodes, i);
            }
            // Model: key -> slot.
            let mut model: BTreeMap<u64, u32> = BTreeMap::new();
            for o in ops {
                match o {
                    TOp::Insert(k) => {
                        let i = k as u32;
                        if !model.values().any(|&v| v == i) && !model.contains_key(&key(k)) {
                            slots[i as usize].key = key(k);
                            t.insert(&mut nodes, key(k), i);
                            model.insert(key(k), i);
                        }
                    }
                    TOp::Remove(k) => {
                        let i = k as u32;
                        let cur = slots[i as usize].key;
                        if model.get(&cur) == Some(&i) {
                            t.remove(&mut nodes, cur);
                            model.remove(&cur);
                        }
                    }
                    TOp::Replace(k, r) => {
                        // Move slot k's entry to a free slot, with a key strictly between the
                        // neighbours' (as the VM guarantees).
                        let i = k as u32;
                        let cur = slots[i as usize].key;
                        let pred = model
                            .range(..cur)
                            .next_back()
                            .map_or(cur.saturating_sub(4), |(&p, _)| p);
                        let succ = model.range(cur + 1..).next().map_or(cur + 4, |(&n, _)| n);
                        let new = pred + 1 + r % (succ - pred - 1).max(1);
                        let free = (0..KEYS as u32)
                            .find(|&j| !model.values().any(|&v| v == j));
                        if let (Some(&v), Some(j)) = (model.get(&cur), free) {
                            if v == i {
                                slots[j as usize].key = new;
                                t.replace(&mut nodes, cur, new, j);
                                model.remove(&cur);
                                model.insert(new, j);
                            }
                        }
                    }
                    TOp::Probe(k) => {
                        for addr in [key(k) - 1, key(k), key(k) + 1] {
                            let c = t.seek(&nodes, addr, |i| slots[i as usize].key + slots[i as usize].len);
                            let mut from = model
                                .iter()
                                .skip_while(|(&kk, &v)| kk + slots[v as usize].len <= addr)
                                .map(|(&kk, &v)| (v, kk));
                            let want = from.next();
                            let want_after = from.next().unwrap_or((NIL, 0));
                            prop_assert_eq!(
                                (t.get(&nodes, c) != NIL).then(|| t.get(&nodes, c)),
                                want.map(|(v, _)| v)
                            );
                            let mut tm = t;
                            let got = tm.seek_mut(&nodes, addr, |i| slots[i as usize].key + slots[i as usize].len);
                            prop_assert_eq!((got[0].0 != NIL).then_some(got[0]), want);
                            if want.is_some() {
                                prop_assert_eq!(got[1], want_after);
                            }
                            prop_assert_eq!(
                                t.find(&nodes, addr),
                                model.get(&addr).copied().unwrap_or(NIL)
                            );
                            if let Some(&v) = model.get(&addr) {
                                let want_next = model
                                    .range(addr + 1..)
                                    .next()
                                    .map_or((NIL, 0), |(&kk, &v)| (v, kk));
                                let _ = v;
                                prop_assert_eq!(t.next(&nodes, addr), want_next);
                            }
                        }
                    }
                }
                t.check(&nodes, |i| slots[i as usize].key);
                let mut got = Vec::new();
                let mut c = t.first(&nodes);
                while c != Cursor::END {
                    let v = t.get(&nodes, c);
                    got.push((slots[v as usize].key, v));
                    c = t.advance(&nodes, c);
                }
                prop_assert_eq!(got, model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
            }
        }
    }

    /// Sequential and reverse fills and drains go through every split, borrow and merge path.
    #[test]
    fn fill_and_drain_in_every_order() {
        let n: u64 = if cfg!(miri) { 70 } else { 700 };
        for pattern in 0..4u64 {
            let slots: Vec<S> = (0..n).map(|k| S { key: k, len: 1 }).collect();
            let nn = nodes_for(n as usize);
            let mut nodes = std::vec![Node::EMPTY; nn];
            let mut t = Index::EMPTY;
            if pattern % 2 == 1 {
                t.set_inner_range(0, (nn / 16) as u32);
            }
            for i in 0..nn as u32 {
                t.add_node(&mut nodes, i);
            }
            let order = |i: u64| match pattern {
                0 => i,
                1 => n - 1 - i,
                2 => (i * 37) % n,
                _ => {
                    if i & 1 == 0 {
                        i / 2
                    } else {
                        n - 1 - i / 2
                    }
                }
            };
            for i in 0..n {
                let k = order(i);
                t.insert(&mut nodes, k, k as u32);
            }
            t.check(&nodes, |i| slots[i as usize].key);
            assert_eq!(u64::from(t.len), n);
            for i in 0..n {
                let k = order((i * 11 + pattern) % n);
                t.remove(&mut nodes, k);
                if i % 16 == 0 {
                    t.check(&nodes, |i| slots[i as usize].key);
                }
            }
            t.check(&nodes, |i| slots[i as usize].key);
            assert_eq!(t.len, 0);
        }
    }

    /// The unrolled search against a linear count, for every length, keys at both ends of
    /// the range, and every probe between and around them; and `child` with any first key.
    #[test]
    fn count_le_matches_a_linear_count() {
        for len in 0..=CAP {
            for top in [16u64, u64::MAX] {
                let mut node = Node::EMPTY;
                for i in 0..len {
                    // Keys 1, 3, 5, ... and, with `top`, the last one at the top of the range.
                    let k = if top == u64::MAX && i + 1 == len {
                        top
                    } else {
                        2 * i as u64 + 1
                    };
                    node.insert_at(i, k, i as u32);
                }
                let mut probes: Vec<u64> = (0..=2 * CAP as u64 + 1).collect();
                probes.extend([u64::MAX - 1, u64::MAX]);
                for key in probes {
                    let linear = node.keys[..len].iter().filter(|&&k| k <= key).count();
                    assert_eq!(node.count_le(key), linear, "len {len}, key {key}");
                    if len >= 2 {
                        for first in [0, 7, u64::MAX] {
                            let mut inner = node;
                            inner.keys[0] = first;
                            let seps = node.keys[1..len].iter().filter(|&&k| k <= key).count();
                            assert_eq!(
                                inner.child(key),
                                seps,
                                "len {len}, key {key}, first {first}"
                            );
                        }
                    }
                }
            }
        }
    }
}
