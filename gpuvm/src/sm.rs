// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Split and merge: turning map and unmap requests into ops.
//!
//! A map request may overlap any number of existing VAs. Each of them is either covered
//! entirely — it must go, an *unmap* op — or only partly, at the start or the end of the
//! request: then it is *remapped*, i.e. replaced by the piece(s) outside the request (`prev`
//! before it, `next` after it) with the object offset adjusted. Only the first and the last
//! overlapped VA can be partly covered, so a request yields at most two remaps, any number of
//! unmaps in address order, and finally one *map* op for the request itself. An unmap request
//! works the same way without the final map.
//!
//! Every unmap and remap of a map request carries a `keep` hint: the old VA is backed by the
//! same object at the same offsets the request would use, so its page-table entries are already
//! right and a driver may leave them in place (only VAs with an object qualify; for unmap
//! requests `keep` is always false).
//!
//! # Applying ops with proof
//!
//! With [`Gpuvm::sm_map`] and [`Gpuvm::sm_unmap`] the ops are handed to an [`SmOps`]
//! implementation one by one. Each op type has exactly one method that applies it to the VM
//! ([`OpMap::insert`], [`OpUnmap::remove`], [`OpRemap::remap`]) and only that method produces
//! the token the callback must return. The tokens carry an invariant lifetime tied to the one
//! op, so a token cannot be kept from an earlier op or forged: a driver that forgets to apply an
//! op does not compile.
//!
//! ```compile_fail
//! use gpuvm::{Error, GemObject, OpMap, OpMapped, OpRemap, OpRemapped, OpUnmap, OpUnmapped, SmOps};
//! # #[derive(Clone)] struct Bo;
//! # impl GemObject for Bo {
//! #     fn id(&self) -> u64 { 0 } fn size(&self) -> u64 { 0 } fn resv_id(&self) -> u64 { 0 }
//! # }
//! struct Lazy;
//! impl SmOps<Bo, ()> for Lazy {
//!     type Error = Error;
//!     fn sm_step_map<'op>(&mut self, op: OpMap<'op, Bo, ()>) -> Result<OpMapped<'op>, Error> {
//!         Ok(OpMapped { _p: core::marker::PhantomData }) // private: cannot be built
//!     }
//! #   fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, ()>) -> Result<OpUnmapped<'op>, Error> { Ok(op.remove().0) }
//! #   fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, ()>) -> Result<OpRemapped<'op>, Error> { Ok(op.remap(|_, _| ()).0) }
//! }
//! ```

use core::marker::PhantomData;

use crate::btree::Node as IndexNode;
use crate::storage::Storage;
use crate::tree::NIL;
use crate::vm::{BoSlot, Core, Gpuvm, Mapping, Va, VaSlot};
use crate::{Error, GemObject};

type Invariant<'op> = PhantomData<fn(&'op ()) -> &'op ()>;

/// One piece of a split VA, before it has a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) addr: u64,
    pub(crate) range: u64,
    pub(crate) offset: u64,
}

/// What happens to one existing VA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Unmap {
        keep: bool,
    },
    Remap {
        prev: Option<Piece>,
        next: Option<Piece>,
        keep: bool,
    },
}

/// What a map request over `[req_addr, req_addr + req_range)` of VM-BO `req_bo` (or `NIL`)
/// at `req_offset` does to the overlapping VA `va`.
pub(crate) fn map_step<D>(
    req_addr: u64,
    req_range: u64,
    req_bo: u32,
    req_offset: u64,
    va: &VaSlot<D>,
) -> Step {
    let (addr, range, offset, bo) = (va.addr, va.range, va.offset, va.bo);
    let end = addr + range;
    let req_end = req_addr + req_range;
    let backed = bo != NIL;
    if addr == req_addr {
        let keep = backed && bo == req_bo && offset == req_offset;
        if end <= req_end {
            Step::Unmap { keep }
        } else {
            Step::Remap {
                prev: None,
                next: Some(Piece {
                    addr: req_end,
                    range: range - req_range,
                    offset: offset.wrapping_add(req_range),
                }),
                keep,
            }
        }
    } else if addr < req_addr {
        let left = req_addr - addr;
        let keep = backed && bo == req_bo && offset.wrapping_add(left) == req_offset;
        let prev = Some(Piece {
            addr,
            range: left,
            offset,
        });
        let next = (end > req_end).then(|| Piece {
            addr: req_end,
            range: end - req_end,
            offset: offset.wrapping_add(left).wrapping_add(req_range),
        });
        Step::Remap { prev, next, keep }
    } else {
        let keep = backed && bo == req_bo && offset == req_offset.wrapping_add(addr - req_addr);
        if end <= req_end {
            Step::Unmap { keep }
        } else {
            Step::Remap {
                prev: None,
                next: Some(Piece {
                    addr: req_end,
                    range: end - req_end,
                    offset: offset.wrapping_add(req_end - addr),
                }),
                keep,
            }
        }
    }
}

