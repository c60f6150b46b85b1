// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An index-linked AVL tree over caller-provided slots: the VM-BOs, ordered by object id.
//!
//! (The VAs, far more numerous and searched on every request, sit in the B+tree of
//! [`btree`](crate::btree) instead.)
//!
//! The tree owns no memory: every node is a slot of a slice owned by someone else, and the links
//! between nodes are `u32` slot indices. Nodes never move, so an index stays valid for as long as
//! the node is in the tree, even while other nodes are inserted or removed.
//!
//! Every operation is O(log n); walking to a neighbour is O(1) amortised.

/// The "no node" index.
pub(crate) const NIL: u32 = u32::MAX;

/// Tree links embedded in each slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub(crate) left: u32,
    pub(crate) right: u32,
    pub(crate) parent: u32,
    pub(crate) height: u32,
}

impl Link {
    pub(crate) const EMPTY: Link = Link {
        left: NIL,
        right: NIL,
        parent: NIL,
        height: 0,
    };
}

/// A slot that can be a tree node.
pub(crate) trait Node {
    /// The ordering key. Keys of nodes in one tree are distinct.
    fn key(&self) -> u64;
    fn link(&self) -> &Link;
    fn link_mut(&mut self) -> &mut Link;
}

/// The root of one tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tree {
    pub(crate) root: u32,
    pub(crate) len: u32,
}

fn l<T: Node>(s: &[T], i: u32) -> &Link {
    s[i as usize].link()
}

fn lm<T: Node>(s: &mut [T], i: u32) -> &mut Link {
    s[i as usize].link_mut()
}

fn height<T: Node>(s: &[T], i: u32) -> u32 {
    if i == NIL {
        0
    } else {
        l(s, i).height
    }
}

fn update_height<T: Node>(s: &mut [T], i: u32) {
    let h = 1 + height(s, l(s, i).left).max(height(s, l(s, i).right));
    lm(s, i).height = h;
}

impl Tree {
    pub(crate) const EMPTY: Tree = Tree { root: NIL, len: 0 };

    /// Makes `new` take the place of `old` under `old`'s parent (or as the root).
    fn replace_child<T: Node>(&mut self, s: &mut [T], parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if l(s, parent).left == old {
            lm(s, parent).left = new;
        } else {
            lm(s, parent).right = new;
        }
        if new != NIL {
            lm(s, new).parent = parent;
        }
    }

    fn rotate_left<T: Node>(&mut self, s: &mut [T], x: u32) -> u32 {
        let y = l(s, x).right;
        let yl = l(s, y).left;
        lm(s, x).right = yl;
        if yl != NIL {
            lm(s, yl).parent = x;
        }
        let p = l(s, x).parent;
        self.replace_child(s, p, x, y);
        lm(s, y).left = x;
        lm(s, x).parent = y;
        update_height(s, x);
        update_height(s, y);
        y
    }

    fn rotate_right<T: Node>(&mut self, s: &mut [T], x: u32) -> u32 {
        let y = l(s, x).left;
        let yr = l(s, y).right;
        lm(s, x).left = yr;
        if yr != NIL {
            lm(s, yr).parent = x;
        }
        let p = l(s, x).parent;
        self.replace_child(s, p, x, y);
        lm(s, y).right = x;
        lm(s, x).parent = y;
        update_height(s, x);
        update_height(s, y);
        y
    }

    /// Restores heights and balance from `n` upwards. Stops at the first subtree whose height
    /// did not change: nothing above it depends on what happened below.
    fn fix_up<T: Node>(&mut self, s: &mut [T], mut n: u32) {
        while n != NIL {
            let old = l(s, n).height;
            update_height(s, n);
            let left = l(s, n).left;
            let right = l(s, n).right;
            let (hl, hr) = (height(s, left), height(s, right));
            if hl > hr + 1 {
                if height(s, l(s, left).left) < height(s, l(s, left).right) {
                    self.rotate_left(s, left);
                }
                n = self.rotate_right(s, n);
            } else if hr > hl + 1 {
                if height(s, l(s, right).right) < height(s, l(s, right).left) {
                    self.rotate_right(s, right);
                }
                n = self.rotate_left(s, n);
            }
            if l(s, n).height == old {
                break;
            }
            n = l(s, n).parent;
        }
    }

    /// Inserts slot `i` (its key must not be in the tree yet).
    pub(crate) fn insert<T: Node>(&mut self, s: &mut [T], i: u32) {
        let key = s[i as usize].key();
        *lm(s, i) = Link {
            height: 1,
            ..Link::EMPTY
        };
        let mut parent = NIL;
        let mut cur = self.root;
        let mut go_left = false;
        while cur != NIL {
            parent = cur;
            go_left = key < s[cur as usize].key();
            cur = if go_left {
                l(s, cur).left
            } else {
                l(s, cur).right
            };
        }
        lm(s, i).parent = parent;
        if parent == NIL {
            self.root = i;
        } else if go_left {
            lm(s, parent).left = i;
        } else {
            lm(s, parent).right = i;
        }
        self.len += 1;
        self.fix_up(s, parent);
    }

