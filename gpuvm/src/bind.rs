// SPDX-License-Identifier: GPL-2.0 OR MIT

//! VM_BIND batches: plan every op first, then commit without failure, or drop.
//!
//! A `VM_BIND` ioctl carries several map and unmap requests, and the driver usually runs them
//! later, from a job whose fence must signal: at that point nothing may allocate or fail. So the
//! whole batch is planned when the ioctl arrives. [`Gpuvm::bind`] opens a [`Bind`] on the VM;
//! each [`Bind::map`] / [`Bind::unmap`] computes its split/merge ops against the VM *as the
//! earlier requests of the batch left it*, takes the VA slots the ops will need and records the
//! ops in caller-provided storage. The driver then reads [`Bind::ops`], reserves page-table
//! memory and anything else, and either calls [`Bind::commit`] — which hands every op to a
//! [`CommitOps`] implementation that cannot fail — or drops the batch, which restores the VM
//! exactly as it was.
//!
//! While planning, the address tree already shows the planned state (so later requests see
//! earlier ones), but VAs that will be removed keep their driver data and VM-BO links, and new
//! VAs get theirs only at commit.

use crate::btree::Node as IndexNode;
use crate::sm::{map_step, unmap_step, CommitOps, Op, Piece, Step};
use crate::storage::Storage;
use crate::tree::NIL;
use crate::vm::{BoSlot, Core, Gpuvm, Mapping, VaSlot};
use crate::{Error, GemObject};

const MAP: u8 = 0;
const UNMAP: u8 = 1;
const REMAP: u8 = 2;

/// Storage slot for one planned op of a [`Bind`] (16 bytes).
#[derive(Clone, Copy, Debug)]
pub struct OpEntry {
    kind: u8,
    keep: bool,
    va: u32,
    prev: u32,
    next: u32,
}

impl OpEntry {
    /// An empty entry.
    pub const fn new() -> Self {
        OpEntry {
            kind: MAP,
            keep: false,
            va: NIL,
            prev: NIL,
            next: NIL,
        }
    }
}

impl Default for OpEntry {
    fn default() -> Self {
        Self::new()
    }
}

/// A VM_BIND batch being planned.
///
/// Holds the VM exclusively. Dropping it without [`Bind::commit`] undoes every planned op.
///
/// # Examples
///
/// ```
/// use gpuvm::{BoSlot, CommitOps, GemObject, Gpuvm, Mapping, Op, OpEntry, OpMap, OpMapped,
///             OpRemap, OpRemapped, OpUnmap, OpUnmapped, VaSlot, VmConfig};
/// # #[derive(Clone)] struct Bo(u64);
/// # impl GemObject for Bo {
/// #     fn id(&self) -> u64 { self.0 } fn size(&self) -> u64 { 1 << 20 }
/// #     fn resv_id(&self) -> u64 { 0 }
/// # }
/// struct Apply;
/// impl CommitOps<Bo, ()> for Apply {
///     fn map<'op>(&mut self, op: OpMap<'op, Bo, ()>) -> OpMapped<'op> { op.insert(()) }
///     fn unmap<'op>(&mut self, op: OpUnmap<'op, Bo, ()>) -> OpUnmapped<'op> { op.remove().0 }
///     fn remap<'op>(&mut self, op: OpRemap<'op, Bo, ()>) -> OpRemapped<'op> {
///         op.remap(|_, _| ()).0
///     }
/// }
///
/// let vas: [VaSlot<()>; 16] = core::array::from_fn(|_| VaSlot::new());
/// let bos: [BoSlot<Bo>; 4] = core::array::from_fn(|_| BoSlot::new());
/// let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), vas, bos)?;
/// let bo = Bo(1);
/// let mut ops = [OpEntry::new(); 8];
///
/// let mut bind = vm.bind(&mut ops)?;
/// bind.map(Mapping::new(0x0000, 0x4000, &bo, 0))?;
/// bind.unmap(0x1000, 0x1000)?; // sees the mapping planned just before
/// assert_eq!(bind.ops().count(), 2);
/// assert!(matches!(bind.ops().nth(1), Some(Op::Remap { .. })));
/// drop(bind); // changed my mind
/// assert!(vm.is_empty());
///
/// let mut bind = vm.bind(&mut ops)?;
/// bind.map(Mapping::new(0x0000, 0x4000, &bo, 0))?;
/// bind.unmap(0x1000, 0x1000)?;
/// bind.commit(&mut Apply);
/// assert_eq!(vm.len(), 2);
/// # Ok::<(), gpuvm::Error>(())
/// ```
pub struct Bind<'v, 'o, O, D, VS, BS, OS, NS = <VS as Storage<VaSlot<D>>>::Nodes>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
    OS: Storage<OpEntry>,
{
    vm: &'v mut Gpuvm<O, D, VS, BS, NS>,
    ops: &'o mut OS,
    len: usize,
    committed: bool,
}