/// What an unmap request over `[req_addr, req_end)` does to the overlapping VA `va`.
pub(crate) fn unmap_step<D>(req_addr: u64, req_end: u64, va: &VaSlot<D>) -> Step {
    let (addr, offset) = (va.addr, va.offset);
    let end = addr + va.range;
    let prev = (addr < req_addr).then(|| Piece {
        addr,
        range: req_addr - addr,
        offset,
    });
    let next = (end > req_end).then(|| Piece {
        addr: req_end,
        range: end - req_end,
        offset: offset.wrapping_add(req_end - addr),
    });
    if prev.is_none() && next.is_none() {
        Step::Unmap { keep: false }
    } else {
        Step::Remap {
            prev,
            next,
            keep: false,
        }
    }
}

/// A description of one op, as [`Bind::ops`](crate::Bind::ops) lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a, O> {
    /// Create this mapping.
    Map(Mapping<'a, O>),
    /// Remove the VA `va` entirely.
    Unmap {
        /// The VA to remove.
        va: Mapping<'a, O>,
        /// Its page-table entries already match the new mapping.
        keep: bool,
    },
    /// Replace the VA `va` by the pieces of it that survive.
    Remap {
        /// The VA being split.
        va: Mapping<'a, O>,
        /// The piece before the request, if any.
        prev: Option<Mapping<'a, O>>,
        /// The piece after the request, if any.
        next: Option<Mapping<'a, O>>,
        /// The page-table entries of the removed middle already match the new mapping.
        keep: bool,
    },
}

/// Proof that an [`OpMap`] was applied. Only [`OpMap::insert`] makes one.
#[must_use]
pub struct OpMapped<'op> {
    _p: Invariant<'op>,
}

/// Proof that an [`OpUnmap`] was applied. Only [`OpUnmap::remove`] makes one.
#[must_use]
pub struct OpUnmapped<'op> {
    _p: Invariant<'op>,
}

/// Proof that an [`OpRemap`] was applied. Only [`OpRemap::remap`] makes one.
#[must_use]
pub struct OpRemapped<'op> {
    _p: Invariant<'op>,
}

/// A map op not applied yet: the requested mapping, to be inserted.
pub struct OpMap<'op, O, D> {
    core: Core<'op, O, D>,
    addr: u64,
    range: u64,
    offset: u64,
    flags: u32,
    bo: u32,
    /// The planned slot (batch commit), or `NIL` (immediate: take one from the pool).
    slot: u32,
    _p: Invariant<'op>,
}

impl<'op, O: GemObject, D> OpMap<'op, O, D> {
    /// The mapping to create.
    pub fn mapping(&self) -> Mapping<'_, O> {
        Mapping {
            addr: self.addr,
            range: self.range,
            obj: self.core.obj_of(self.bo),
            offset: self.offset,
            flags: self.flags,
        }
    }

    /// First address of the new mapping.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Size of the new mapping.
    pub fn range(&self) -> u64 {
        self.range
    }

    /// Offset into the object.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The object to map, `None` for a sparse mapping.
    pub fn obj(&self) -> Option<&O> {
        self.core.obj_of(self.bo)
    }

    /// Inserts the new VA with driver data `data`, taking a preallocated slot.
    pub fn insert(mut self, data: D) -> OpMapped<'op> {
        let i = if self.slot == NIL {
            let p = Piece {
                addr: self.addr,
                range: self.range,
                offset: self.offset,
            };
            let i = self.core.alloc_va(p, self.flags, self.bo);
            self.core.tree_insert(i);
            i
        } else {
            self.slot
        };
        self.core.vas[i as usize].data = Some(data);
        self.core.link_va(i);
        OpMapped { _p: PhantomData }
    }
}