    /// Removes slot `z`, which must be in this tree. Other nodes keep their indices.
    pub(crate) fn remove<T: Node>(&mut self, s: &mut [T], z: u32) {
        let Link {
            left,
            right,
            parent,
            ..
        } = *l(s, z);
        if left == NIL || right == NIL {
            let child = if left == NIL { right } else { left };
            self.replace_child(s, parent, z, child);
            self.fix_up(s, parent);
        } else {
            let succ = self.min_from(s, right);
            let start;
            if l(s, succ).parent != z {
                let sp = l(s, succ).parent;
                let sr = l(s, succ).right;
                self.replace_child(s, sp, succ, sr);
                lm(s, succ).right = right;
                lm(s, right).parent = succ;
                start = sp;
            } else {
                start = succ;
            }
            self.replace_child(s, parent, z, succ);
            lm(s, succ).left = left;
            lm(s, left).parent = succ;
            lm(s, succ).height = l(s, z).height;
            self.fix_up(s, start);
        }
        *lm(s, z) = Link::EMPTY;
        self.len -= 1;
    }

    fn min_from<T: Node>(&self, s: &[T], mut n: u32) -> u32 {
        while n != NIL && l(s, n).left != NIL {
            n = l(s, n).left;
        }
        n
    }

    /// The node with the smallest key, or `NIL`.
    pub(crate) fn first<T: Node>(&self, s: &[T]) -> u32 {
        self.min_from(s, self.root)
    }

    /// The in-order successor of `n`, or `NIL`.
    pub(crate) fn next<T: Node>(&self, s: &[T], mut n: u32) -> u32 {
        let r = l(s, n).right;
        if r != NIL {
            return self.min_from(s, r);
        }
        let mut p = l(s, n).parent;
        while p != NIL && l(s, p).right == n {
            n = p;
            p = l(s, p).parent;
        }
        p
    }

    /// The node with exactly this key, or `NIL`.
    pub(crate) fn find<T: Node>(&self, s: &[T], key: u64) -> u32 {
        let mut cur = self.root;
        while cur != NIL {
            let k = s[cur as usize].key();
            if key == k {
                return cur;
            }
            cur = if key < k {
                l(s, cur).left
            } else {
                l(s, cur).right
            };
        }
        NIL
    }

    /// Checks the AVL and ordering invariants (tests only).
    #[cfg(test)]
    pub(crate) fn check<T: Node>(&self, s: &[T]) -> u32 {
        fn walk<T: Node>(
            s: &[T],
            n: u32,
            parent: u32,
            lo: Option<u64>,
            hi: Option<u64>,
        ) -> (u32, u32) {
            if n == NIL {
                return (0, 0);
            }
            let link = *l(s, n);
            assert_eq!(link.parent, parent);
            let k = s[n as usize].key();
            assert!(lo.is_none_or(|lo| k > lo));
            assert!(hi.is_none_or(|hi| k < hi));
            let (hl, cl) = walk(s, link.left, n, lo, Some(k));
            let (hr, cr) = walk(s, link.right, n, Some(k), hi);
            assert!(hl.abs_diff(hr) <= 1, "unbalanced");
            assert_eq!(link.height, 1 + hl.max(hr));
            (link.height, cl + cr + 1)
        }
        let (_, count) = walk(s, self.root, NIL, None, None);
        assert_eq!(count, self.len);
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    struct N {
        key: u64,
        link: Link,
    }

    impl Node for N {
        fn key(&self) -> u64 {
            self.key
        }
        fn link(&self) -> &Link {
            &self.link
        }
        fn link_mut(&mut self) -> &mut Link {
            &mut self.link
        }
    }

    const OPS: usize = if cfg!(miri) { 60 } else { 200 };

    proptest! {
        #![proptest_config(ProptestConfig {
            // Miri isolates the test from the file system: no failure persistence there.
            failure_persistence: if cfg!(miri) {
                None
            } else {
                ProptestConfig::default().failure_persistence
            },
            ..ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 128 })
        })]
        #[test]
        fn tree_matches_btreeset(ops in proptest::collection::vec((any::<bool>(), 0u64..64), 0..OPS)) {
            let mut slots: Vec<N> = (0..64).map(|k| N { key: k, link: Link::EMPTY }).collect();
            let mut tree = Tree::EMPTY;
            let mut model = BTreeSet::new();
            for (ins, k) in ops {
                if ins && !model.contains(&k) {
                    tree.insert(&mut slots, k as u32);
                    model.insert(k);
                } else if !ins && model.remove(&k) {
                    tree.remove(&mut slots, k as u32);
                }
                tree.check(&slots);
                let mut got = Vec::new();
                let mut n = tree.first(&slots);
                while n != NIL {
                    got.push(slots[n as usize].key);
                    n = tree.next(&slots, n);
                }
                prop_assert_eq!(got, model.iter().copied().collect::<Vec<_>>());
                for probe in [0u64, 17, 40, 63] {
                    prop_assert_eq!(tree.find(&slots, probe) != NIL, model.contains(&probe));
                }
            }
        }
    }
}