impl<O, D, VS, BS, NS> Gpuvm<O, D, VS, BS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
{
    /// Opens a VM_BIND batch whose ops are recorded in `ops`, which grows as needed (through
    /// [`Storage::try_grow`]) while requests are planned.
    pub fn bind<'v, 'o, OS: Storage<OpEntry>>(
        &'v mut self,
        ops: &'o mut OS,
    ) -> Result<Bind<'v, 'o, O, D, VS, BS, OS, NS>, Error> {
        self.check_idle()?;
        self.st.batch_open = true;
        Ok(Bind {
            vm: self,
            ops,
            len: 0,
            committed: false,
        })
    }
}

fn mapping_of<'a, O, D>(vas: &[VaSlot<D>], bos: &'a [BoSlot<O>], i: u32) -> Mapping<'a, O> {
    let s = &vas[i as usize];
    Mapping {
        addr: s.addr,
        range: s.range,
        obj: if s.bo == NIL {
            None
        } else {
            bos[s.bo as usize].obj.as_ref()
        },
        offset: s.offset,
        flags: s.flags,
    }
}

fn piece_of<D>(vas: &[VaSlot<D>], i: u32) -> Option<Piece> {
    (i != NIL).then(|| {
        let s = &vas[i as usize];
        Piece {
            addr: s.addr,
            range: s.range,
            offset: s.offset,
        }
    })
}