/// An unmap op not applied yet: an existing VA to remove.
pub struct OpUnmap<'op, O, D> {
    core: Core<'op, O, D>,
    va: u32,
    keep: bool,
    /// Whether the VA is still in the tree (immediate mode).
    in_tree: bool,
    _p: Invariant<'op>,
}

fn take_data<D>(slot: &mut VaSlot<D>) -> D {
    match slot.data.take() {
        Some(d) => d,
        // Data is missing only on VAs planned by a batch that has not committed yet; while a
        // batch is open (or was leaked) the VM refuses every request, and a batch commits its
        // ops in order, so a VA's map op always runs before any op that removes it.
        None => unreachable!("VA without data reached an op"),
    }
}

impl<'op, O: GemObject, D> OpUnmap<'op, O, D> {
    /// The VA to remove.
    pub fn va(&self) -> Va<'_, O, D> {
        self.core.view(self.va)
    }

    /// Whether the page-table entries of this VA already match the new mapping, so the driver
    /// may keep them.
    pub fn keep(&self) -> bool {
        self.keep
    }

    /// Removes the VA and hands back its driver data.
    pub fn remove(mut self) -> (OpUnmapped<'op>, D) {
        if self.in_tree {
            self.core.tree_remove(self.va);
        }
        self.core.unlink_va(self.va);
        let data = take_data(&mut self.core.vas[self.va as usize]);
        self.core.free_va(self.va);
        (OpUnmapped { _p: PhantomData }, data)
    }
}

/// A remap op not applied yet: an existing VA to replace by its surviving pieces.
pub struct OpRemap<'op, O, D> {
    core: Core<'op, O, D>,
    va: u32,
    prev: Option<Piece>,
    next: Option<Piece>,
    /// Planned slots of the pieces (batch commit), or `NIL` (immediate).
    prev_slot: u32,
    next_slot: u32,
    keep: bool,
    /// Whether the VA is still in the tree (immediate mode).
    in_tree: bool,
    _p: Invariant<'op>,
}

impl<'op, O: GemObject, D> OpRemap<'op, O, D> {
    fn piece(&self, p: Option<Piece>) -> Option<Mapping<'_, O>> {
        let old = &self.core.vas[self.va as usize];
        p.map(|p| Mapping {
            addr: p.addr,
            range: p.range,
            obj: self.core.obj_of(old.bo),
            offset: p.offset,
            flags: old.flags,
        })
    }

    /// The VA being split.
    pub fn va(&self) -> Va<'_, O, D> {
        self.core.view(self.va)
    }

    /// The surviving piece before the request.
    pub fn prev(&self) -> Option<Mapping<'_, O>> {
        self.piece(self.prev)
    }

    /// The surviving piece after the request.
    pub fn next(&self) -> Option<Mapping<'_, O>> {
        self.piece(self.next)
    }

    /// Whether the page-table entries of the removed part already match the new mapping.
    pub fn keep(&self) -> bool {
        self.keep
    }

    /// Replaces the VA by its pieces. `data` makes the driver data of each piece (first
    /// `prev`, then `next`) from the old VA's data and the piece. Hands back the old data.
    pub fn remap(mut self, mut data: impl FnMut(&D, &Mapping<'_, O>) -> D) -> (OpRemapped<'op>, D) {
        let old = take_data(&mut self.core.vas[self.va as usize]);
        let bo = self.core.vas[self.va as usize].bo;
        let flags = self.core.vas[self.va as usize].flags;
        self.core.unlink_va(self.va);
        // In immediate mode the first piece takes the old VA's place in the tree, the second
        // goes right after it; in batch mode the pieces are in the tree already.
        let mut placed = NIL;
        for (piece, planned) in [(self.prev, self.prev_slot), (self.next, self.next_slot)] {
            let Some(p) = piece else { continue };
            let m = Mapping {
                addr: p.addr,
                range: p.range,
                obj: self.core.obj_of(bo),
                offset: p.offset,
                flags,
            };
            let d = data(&old, &m);
            let i = if !self.in_tree {
                planned
            } else if placed == NIL {
                let i = self.core.alloc_va(p, flags, bo);
                self.core.tree_replace(self.va, i);
                self.core.free_va(self.va);
                i
            } else {
                let i = self.core.alloc_va(p, flags, bo);
                self.core.tree_insert(i);
                i
            };
            placed = i;
            self.core.vas[i as usize].data = Some(d);
            self.core.link_va(i);
        }
        if !self.in_tree {
            self.core.free_va(self.va);
        }
        (OpRemapped { _p: PhantomData }, old)
    }
}

/// A driver applying ops as they are computed (immediate mode).
///
/// Each callback must apply its op through the op's own method and return the token that
/// method gives back; it may fail, which stops the walk and returns the error (ops applied so
/// far stay applied, as with the C implementation).
pub trait SmOps<O, D> {
    /// The driver's error type; VM errors convert into it.
    type Error: From<Error>;

    /// A new mapping should be created.
    fn sm_step_map<'op>(&mut self, op: OpMap<'op, O, D>) -> Result<OpMapped<'op>, Self::Error>;

    /// An existing mapping should be removed.
    fn sm_step_unmap<'op>(
        &mut self,
        op: OpUnmap<'op, O, D>,
    ) -> Result<OpUnmapped<'op>, Self::Error>;

    /// An existing mapping should be split.
    fn sm_step_remap<'op>(
        &mut self,
        op: OpRemap<'op, O, D>,
    ) -> Result<OpRemapped<'op>, Self::Error>;
}

/// A driver applying the ops of a committed VM_BIND batch: the same ops and proofs as
/// [`SmOps`], but with no way to fail.
pub trait CommitOps<O, D> {
    /// A new mapping should be created.
    fn map<'op>(&mut self, op: OpMap<'op, O, D>) -> OpMapped<'op>;

    /// An existing mapping should be removed.
    fn unmap<'op>(&mut self, op: OpUnmap<'op, O, D>) -> OpUnmapped<'op>;

    /// An existing mapping should be split.
    fn remap<'op>(&mut self, op: OpRemap<'op, O, D>) -> OpRemapped<'op>;
}

impl<O: GemObject, D> Core<'_, O, D> {
    pub(crate) fn view(&self, i: u32) -> Va<'_, O, D> {
        let slot = &self.vas[i as usize];
        Va::from_parts(slot, self.obj_of(slot.bo))
    }

    pub(crate) fn op_map(&mut self, m: &Mapping<'_, O>, bo: u32, slot: u32) -> OpMap<'_, O, D> {
        OpMap {
            addr: m.addr,
            range: m.range,
            offset: m.offset,
            flags: m.flags,
            bo,
            slot,
            core: self.reborrow(),
            _p: PhantomData,
        }
    }

    pub(crate) fn op_unmap(&mut self, va: u32, keep: bool, in_tree: bool) -> OpUnmap<'_, O, D> {
        OpUnmap {
            core: self.reborrow(),
            va,
            keep,
            in_tree,
            _p: PhantomData,
        }
    }

    pub(crate) fn op_remap(
        &mut self,
        va: u32,
        prev: Option<Piece>,
        next: Option<Piece>,
        prev_slot: u32,
        next_slot: u32,
        keep: bool,
    ) -> OpRemap<'_, O, D> {
        OpRemap {
            core: self.reborrow(),
            va,
            prev,
            next,
            prev_slot,
            next_slot,
            keep,
            in_tree: prev_slot == NIL && next_slot == NIL,
            _p: PhantomData,
        }
    }
}

/// Applies every op by default: new VAs get `data`, pieces a clone of their VA's data.
struct CloneOps<D>(D);

impl<O: GemObject, D: Clone> SmOps<O, D> for CloneOps<D> {
    type Error = Error;

    fn sm_step_map<'op>(&mut self, op: OpMap<'op, O, D>) -> Result<OpMapped<'op>, Error> {
        Ok(op.insert(self.0.clone()))
    }

    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, O, D>) -> Result<OpUnmapped<'op>, Error> {
        Ok(op.remove().0)
    }

    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, O, D>) -> Result<OpRemapped<'op>, Error> {
        Ok(op.remap(|d, _| d.clone()).0)
    }
}