impl<O, D, VS, BS, OS, NS> Bind<'_, '_, O, D, VS, BS, OS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
    OS: Storage<OpEntry>,
{
    /// Makes room for `more` op entries and counts the VAs overlapping `[addr, end)`.
    fn prepare(&mut self, addr: u64, end: u64, extra: usize) -> Result<(), Error> {
        let mut core = self.vm.core();
        let mut k = 0usize;
        let mut walk = core.overlaps(addr, end);
        while walk.cur != NIL {
            k += 1;
            core.advance(&mut walk);
        }
        let need = self.len + k + extra;
        let cap = self.ops.as_slice().len();
        if need > cap {
            self.ops.try_grow(need - cap, OpEntry::new)?;
        }
        Ok(())
    }

    fn push(&mut self, e: OpEntry) {
        self.ops.as_mut_slice()[self.len] = e;
        self.len += 1;
    }

    /// Plans the ops of one overlapped VA.
    fn plan_step(core: &mut Core<'_, O, D>, i: u32, step: Step) -> OpEntry {
        match step {
            Step::Unmap { keep } => {
                core.tree_remove(i);
                OpEntry {
                    kind: UNMAP,
                    keep,
                    va: i,
                    ..OpEntry::new()
                }
            }
            Step::Remap { prev, next, keep } => {
                let bo = core.vas[i as usize].bo;
                let flags = core.vas[i as usize].flags;
                // The first piece takes the old VA's place, the second goes right after it.
                // The old VA keeps its slot until commit.
                let mut placed = NIL;
                let mut slot = |p: Option<Piece>| match p {
                    None => NIL,
                    Some(p) => {
                        let n = core.alloc_va(p, flags, bo);
                        if placed == NIL {
                            core.tree_replace(i, n);
                        } else {
                            core.tree_insert(n);
                        }
                        placed = n;
                        n
                    }
                };
                let prev = slot(prev);
                let next = slot(next);
                OpEntry {
                    kind: REMAP,
                    keep,
                    va: i,
                    prev,
                    next,
                }
            }
        }
    }

    /// Plans mapping `req`, on top of what the batch already plans.
    ///
    /// Fails, changing nothing, on an invalid request (as [`Gpuvm::sm_map`]) or if the VA pool,
    /// the VM-BO pool or the op storage cannot grow enough.
    pub fn map(&mut self, req: Mapping<'_, O>) -> Result<(), Error> {
        let end = self.vm.check_map_req(&req)?;
        let need_bo = match req.obj {
            Some(obj) if self.vm.vm_bo(obj).is_none() => 1,
            _ => 0,
        };
        self.vm.reserve(3, need_bo)?;
        self.prepare(req.addr, end, 1)?;
        // From here on nothing can fail.
        let mut core = self.vm.core();
        let bo = match req.obj {
            Some(obj) => core.obtain_bo(obj).0,
            None => NIL,
        };
        let mut walk = core.overlaps(req.addr, end);
        let mut entries = 0;
        while walk.cur != NIL {
            let cur = walk.cur;
            let step = map_step(req.addr, req.range, bo, req.offset, &core.vas[cur as usize]);
            let e = Self::plan_step(&mut core, cur, step);
            self.ops.as_mut_slice()[self.len + entries] = e;
            entries += 1;
            core.advance(&mut walk);
        }
        let piece = Piece {
            addr: req.addr,
            range: req.range,
            offset: req.offset,
        };
        let i = core.alloc_va(piece, req.flags, bo);
        core.tree_insert(i);
        self.len += entries;
        self.push(OpEntry {
            kind: MAP,
            va: i,
            ..OpEntry::new()
        });
        Ok(())
    }

    /// Plans unmapping `[addr, addr + range)`, on top of what the batch already plans.
    ///
    /// Fails, changing nothing, on an invalid range or if the VA pool or the op storage cannot
    /// grow enough.
    pub fn unmap(&mut self, addr: u64, range: u64) -> Result<(), Error> {
        let end = crate::vm::check_range(&self.vm.st, addr, range)?;
        self.vm.reserve(2, 0)?;
        self.prepare(addr, end, 0)?;
        let mut core = self.vm.core();
        let mut walk = core.overlaps(addr, end);
        let mut entries = 0;
        while walk.cur != NIL {
            let cur = walk.cur;
            let step = unmap_step(addr, end, &core.vas[cur as usize]);
            let e = Self::plan_step(&mut core, cur, step);
            self.ops.as_mut_slice()[self.len + entries] = e;
            entries += 1;
            core.advance(&mut walk);
        }
        self.len += entries;
        Ok(())
    }

    /// Number of planned ops.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no op is planned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The planned ops, in the order [`Bind::commit`] will apply them.
    pub fn ops(&self) -> impl Iterator<Item = Op<'_, O>> + '_ {
        let vas = self.vm.vas.as_slice();
        let bos = self.vm.bos.as_slice();
        self.ops.as_slice()[..self.len].iter().map(move |e| {
            let va = mapping_of(vas, bos, e.va);
            match e.kind {
                MAP => Op::Map(va),
                UNMAP => Op::Unmap { va, keep: e.keep },
                _ => Op::Remap {
                    va,
                    prev: (e.prev != NIL).then(|| mapping_of(vas, bos, e.prev)),
                    next: (e.next != NIL).then(|| mapping_of(vas, bos, e.next)),
                    keep: e.keep,
                },
            }
        })
    }

    /// The VM as planned so far (new VAs have no driver data yet).
    pub fn vm(&self) -> &Gpuvm<O, D, VS, BS, NS> {
        self.vm
    }

    /// Applies every planned op through `driver`, in order. Cannot fail.
    pub fn commit<C: CommitOps<O, D>>(mut self, driver: &mut C) {
        let mut core = self.vm.core();
        for idx in 0..self.len {
            let e = self.ops.as_slice()[idx];
            match e.kind {
                MAP => {
                    let s = &core.vas[e.va as usize];
                    let m = Mapping {
                        addr: s.addr,
                        range: s.range,
                        obj: None,
                        offset: s.offset,
                        flags: s.flags,
                    };
                    let bo = s.bo;
                    let _ = driver.map(core.op_map(&m, bo, e.va));
                }
                UNMAP => {
                    let _ = driver.unmap(core.op_unmap(e.va, e.keep, false));
                }
                _ => {
                    let prev = piece_of(core.vas, e.prev);
                    let next = piece_of(core.vas, e.next);
                    let _ = driver.remap(core.op_remap(e.va, prev, next, e.prev, e.next, e.keep));
                }
            }
        }
        core.cleanup_deferred();
        self.committed = true;
    }

    /// Undoes the planned ops, newest first.
    fn rollback(&mut self) {
        let mut core = self.vm.core();
        for idx in (0..self.len).rev() {
            let e = self.ops.as_slice()[idx];
            match e.kind {
                MAP => {
                    core.tree_remove(e.va);
                    core.free_va(e.va);
                }
                UNMAP => core.tree_insert(e.va),
                _ => {
                    for piece in [e.prev, e.next] {
                        if piece != NIL {
                            core.tree_remove(piece);
                            core.free_va(piece);
                        }
                    }
                    core.tree_insert(e.va);
                }
            }
        }
        // VM-BOs created for the batch have no VA: they go away here.
        core.cleanup_deferred();
        self.len = 0;
    }
}

impl<O, D, VS, BS, OS, NS> Drop for Bind<'_, '_, O, D, VS, BS, OS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
    OS: Storage<OpEntry>,
{
    fn drop(&mut self) {
        if !self.committed {
            self.rollback();
        }
        self.vm.st.batch_open = false;
    }
}