impl<O, D, VS, BS, NS> Gpuvm<O, D, VS, BS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
{
    /// Maps `req`, handing the driver every op needed: unmaps and remaps of what the request
    /// overlaps in address order, then the map of the request itself.
    ///
    /// The request is checked first (see [`Gpuvm::check_range`]; with an object, also the
    /// offset's alignment and that `offset + range` fits in the object), and the pools must
    /// hold two free VA slots and, if the object has no VM-BO yet, a free VM-BO slot; otherwise
    /// the error is returned and nothing changes. Nothing is allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Error, GemObject, Gpuvm, Mapping, OpMap, OpMapped, OpRemap,
    ///             OpRemapped, OpUnmap, OpUnmapped, SmOps, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo(u64);
    /// # impl GemObject for Bo {
    /// #     fn id(&self) -> u64 { self.0 } fn size(&self) -> u64 { 1 << 20 }
    /// #     fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// /// A driver that logs what it would do to the page tables.
    /// struct Pt(Vec<String>);
    ///
    /// impl SmOps<Bo, u32> for Pt {
    ///     type Error = Error;
    ///     fn sm_step_map<'op>(&mut self, op: OpMap<'op, Bo, u32>) -> Result<OpMapped<'op>, Error> {
    ///         self.0.push(format!("map {:#x}+{:#x}", op.addr(), op.range()));
    ///         Ok(op.insert(0))
    ///     }
    ///     fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u32>) -> Result<OpUnmapped<'op>, Error> {
    ///         self.0.push(format!("unmap {:#x} keep={}", op.va().addr(), op.keep()));
    ///         Ok(op.remove().0)
    ///     }
    ///     fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, u32>) -> Result<OpRemapped<'op>, Error> {
    ///         self.0.push(format!("remap {:#x}", op.va().addr()));
    ///         Ok(op.remap(|old, _piece| old + 1).0)
    ///     }
    /// }
    ///
    /// let vas: [VaSlot<u32>; 8] = core::array::from_fn(|_| VaSlot::new());
    /// let bos: [BoSlot<Bo>; 2] = core::array::from_fn(|_| BoSlot::new());
    /// let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), vas, bos)?;
    /// let bo = Bo(1);
    /// let mut pt = Pt(Vec::new());
    /// vm.sm_map(&mut pt, Mapping::new(0x0, 0x3000, &bo, 0))?;
    /// vm.sm_map(&mut pt, Mapping::new(0x1000, 0x1000, &bo, 0x1000))?;
    /// assert_eq!(pt.0, ["map 0x0+0x3000", "remap 0x0", "map 0x1000+0x1000"]);
    /// assert_eq!(vm.len(), 3);
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn sm_map<T: SmOps<O, D>>(
        &mut self,
        ops: &mut T,
        req: Mapping<'_, O>,
    ) -> Result<(), T::Error> {
        let end = self.precheck_map(&req, 2)?;
        let mut core = self.core();
        let bo = match req.obj {
            Some(obj) => core.obtain_bo(obj).0,
            None => NIL,
        };
        let mut walk = core.overlaps(req.addr, end);
        let result = (|| {
            while walk.cur != NIL {
                let cur = walk.cur;
                let step = map_step(req.addr, req.range, bo, req.offset, &core.vas[cur as usize]);
                core.run_step(ops, cur, step)?;
                core.advance(&mut walk);
            }
            let op = core.op_map(&req, bo, NIL);
            ops.sm_step_map(op).map(|_| ())
        })();
        core.cleanup_deferred();
        result
    }

    /// Unmaps `[addr, addr + range)`, handing the driver an unmap op for every VA inside the
    /// range and a remap op for a VA that sticks out of it (`keep` is always false).
    ///
    /// Needs one free VA slot; otherwise, or if the range is invalid, nothing changes.
    pub fn sm_unmap<T: SmOps<O, D>>(
        &mut self,
        ops: &mut T,
        addr: u64,
        range: u64,
    ) -> Result<(), T::Error> {
        let end = self.precheck_unmap(addr, range, 1)?;
        let mut core = self.core();
        let mut walk = core.overlaps(addr, end);
        let result = (|| {
            while walk.cur != NIL {
                let cur = walk.cur;
                let step = unmap_step(addr, end, &core.vas[cur as usize]);
                core.run_step(ops, cur, step)?;
                core.advance(&mut walk);
            }
            Ok(())
        })();
        core.cleanup_deferred();
        result
    }

    /// Splits the sparse VAs (those without an object) that straddle the start or the end of
    /// `req` and maps the parts inside it again, without unmapping or merging anything: the
    /// madvise-style variant of [`Gpuvm::sm_map`], used to give part of a range new attributes.
    ///
    /// VAs backed by an object are left alone, as are sparse VAs entirely inside the request
    /// or starting or ending exactly at its bounds. A sparse VA that contains the request
    /// entirely, or that starts at or before it and sticks out of its end, is remapped and
    /// `req` itself is mapped. Otherwise a sparse VA sticking out at the start is remapped and
    /// its part inside the request mapped (sparse), and one sticking out at the end likewise,
    /// which ends the walk. `keep` is always false. Needs two free VA slots.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Gpuvm, Mapping, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo;
    /// # impl gpuvm::GemObject for Bo {
    /// #     fn id(&self) -> u64 { 0 } fn size(&self) -> u64 { 0 } fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// # struct Keep;
    /// # impl gpuvm::SmOps<Bo, u8> for Keep {
    /// #     type Error = gpuvm::Error;
    /// #     fn sm_step_map<'op>(&mut self, op: gpuvm::OpMap<'op, Bo, u8>) -> Result<gpuvm::OpMapped<'op>, gpuvm::Error> { Ok(op.insert(2)) }
    /// #     fn sm_step_unmap<'op>(&mut self, op: gpuvm::OpUnmap<'op, Bo, u8>) -> Result<gpuvm::OpUnmapped<'op>, gpuvm::Error> { Ok(op.remove().0) }
    /// #     fn sm_step_remap<'op>(&mut self, op: gpuvm::OpRemap<'op, Bo, u8>) -> Result<gpuvm::OpRemapped<'op>, gpuvm::Error> { Ok(op.remap(|d, _| *d).0) }
    /// # }
    /// let vas: [VaSlot<u8>; 8] = core::array::from_fn(|_| VaSlot::new());
    /// let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), vas, [BoSlot::<Bo>::new()])?;
    /// vm.map(Mapping::sparse(0, 0x4000), 1)?;
    /// // `Keep` gives new VAs the data 2 and lets pieces keep theirs.
    /// vm.sm_madvise(&mut Keep, Mapping::sparse(0x1000, 0x2000))?;
    /// let got: Vec<_> = vm.iter().map(|v| (v.addr(), v.range(), *v.data().unwrap())).collect();
    /// assert_eq!(got, [(0, 0x1000, 1), (0x1000, 0x2000, 2), (0x3000, 0x1000, 1)]);
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn sm_madvise<T: SmOps<O, D>>(
        &mut self,
        ops: &mut T,
        req: Mapping<'_, O>,
    ) -> Result<(), T::Error> {
        let end = self.precheck_map(&req, 2)?;
        let mut core = self.core();
        let bo = match req.obj {
            Some(obj) => core.obtain_bo(obj).0,
            None => NIL,
        };
        let mut walk = core.overlaps(req.addr, end);
        let result = (|| {
            let mut map_req = false;
            while walk.cur != NIL {
                let cur = walk.cur;
                let va = &core.vas[cur as usize];
                if va.bo != NIL {
                    core.advance(&mut walk);
                    continue;
                }
                let (addr, vend, offset) = (va.addr, va.addr + va.range, va.offset);
                let prev = (addr < req.addr).then(|| Piece {
                    addr,
                    range: req.addr - addr,
                    offset,
                });
                let tail = (vend > end).then(|| Piece {
                    addr: end,
                    range: vend - end,
                    offset: offset.wrapping_add(end - addr),
                });
                if prev.is_none() && tail.is_none() {
                    // Inside the request: nothing to split.
                    core.advance(&mut walk);
                    continue;
                }
                let step = Step::Remap {
                    prev,
                    next: tail,
                    keep: false,
                };
                core.run_step(ops, cur, step)?;
                if addr <= req.addr && vend >= end {
                    map_req = true;
                    break;
                }
                let inner = if addr < req.addr {
                    Mapping::sparse(req.addr, vend - req.addr)
                } else {
                    Mapping::sparse(addr, end - addr)
                };
                let _ = ops.sm_step_map(core.op_map(&inner, NIL, NIL))?;
                if addr > req.addr {
                    return Ok(());
                }
                core.advance(&mut walk);
            }
            if map_req {
                let _ = ops.sm_step_map(core.op_map(&req, bo, NIL))?;
            }
            Ok(())
        })();
        core.cleanup_deferred();
        result
    }

    /// Maps `req` and applies every op directly: the new VA gets `data`, the pieces of split
    /// VAs a clone of their VA's data, and removed data is dropped.
    ///
    /// Unlike [`Gpuvm::sm_map`], this first grows the pools as needed (see [`Gpuvm::reserve`]),
    /// so it is meant for paths where allocating is allowed.
    pub fn map(&mut self, req: Mapping<'_, O>, data: D) -> Result<(), Error>
    where
        D: Clone,
    {
        self.check_idle()?;
        self.check_map_req(&req)?;
        let need_bo = match req.obj {
            Some(obj) if self.vm_bo(obj).is_none() => 1,
            _ => 0,
        };
        self.reserve(2, need_bo)?;
        self.sm_map(&mut CloneOps(data), req)
    }

    /// Unmaps `[addr, addr + range)` and applies every op directly (see [`Gpuvm::map`]).
    pub fn unmap(&mut self, addr: u64, range: u64) -> Result<(), Error>
    where
        D: Clone,
    {
        self.check_idle()?;
        crate::vm::check_range(&self.st, addr, range)?;
        self.reserve(1, 0)?;
        self.sm_unmap(&mut UnmapOnly, addr, range)
    }

    /// Checks a map request against the VM and the object; returns the request's end.
    pub(crate) fn check_map_req(&self, req: &Mapping<'_, O>) -> Result<u64, Error> {
        let end = crate::vm::check_range(&self.st, req.addr, req.range)?;
        if let Some(obj) = req.obj {
            let obj_end = req.offset.checked_add(req.range).ok_or(Error::Overflow)?;
            if req.offset & (self.st.align - 1) != 0 {
                return Err(Error::Misaligned);
            }
            if obj_end > obj.size() {
                return Err(Error::OutOfObject);
            }
        }
        Ok(end)
    }

    /// Checks a map request and the pools; returns the request's end.
    pub(crate) fn precheck_map(&self, req: &Mapping<'_, O>, vas: u32) -> Result<u64, Error> {
        self.check_idle()?;
        let end = self.check_map_req(req)?;
        if let Some(obj) = req.obj {
            if self.st.free_bo_count == 0
                && self.st.bo_tree.find(self.bos.as_slice(), obj.id()) == NIL
            {
                return Err(Error::NoMemory);
            }
        }
        if self.st.free_va_count < vas {
            return Err(Error::NoMemory);
        }
        Ok(end)
    }

    /// Checks an unmap request and the pools; returns the request's end.
    pub(crate) fn precheck_unmap(&self, addr: u64, range: u64, vas: u32) -> Result<u64, Error> {
        self.check_idle()?;
        let end = crate::vm::check_range(&self.st, addr, range)?;
        if self.st.free_va_count < vas {
            return Err(Error::NoMemory);
        }
        Ok(end)
    }
}

/// Applies unmap-request ops directly, dropping removed data and cloning into pieces.
struct UnmapOnly;

impl<O: GemObject, D: Clone> SmOps<O, D> for UnmapOnly {
    type Error = Error;

    fn sm_step_map<'op>(&mut self, op: OpMap<'op, O, D>) -> Result<OpMapped<'op>, Error> {
        // An unmap request never produces a map op.
        let _ = op;
        Err(Error::InvalidConfig)
    }

    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, O, D>) -> Result<OpUnmapped<'op>, Error> {
        Ok(op.remove().0)
    }

    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, O, D>) -> Result<OpRemapped<'op>, Error> {
        Ok(op.remap(|d, _| d.clone()).0)
    }
}

impl<O: GemObject, D> Core<'_, O, D> {
    /// Hands one immediate-mode step for VA `i` to the driver.
    fn run_step<T: SmOps<O, D>>(
        &mut self,
        ops: &mut T,
        i: u32,
        step: Step,
    ) -> Result<(), T::Error> {
        match step {
            Step::Unmap { keep } => ops.sm_step_unmap(self.op_unmap(i, keep, true)).map(|_| ()),
            Step::Remap { prev, next, keep } => ops
                .sm_step_remap(self.op_remap(i, prev, next, NIL, NIL, keep))
                .map(|_| ()),
        }
    }
}
