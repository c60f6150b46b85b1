// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The VM: a GPU virtual address space, its mappings (VAs) and its VM-BOs.
//!
//! A GPU VM covers `[start, start + range)`. Part of it can be reserved for the kernel (firmware
//! interfaces, ring buffers); no user request may touch that part. Each *VA* maps
//! `[addr, addr + range)` either to a GEM object at some byte offset, or to nothing at all
//! (a *sparse* VA, used for Vulkan sparse residency). VAs never overlap.
//!
//! For every GEM object that has at least one VA in the VM there is exactly one *VM-BO*: the
//! pair (VM, object). It lists the object's VAs in this VM, and sits on the VM's list of
//! *external objects* when the object's reservation is not the VM's, and on the list of
//! *evicted* objects while the driver reports it evicted. [`Gpuvm::validate`] walks the evicted
//! list so the driver can move each object back before the next job runs.
//!
//! # Memory
//!
//! VAs live in [`VaSlot`]s and VM-BOs in [`BoSlot`]s, both in storage the caller provides (see
//! [`Storage`]). The VAs are indexed by a B+tree whose nodes ([`IndexNode`], 200 bytes each)
//! live in a third storage, the node storage: [`Gpuvm::new`] takes it from the VA storage
//! ([`Storage::new_nodes`]: an empty `Vec` for a `Vec`), [`Gpuvm::with_nodes`] from the
//! caller. The VM keeps it at [`IndexNode::needed`]`(n)` nodes for `n` VA slots, about `n / 7`,
//! the most a tree of `n` VAs can use (see the `btree` module), growing it together with the
//! VA storage, so the node pool can never run dry. One VA costs `size_of::<VaSlot<D>>()`
//! bytes: 40 bytes of address, range, offset, object, flags and list links, and `Option<D>` —
//! 48 bytes for `D = ()`, `u32` or a pointer, 56 for `D = u64` (64-bit targets) — plus its share
//! of the node storage, which is sized at up to 29 bytes (200 / 7) per VA slot; the nodes in
//! use come to 14 bytes per VA when the VAs were created in address order and about 20 after
//! random churn. So a VA costs 62 to 68 bytes of touched memory for `D = ()` (77 reserved).
//! A VM-BO costs `size_of::<BoSlot<O>>()`: 57 bytes plus `Option<O>`, 72 bytes for a
//! pointer-sized handle such as `ARef`/`Arc`. An op entry of a VM_BIND batch costs 16 bytes.
//! Free slots form a pool; [`Gpuvm::reserve`] fills the pool ahead of time, and applying ops
//! only takes slots from it and gives them back.

use core::marker::PhantomData;
use core::ops::Range;

use crate::btree::{nodes_for, Cursor, Index, Node as IndexNode};
use crate::list::{List, ListLink};
use crate::sm::Piece;
use crate::storage::Storage;
use crate::tree::{Link, Node, Tree, NIL};
use crate::{Error, GemObject};

/// Storage slot for one VA.
///
/// Create empty slots with [`VaSlot::new`]; the VM fills and recycles them.
// What a split/merge step reads first comes first: address and range, then offset, object,
// list links, flags.
#[repr(C)]
pub struct VaSlot<D> {
    pub(crate) addr: u64,
    pub(crate) range: u64,
    pub(crate) offset: u64,
    pub(crate) bo: u32,
    /// Links of the VM-BO's VA list; `next` links the free pool.
    pub(crate) bo_link: ListLink,
    pub(crate) flags: u32,
    pub(crate) data: Option<D>,
}

impl<D> VaSlot<D> {
    /// An empty slot.
    pub const fn new() -> Self {
        VaSlot {
            addr: 0,
            range: 0,
            offset: 0,
            bo: NIL,
            bo_link: ListLink::EMPTY,
            flags: 0,
            data: None,
        }
    }
}

impl<D> Default for VaSlot<D> {
    fn default() -> Self {
        Self::new()
    }
}

const BO_EXTOBJ: u8 = 1;
const BO_EVICTED: u8 = 2;
const BO_DEFERRED: u8 = 4;

/// Storage slot for one VM-BO.
///
/// Create empty slots with [`BoSlot::new`]; the VM fills and recycles them.
pub struct BoSlot<O> {
    pub(crate) id: u64,
    pub(crate) link: Link,
    pub(crate) obj: Option<O>,
    pub(crate) vas: List,
    pub(crate) ext: ListLink,
    pub(crate) ev: ListLink,
    pub(crate) deferred_next: u32,
    pub(crate) flags: u8,
}

impl<O> BoSlot<O> {
    /// An empty slot.
    pub const fn new() -> Self {
        BoSlot {
            id: 0,
            link: Link::EMPTY,
            obj: None,
            vas: List::EMPTY,
            ext: ListLink::EMPTY,
            ev: ListLink::EMPTY,
            deferred_next: NIL,
            flags: 0,
        }
    }
}

impl<O> Default for BoSlot<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O> Node for BoSlot<O> {
    fn key(&self) -> u64 {
        self.id
    }
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

fn va_bo_link<D>(s: &mut VaSlot<D>) -> &mut ListLink {
    &mut s.bo_link
}

fn bo_ext_link<O>(s: &mut BoSlot<O>) -> &mut ListLink {
    &mut s.ext
}

fn bo_ev_link<O>(s: &mut BoSlot<O>) -> &mut ListLink {
    &mut s.ev
}

/// Where the VM lives and what it reserves.
///
/// # Examples
///
/// ```
/// use gpuvm::VmConfig;
///
/// // 48-bit VA space, the top 1 GiB kept for the kernel, 4 KiB pages.
/// let cfg = VmConfig::new(0, 1 << 48)
///     .reserve((1 << 48) - (1 << 30), 1 << 30)
///     .align(4096)
///     .resv_id(7);
/// assert_eq!(cfg.range, 1 << 48);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct VmConfig {
    /// First address of the VM.
    pub start: u64,
    /// Size of the VM in bytes.
    pub range: u64,
    /// First address of the kernel-reserved region.
    pub reserve_start: u64,
    /// Size of the kernel-reserved region (0: none).
    pub reserve_range: u64,
    /// Required alignment of addresses, ranges and object offsets (a power of two; 1: none).
    pub align: u64,
    /// The reservation id of the VM's own objects (see [`GemObject::resv_id`]).
    pub resv_id: u64,
}

impl VmConfig {
    /// A VM over `[start, start + range)`, with no reserved region and no alignment.
    pub const fn new(start: u64, range: u64) -> Self {
        VmConfig {
            start,
            range,
            reserve_start: 0,
            reserve_range: 0,
            align: 1,
            resv_id: 0,
        }
    }

    /// Reserves `[start, start + range)` for the kernel.
    pub const fn reserve(mut self, start: u64, range: u64) -> Self {
        self.reserve_start = start;
        self.reserve_range = range;
        self
    }

    /// Requires every address, range and offset to be a multiple of `align`.
    pub const fn align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }

    /// Sets the VM's reservation id.
    pub const fn resv_id(mut self, resv_id: u64) -> Self {
        self.resv_id = resv_id;
        self
    }
}

/// Prints a `u64` in hex (`Debug` of addresses, sizes and alignments).
struct Hex(u64);

impl core::fmt::Debug for Hex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        write!(f, "{:#x}", self.0)
    }
}

/// Addresses, sizes and the alignment in hex.
impl core::fmt::Debug for VmConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        f.debug_struct("VmConfig")
            .field("start", &Hex(self.start))
            .field("range", &Hex(self.range))
            .field("reserve_start", &Hex(self.reserve_start))
            .field("reserve_range", &Hex(self.reserve_range))
            .field("align", &Hex(self.align))
            .field("resv_id", &self.resv_id)
            .finish()
    }
}

/// A mapping: either an existing VA, the request to create one, or a piece of a split VA.
///
/// `Debug` prints addresses, sizes, offsets and flags in hex:
///
/// ```
/// use gpuvm::Mapping;
/// let m = Mapping::<()>::sparse(0x10000, 0x4000);
/// assert_eq!(
///     format!("{m:?}"),
///     "Mapping { addr: 0x10000, range: 0x4000, obj: None, offset: 0x0, flags: 0x0 }"
/// );
/// ```
#[derive(PartialEq, Eq)]
pub struct Mapping<'a, O> {
    /// First GPU virtual address.
    pub addr: u64,
    /// Size in bytes.
    pub range: u64,
    /// The backing GEM object, or `None` for a sparse mapping.
    pub obj: Option<&'a O>,
    /// Byte offset into the object (unused for sparse mappings).
    pub offset: u64,
    /// Driver-defined flags, carried unchanged into remnants of a split.
    pub flags: u32,
}

impl<O: core::fmt::Debug> core::fmt::Debug for Mapping<'_, O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        f.debug_struct("Mapping")
            .field("addr", &Hex(self.addr))
            .field("range", &Hex(self.range))
            .field("obj", &self.obj)
            .field("offset", &Hex(self.offset))
            .field("flags", &Hex(u64::from(self.flags)))
            .finish()
    }
}

impl<O> Clone for Mapping<'_, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<O> Copy for Mapping<'_, O> {}

impl<'a, O> Mapping<'a, O> {
    /// A mapping of `obj` at `offset` over `[addr, addr + range)`.
    pub const fn new(addr: u64, range: u64, obj: &'a O, offset: u64) -> Self {
        Mapping {
            addr,
            range,
            obj: Some(obj),
            offset,
            flags: 0,
        }
    }

    /// A sparse mapping over `[addr, addr + range)`.
    pub const fn sparse(addr: u64, range: u64) -> Self {
        Mapping {
            addr,
            range,
            obj: None,
            offset: 0,
            flags: 0,
        }
    }

    /// The same mapping with `flags`.
    pub const fn with_flags(mut self, flags: u32) -> Self {
        self.flags = flags;
        self
    }

    /// One past the last address (`addr + range`, saturating).
    pub const fn end(&self) -> u64 {
        self.addr.saturating_add(self.range)
    }
}

/// A read-only view of one VA.
pub struct Va<'a, O, D> {
    slot: &'a VaSlot<D>,
    obj: Option<&'a O>,
}

impl<'a, O, D> Va<'a, O, D> {
    pub(crate) fn from_parts(slot: &'a VaSlot<D>, obj: Option<&'a O>) -> Self {
        Va { slot, obj }
    }

    /// First address.
    pub fn addr(&self) -> u64 {
        self.slot.addr
    }

    /// Size in bytes.
    pub fn range(&self) -> u64 {
        self.slot.range
    }

    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.slot.addr + self.slot.range
    }

    /// The backing object, `None` for a sparse VA.
    pub fn obj(&self) -> Option<&'a O> {
        self.obj
    }

    /// Offset into the backing object.
    pub fn offset(&self) -> u64 {
        self.slot.offset
    }

    /// Driver flags.
    pub fn flags(&self) -> u32 {
        self.slot.flags
    }

    /// Whether the VA is sparse (has no backing object).
    pub fn is_sparse(&self) -> bool {
        self.obj.is_none()
    }

    /// The driver data. `None` only for a VA that a VM_BIND batch still plans to create.
    pub fn data(&self) -> Option<&'a D> {
        self.slot.data.as_ref()
    }

    /// The VA as a [`Mapping`].
    pub fn mapping(&self) -> Mapping<'a, O> {
        Mapping {
            addr: self.slot.addr,
            range: self.slot.range,
            obj: self.obj,
            offset: self.slot.offset,
            flags: self.slot.flags,
        }
    }
}

/// The VM's bookkeeping, apart from the slot storage.
pub(crate) struct State {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) reserve_start: u64,
    pub(crate) reserve_end: u64,
    pub(crate) align: u64,
    pub(crate) resv_id: u64,
    pub(crate) tree: Index,
    pub(crate) free_va: u32,
    pub(crate) free_va_count: u32,
    pub(crate) bo_tree: Tree,
    pub(crate) free_bo: u32,
    pub(crate) free_bo_count: u32,
    pub(crate) extobjs: List,
    pub(crate) evicted: List,
    pub(crate) deferred: u32,
    /// A VM_BIND batch is open (or was leaked): every request is refused.
    pub(crate) batch_open: bool,
}

/// Borrowed view of everything the VM owns, with the storage already turned into slices.
pub(crate) struct Core<'a, O, D> {
    pub(crate) vas: &'a mut [VaSlot<D>],
    pub(crate) nodes: &'a mut [IndexNode],
    pub(crate) bos: &'a mut [BoSlot<O>],
    pub(crate) st: &'a mut State,
}

/// A walk over the VAs overlapping a range, kept one VA ahead ([`Core::overlaps`]).
///
/// A step may remove or split the current VA, so the walk learns the next one before the
/// current one is handed to the step.
pub(crate) struct Overlaps {
    /// The VA to process, or `NIL` at the end.
    pub(crate) cur: u32,
    next: u32,
    end: u64,
}

impl Overlaps {
    const DONE: Overlaps = Overlaps {
        cur: NIL,
        next: NIL,
        end: 0,
    };
}

impl<O: GemObject, D> Core<'_, O, D> {
    pub(crate) fn reborrow(&mut self) -> Core<'_, O, D> {
        Core {
            vas: self.vas,
            nodes: self.nodes,
            bos: self.bos,
            st: self.st,
        }
    }

    /// Starts a walk over the VAs overlapping `[addr, end)`, in address order.
    ///
    /// The index keys are the VAs' start addresses, so only the VA starting below `addr` has
    /// its slot read (for its end): a request that overlaps nothing reads at most that slot.
    /// The one search also yields the VA after the first, so a request overlapping one VA
    /// searches once.
    pub(crate) fn overlaps(&mut self, addr: u64, end: u64) -> Overlaps {
        let vas = &*self.vas;
        let [(i, start), (n, next_start)] = self.st.tree.seek_mut(self.nodes, addr, |i| {
            let s = &vas[i as usize];
            s.addr.wrapping_add(s.range)
        });
        if i == NIL || start >= end {
            return Overlaps::DONE;
        }
        Overlaps {
            cur: i,
            next: if n != NIL && next_start < end { n } else { NIL },
            end,
        }
    }

    /// Moves the walk to the next overlapping VA. The current VA may have been changed or
    /// removed since the walk reached it: its successor was found while it was still there.
    pub(crate) fn advance(&mut self, w: &mut Overlaps) {
        w.cur = w.next;
        w.next = if w.cur == NIL {
            NIL
        } else {
            self.next_overlap(w.cur, w.end)
        };
    }

    /// The VA after VA `i` (which is in the tree) if it starts before `end`, or `NIL`, without
    /// reading the next VA's slot.
    fn next_overlap(&mut self, i: u32, end: u64) -> u32 {
        let key = self.vas[i as usize].addr;
        let (n, start) = self.st.tree.next(self.nodes, key);
        if n != NIL && start < end {
            n
        } else {
            NIL
        }
    }

    pub(crate) fn find_bo(&self, obj: &O) -> u32 {
        self.st.bo_tree.find(self.bos, obj.id())
    }

    /// Takes a slot from the VA pool. The caller has checked that the pool is not empty.
    pub(crate) fn alloc_va(&mut self, p: Piece, flags: u32, bo: u32) -> u32 {
        let i = self.st.free_va;
        let slot = &mut self.vas[i as usize];
        self.st.free_va = slot.bo_link.next;
        self.st.free_va_count -= 1;
        slot.addr = p.addr;
        slot.range = p.range;
        slot.offset = p.offset;
        slot.bo = bo;
        slot.bo_link = ListLink::EMPTY;
        slot.flags = flags;
        i
    }

    /// Returns slot `i` (out of the tree and off any VM-BO list) to the pool.
    pub(crate) fn free_va(&mut self, i: u32) -> Option<D> {
        let slot = &mut self.vas[i as usize];
        let data = slot.data.take();
        slot.bo = NIL;
        slot.bo_link = ListLink {
            prev: NIL,
            next: self.st.free_va,
        };
        self.st.free_va = i;
        self.st.free_va_count += 1;
        data
    }

    /// Adds VA `i` (not in the tree) to the tree.
    pub(crate) fn tree_insert(&mut self, i: u32) {
        let key = self.vas[i as usize].addr;
        self.st.tree.insert(self.nodes, key, i);
    }

    /// Puts VA `new` (not in the tree) in the place of VA `old`. The caller guarantees that
    /// `new` starts between the starts of `old`'s neighbours.
    pub(crate) fn tree_replace(&mut self, old: u32, new: u32) {
        let (ko, kn) = (self.vas[old as usize].addr, self.vas[new as usize].addr);
        self.st.tree.replace(self.nodes, ko, kn, new);
    }

    /// Removes VA `i` (in the tree) from the tree.
    pub(crate) fn tree_remove(&mut self, i: u32) {
        let key = self.vas[i as usize].addr;
        self.st.tree.remove(self.nodes, key);
    }

    /// The VM-BO of `obj`, created from the pool if it does not exist. Returns the slot and
    /// whether it was created. The caller has checked that a slot is free if needed.
    pub(crate) fn obtain_bo(&mut self, obj: &O) -> (u32, bool) {
        let found = self.find_bo(obj);
        if found != NIL {
            return (found, false);
        }
        let i = self.st.free_bo;
        let slot = &mut self.bos[i as usize];
        self.st.free_bo = slot.link.left;
        self.st.free_bo_count -= 1;
        *slot = BoSlot {
            id: obj.id(),
            obj: Some(obj.clone()),
            ..BoSlot::new()
        };
        self.st.bo_tree.insert(self.bos, i);
        if obj.resv_id() != self.st.resv_id {
            self.bos[i as usize].flags |= BO_EXTOBJ;
            self.st.extobjs.push_back(self.bos, i, bo_ext_link);
        }
        self.defer_bo(i);
        (i, true)
    }

    /// Removes VM-BO `i` from every structure and returns its slot to the pool.
    pub(crate) fn destroy_bo(&mut self, i: u32) {
        let flags = self.bos[i as usize].flags;
        if flags & BO_EXTOBJ != 0 {
            self.st.extobjs.unlink(self.bos, i, bo_ext_link);
        }
        if flags & BO_EVICTED != 0 {
            self.st.evicted.unlink(self.bos, i, bo_ev_link);
        }
        self.st.bo_tree.remove(self.bos, i);
        let slot = &mut self.bos[i as usize];
        *slot = BoSlot::new();
        slot.link.left = self.st.free_bo;
        self.st.free_bo = i;
        self.st.free_bo_count += 1;
    }

    /// Queues VM-BO `i` for a check at the end of the current operation.
    fn defer_bo(&mut self, i: u32) {
        let slot = &mut self.bos[i as usize];
        if slot.flags & BO_DEFERRED == 0 {
            slot.flags |= BO_DEFERRED;
            slot.deferred_next = self.st.deferred;
            self.st.deferred = i;
        }
    }

    /// Destroys the queued VM-BOs that ended up with no VA.
    #[inline]
    pub(crate) fn cleanup_deferred(&mut self) {
        // Most requests queue none: keep that check in the caller, the loop out of line.
        if self.st.deferred != NIL {
            self.destroy_deferred();
        }
    }

    #[inline(never)]
    fn destroy_deferred(&mut self) {
        while self.st.deferred != NIL {
            let i = self.st.deferred;
            let slot = &mut self.bos[i as usize];
            self.st.deferred = slot.deferred_next;
            slot.deferred_next = NIL;
            slot.flags &= !BO_DEFERRED;
            if slot.vas.len == 0 {
                self.destroy_bo(i);
            }
        }
    }

    pub(crate) fn link_va(&mut self, i: u32) {
        let bo = self.vas[i as usize].bo;
        if bo != NIL {
            let mut list = self.bos[bo as usize].vas;
            list.push_back(self.vas, i, va_bo_link);
            self.bos[bo as usize].vas = list;
        }
    }

    pub(crate) fn unlink_va(&mut self, i: u32) {
        let bo = self.vas[i as usize].bo;
        if bo != NIL {
            let mut list = self.bos[bo as usize].vas;
            list.unlink(self.vas, i, va_bo_link);
            self.bos[bo as usize].vas = list;
            if list.len == 0 {
                self.defer_bo(bo);
            }
        }
    }

    pub(crate) fn obj_of(&self, bo: u32) -> Option<&O> {
        if bo == NIL {
            None
        } else {
            self.bos[bo as usize].obj.as_ref()
        }
    }
}

#[inline]
pub(crate) fn check_range(st: &State, addr: u64, range: u64) -> Result<u64, Error> {
    if range == 0 {
        return Err(Error::ZeroRange);
    }
    let end = addr.checked_add(range).ok_or(Error::Overflow)?;
    if addr < st.start || end > st.end {
        return Err(Error::OutOfVm);
    }
    if st.reserve_start < st.reserve_end && addr < st.reserve_end && st.reserve_start < end {
        return Err(Error::KernelReserved);
    }
    if (addr | range) & (st.align - 1) != 0 {
        return Err(Error::Misaligned);
    }
    Ok(end)
}

/// A GPU virtual address space.
///
/// `O` is the driver's GEM object type, `D` the driver data stored in each VA, `VS` and `BS`
/// the storage of the VA and VM-BO slots, `NS` the storage of the address index's nodes (by
/// default the kind the VA storage names, [`Storage::Nodes`], which [`Gpuvm::new`] uses;
/// [`Gpuvm::with_nodes`] takes any).
///
/// # Invariants
///
/// - The VAs in the address tree do not overlap, lie inside the VM and outside the reserved
///   region; every VA slot is either in the tree, in the free pool, or held by a VM_BIND batch.
/// - The node storage holds at least [`IndexNode::needed`]`(n)` nodes for `n` VA slots; every
///   node is in the index or in its free pool.
/// - A VM-BO exists for an object exactly while it has at least one VA (outside of an
///   operation in progress), and there is at most one per object.
///
/// # Examples
///
/// ```
/// use gpuvm::{BoSlot, Gpuvm, Mapping, VaSlot, VmConfig};
/// # #[derive(Clone)] struct Bo(u64);
/// # impl gpuvm::GemObject for Bo {
/// #     fn id(&self) -> u64 { self.0 }
/// #     fn size(&self) -> u64 { 1 << 20 }
/// #     fn resv_id(&self) -> u64 { 0 }
/// # }
///
/// let vas: [VaSlot<()>; 8] = core::array::from_fn(|_| VaSlot::new());
/// let bos: [BoSlot<Bo>; 2] = core::array::from_fn(|_| BoSlot::new());
/// let mut vm = Gpuvm::new(VmConfig::new(0x1000, 0x10_0000), vas, bos)?;
/// assert_eq!(vm.va_range(), 0x1000..0x10_1000);
/// assert_eq!(vm.free_vas(), 8);
/// assert!(vm.is_empty());
/// # Ok::<(), gpuvm::Error>(())
/// ```
pub struct Gpuvm<O, D, VS, BS, NS = <VS as Storage<VaSlot<D>>>::Nodes>
where
    VS: Storage<VaSlot<D>>,
{
    pub(crate) vas: VS,
    pub(crate) bos: BS,
    pub(crate) nodes: NS,
    pub(crate) st: State,
    _p: PhantomData<fn() -> (O, D)>,
}

impl<O, D, VS, BS> Gpuvm<O, D, VS, BS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
{
    /// Creates a VM with `config`, taking every slot of `vas` and `bos` into its pools; the
    /// address index keeps its nodes in [`Storage::new_nodes`] of `vas`, sized for as many
    /// VAs as `vas` holds.
    ///
    /// Fails like [`Gpuvm::with_nodes`].
    pub fn new(config: VmConfig, vas: VS, bos: BS) -> Result<Self, Error> {
        let nodes = vas.new_nodes();
        Self::with_nodes(config, vas, bos, nodes)
    }
}

impl<O, D, VS, BS, NS> Gpuvm<O, D, VS, BS, NS>
where
    O: GemObject,
    VS: Storage<VaSlot<D>>,
    BS: Storage<BoSlot<O>>,
    NS: Storage<IndexNode>,
{
    /// Creates a VM with `config`, taking every slot of `vas` and `bos` into its pools, with
    /// the address index's nodes in `nodes`.
    ///
    /// A VM with `n` VA slots needs [`IndexNode::needed`]`(n)` index nodes (about `n / 7`);
    /// `nodes` grows to that size if it is smaller.
    ///
    /// Fails with [`Error::InvalidConfig`] if the VM is empty or overflows, the alignment is not
    /// a power of two, or the reserved region does not lie inside the VM; with
    /// [`Error::NoMemory`] if a storage holds `u32::MAX` slots or more, or `nodes` is too
    /// small and cannot grow.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Error, Gpuvm, IndexNode, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo;
    /// # impl gpuvm::GemObject for Bo {
    /// #     fn id(&self) -> u64 { 0 } fn size(&self) -> u64 { 0 } fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// type Vm = Gpuvm<Bo, (), [VaSlot<()>; 64], [BoSlot<Bo>; 4], [IndexNode; 11]>;
    /// assert_eq!(IndexNode::needed(64), 11);
    /// let vas = core::array::from_fn(|_| VaSlot::new());
    /// let bos = core::array::from_fn(|_| BoSlot::new());
    /// let vm: Vm = Gpuvm::with_nodes(VmConfig::new(0, 1 << 32), vas, bos, [IndexNode::new(); 11])?;
    /// assert_eq!(vm.free_vas(), 64);
    /// // Too few nodes for the VA slots, and a fixed array cannot grow.
    /// let vas: [VaSlot<()>; 64] = core::array::from_fn(|_| VaSlot::new());
    /// let bos: [BoSlot<Bo>; 1] = [BoSlot::new()];
    /// let too_few = [IndexNode::new(); 10];
    /// assert!(matches!(Gpuvm::with_nodes(VmConfig::new(0, 1 << 32), vas, bos, too_few), Err(Error::NoMemory)));
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn with_nodes(config: VmConfig, vas: VS, bos: BS, mut nodes: NS) -> Result<Self, Error> {
        let end = config
            .start
            .checked_add(config.range)
            .ok_or(Error::InvalidConfig)?;
        let reserve_end = config
            .reserve_start
            .checked_add(config.reserve_range)
            .ok_or(Error::InvalidConfig)?;
        if config.range == 0 || !config.align.is_power_of_two() {
            return Err(Error::InvalidConfig);
        }
        if config.reserve_range != 0 && (config.reserve_start < config.start || reserve_end > end) {
            return Err(Error::InvalidConfig);
        }
        let nv = vas.as_slice().len();
        if nv >= NIL as usize || bos.as_slice().len() >= NIL as usize {
            return Err(Error::NoMemory);
        }
        let have = nodes.as_slice().len();
        let need = nodes_for(nv);
        if need > have {
            nodes.try_grow(need - have, IndexNode::new)?;
        }
        if nodes.as_slice().len() < need || nodes.as_slice().len() >= NIL as usize {
            return Err(Error::NoMemory);
        }
        let mut vm = Gpuvm {
            vas,
            bos,
            nodes,
            st: State {
                start: config.start,
                end,
                reserve_start: config.reserve_start,
                reserve_end: if config.reserve_range == 0 {
                    config.reserve_start
                } else {
                    reserve_end
                },
                align: config.align,
                resv_id: config.resv_id,
                tree: Index::EMPTY,
                free_va: NIL,
                free_va_count: 0,
                bo_tree: Tree::EMPTY,
                free_bo: NIL,
                free_bo_count: 0,
                extobjs: List::EMPTY,
                evicted: List::EMPTY,
                deferred: NIL,
                batch_open: false,
            },
            _p: PhantomData,
        };
        let nn = vm.nodes.as_slice().len() as u32;
        // The top 1/16 of the nodes serve the index's inner nodes first, so that the upper
        // levels sit together: the pool has about one node per 7 VA slots, and a tree of
        // leaves two-thirds full needs about one inner node per 110 VAs.
        vm.st.tree.set_inner_range(nn - nn / 16, nn);
        vm.pool_new_nodes(0);
        for i in (0..nv as u32).rev() {
            vm.vas.as_mut_slice()[i as usize] = VaSlot::new();
            vm.core().free_va(i);
        }
        let nb = vm.bos.as_slice().len() as u32;
        for i in (0..nb).rev() {
            let slot = &mut vm.bos.as_mut_slice()[i as usize];
            *slot = BoSlot::new();
            slot.link.left = vm.st.free_bo;
            vm.st.free_bo = i;
            vm.st.free_bo_count += 1;
        }
        Ok(vm)
    }

    pub(crate) fn core(&mut self) -> Core<'_, O, D> {
        Core {
            vas: self.vas.as_mut_slice(),
            nodes: self.nodes.as_mut_slice(),
            bos: self.bos.as_mut_slice(),
            st: &mut self.st,
        }
    }

    /// Makes sure at least `vas` VA slots and `bos` VM-BO slots are free, growing the storage if
    /// needed. On failure no mapping changes (a pool that did grow keeps its new slots).
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Error, Gpuvm, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo;
    /// # impl gpuvm::GemObject for Bo {
    /// #     fn id(&self) -> u64 { 0 } fn size(&self) -> u64 { 0 } fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// let vas: [VaSlot<()>; 4] = core::array::from_fn(|_| VaSlot::new());
    /// let bos: [BoSlot<Bo>; 1] = [BoSlot::new()];
    /// let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 32), vas, bos)?;
    /// assert_eq!(vm.reserve(4, 1), Ok(()));
    /// // A fixed array cannot grow.
    /// assert_eq!(vm.reserve(5, 1), Err(Error::NoMemory));
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn reserve(&mut self, vas: u32, bos: u32) -> Result<(), Error> {
        let need_va = vas.saturating_sub(self.st.free_va_count);
        let need_bo = bos.saturating_sub(self.st.free_bo_count);
        let old_v = self.vas.as_slice().len();
        let old_b = self.bos.as_slice().len();
        if old_v + need_va as usize >= NIL as usize || old_b + need_bo as usize >= NIL as usize {
            return Err(Error::NoMemory);
        }
        if need_va > 0 {
            // Nodes first: VA slots are only pooled once the index can hold them.
            let old_n = self.nodes.as_slice().len();
            let need_n = nodes_for(old_v + need_va as usize);
            if need_n > old_n {
                if need_n >= NIL as usize {
                    return Err(Error::NoMemory);
                }
                self.nodes.try_grow(need_n - old_n, IndexNode::new)?;
                self.pool_new_nodes(old_n);
                if self.nodes.as_slice().len() < need_n {
                    return Err(Error::NoMemory);
                }
            }
            self.vas.try_grow(need_va as usize, VaSlot::new)?;
        }
        if need_bo > 0 {
            if let Err(e) = self.bos.try_grow(need_bo as usize, BoSlot::new) {
                // The grown VA slots are simply pooled: the VM stays valid, only larger.
                self.pool_new_vas(old_v);
                return Err(e);
            }
        }
        self.pool_new_vas(old_v);
        let nb = self.bos.as_slice().len();
        for i in (old_b..nb).rev() {
            let slot = &mut self.bos.as_mut_slice()[i];
            slot.link.left = self.st.free_bo;
            self.st.free_bo = i as u32;
            self.st.free_bo_count += 1;
        }
        Ok(())
    }

    fn pool_new_vas(&mut self, old: usize) {
        let n = self.vas.as_slice().len();
        for i in (old..n).rev() {
            self.core().free_va(i as u32);
        }
    }

    fn pool_new_nodes(&mut self, old: usize) {
        let n = self.nodes.as_slice().len();
        for i in (old..n).rev() {
            self.st.tree.add_node(self.nodes.as_mut_slice(), i as u32);
        }
    }

    /// Fails with [`Error::Busy`] while a VM_BIND batch is open (only possible if one was
    /// leaked with `mem::forget`).
    pub(crate) fn check_idle(&self) -> Result<(), Error> {
        if self.st.batch_open {
            Err(Error::Busy)
        } else {
            Ok(())
        }
    }

    /// Number of free VA slots in the pool.
    pub fn free_vas(&self) -> u32 {
        self.st.free_va_count
    }

    /// Number of free VM-BO slots in the pool.
    pub fn free_bos(&self) -> u32 {
        self.st.free_bo_count
    }

    /// The address range the VM covers.
    pub fn va_range(&self) -> Range<u64> {
        self.st.start..self.st.end
    }

    /// The kernel-reserved range (empty if there is none).
    pub fn reserved_range(&self) -> Range<u64> {
        self.st.reserve_start..self.st.reserve_end
    }

    /// Whether `[addr, addr + range)` is a valid request range for this VM.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Error, Gpuvm, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo;
    /// # impl gpuvm::GemObject for Bo {
    /// #     fn id(&self) -> u64 { 0 } fn size(&self) -> u64 { 0 } fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// let cfg = VmConfig::new(0, 1 << 20).reserve(0xf_0000, 0x1_0000).align(0x1000);
    /// let vm = Gpuvm::<Bo, (), _, _>::new(cfg, [VaSlot::new()], [BoSlot::new()])?;
    /// assert_eq!(vm.check_range(0x1000, 0x1000), Ok(()));
    /// assert_eq!(vm.check_range(0x1000, 0), Err(Error::ZeroRange));
    /// assert_eq!(vm.check_range(u64::MAX, 2), Err(Error::Overflow));
    /// assert_eq!(vm.check_range(0xff000, 0x2000), Err(Error::OutOfVm));
    /// assert_eq!(vm.check_range(0xef000, 0x2000), Err(Error::KernelReserved));
    /// assert_eq!(vm.check_range(0x1800, 0x1000), Err(Error::Misaligned));
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn check_range(&self, addr: u64, range: u64) -> Result<(), Error> {
        check_range(&self.st, addr, range).map(|_| ())
    }

    /// Whether `obj` is external to this VM (its reservation is not the VM's).
    pub fn is_extobj(&self, obj: &O) -> bool {
        obj.resv_id() != self.st.resv_id
    }

    /// Number of VAs.
    pub fn len(&self) -> usize {
        self.st.tree.len as usize
    }

    /// Whether the VM has no VA.
    pub fn is_empty(&self) -> bool {
        self.st.tree.len == 0
    }

    fn va(&self, i: u32) -> Va<'_, O, D> {
        let slot = &self.vas.as_slice()[i as usize];
        let obj = if slot.bo == NIL {
            None
        } else {
            self.bos.as_slice()[slot.bo as usize].obj.as_ref()
        };
        Va { slot, obj }
    }

    /// All VAs in address order.
    pub fn iter(&self) -> impl Iterator<Item = Va<'_, O, D>> + '_ {
        let first = self.st.tree.first(self.nodes.as_slice());
        self.walk(first, u64::MAX)
    }

    /// The VAs overlapping `[addr, addr + range)`, in address order.
    pub fn iter_range(&self, addr: u64, range: u64) -> impl Iterator<Item = Va<'_, O, D>> + '_ {
        let end = addr.saturating_add(range);
        let first = if range == 0 {
            Cursor::END
        } else {
            let vas = self.vas.as_slice();
            self.st.tree.seek(self.nodes.as_slice(), addr, |i| {
                let s = &vas[i as usize];
                s.addr.wrapping_add(s.range)
            })
        };
        self.walk(first, end)
    }

    fn walk(&self, first: Cursor, end: u64) -> impl Iterator<Item = Va<'_, O, D>> + '_ {
        let slots = self.vas.as_slice();
        let nodes = self.nodes.as_slice();
        let mut cur = first;
        core::iter::from_fn(move || {
            let i = self.st.tree.get(nodes, cur);
            if i == NIL || slots[i as usize].addr >= end {
                return None;
            }
            cur = self.st.tree.advance(nodes, cur);
            Some(self.va(i))
        })
    }

    /// The VA that starts exactly at `addr` and covers exactly `range` bytes.
    pub fn find(&self, addr: u64, range: u64) -> Option<Va<'_, O, D>> {
        let i = self.st.tree.find(self.nodes.as_slice(), addr);
        (i != NIL && self.vas.as_slice()[i as usize].range == range).then(|| self.va(i))
    }

    /// The VA containing `addr`.
    pub fn find_containing(&self, addr: u64) -> Option<Va<'_, O, D>> {
        self.iter_range(addr, 1).next()
    }

    /// The driver data of the VA starting at `addr`.
    pub fn data_mut(&mut self, addr: u64) -> Option<&mut D> {
        let i = self.st.tree.find(self.nodes.as_slice(), addr);
        if i == NIL {
            return None;
        }
        self.vas.as_mut_slice()[i as usize].data.as_mut()
    }

    /// The VM-BO of `obj`, if `obj` has VAs in this VM.
    pub fn vm_bo(&self, obj: &O) -> Option<VmBo<'_, O, D>> {
        let i = self.st.bo_tree.find(self.bos.as_slice(), obj.id());
        if i == NIL {
            None
        } else {
            self.bo_view(i)
        }
    }

    /// All VM-BOs, ordered by object id.
    pub fn vm_bos(&self) -> impl Iterator<Item = VmBo<'_, O, D>> + '_ {
        let bos = self.bos.as_slice();
        let mut cur = self.st.bo_tree.first(bos);
        core::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let i = cur;
            cur = self.st.bo_tree.next(bos, cur);
            self.bo_view(i)
        })
    }

    fn bo_view(&self, i: u32) -> Option<VmBo<'_, O, D>> {
        let slot = &self.bos.as_slice()[i as usize];
        Some(VmBo {
            slot,
            obj: slot.obj.as_ref()?,
            vas: self.vas.as_slice(),
            #[cfg(test)]
            i,
        })
    }

    fn list_iter(&self, head: u32, ev: bool) -> impl Iterator<Item = &O> + '_ {
        let bos = self.bos.as_slice();
        let mut cur = head;
        core::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let slot = &bos[cur as usize];
            cur = if ev { slot.ev.next } else { slot.ext.next };
            slot.obj.as_ref()
        })
    }

    /// The external objects, in the order they were first bound.
    pub fn extobjs(&self) -> impl Iterator<Item = &O> + '_ {
        self.list_iter(self.st.extobjs.head, false)
    }

    /// The objects marked evicted, in the order they were marked.
    pub fn evicted(&self) -> impl Iterator<Item = &O> + '_ {
        self.list_iter(self.st.evicted.head, true)
    }

    /// Marks `obj` evicted (puts its VM-BO on the evicted list) or valid again.
    ///
    /// Fails with [`Error::NotFound`] if `obj` has no VA in this VM.
    pub fn bo_evict(&mut self, obj: &O, evicted: bool) -> Result<(), Error> {
        let bos = self.bos.as_mut_slice();
        let i = self.st.bo_tree.find(bos, obj.id());
        if i == NIL {
            return Err(Error::NotFound);
        }
        let is = bos[i as usize].flags & BO_EVICTED != 0;
        if evicted && !is {
            bos[i as usize].flags |= BO_EVICTED;
            self.st.evicted.push_back(bos, i, bo_ev_link);
        } else if !evicted && is {
            bos[i as usize].flags &= !BO_EVICTED;
            self.st.evicted.unlink(bos, i, bo_ev_link);
        }
        Ok(())
    }

    /// Calls `f` on each evicted object in list order; each one for which `f` succeeds leaves
    /// the evicted list. Stops at the first error and returns it.
    ///
    /// # Examples
    ///
    /// ```
    /// use gpuvm::{BoSlot, Gpuvm, Mapping, VaSlot, VmConfig};
    /// # #[derive(Clone)] struct Bo(u64);
    /// # impl gpuvm::GemObject for Bo {
    /// #     fn id(&self) -> u64 { self.0 } fn size(&self) -> u64 { 0x1000 }
    /// #     fn resv_id(&self) -> u64 { 0 }
    /// # }
    /// # let vas: [VaSlot<()>; 8] = core::array::from_fn(|_| VaSlot::new());
    /// # let bos: [BoSlot<Bo>; 2] = core::array::from_fn(|_| BoSlot::new());
    /// # let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), vas, bos)?;
    /// let (a, b) = (Bo(1), Bo(2));
    /// vm.map(Mapping::new(0x0000, 0x1000, &a, 0), ())?;
    /// vm.map(Mapping::new(0x1000, 0x1000, &b, 0), ())?;
    /// vm.bo_evict(&b, true)?;
    /// vm.bo_evict(&a, true)?;
    /// let mut order = Vec::new();
    /// vm.validate(|bo| { order.push(bo.0); Ok::<(), ()>(()) }).unwrap();
    /// assert_eq!(order, [2, 1]);
    /// assert_eq!(vm.evicted().count(), 0);
    /// # Ok::<(), gpuvm::Error>(())
    /// ```
    pub fn validate<E>(&mut self, mut f: impl FnMut(&O) -> Result<(), E>) -> Result<(), E> {
        loop {
            let i = self.st.evicted.head;
            if i == NIL {
                return Ok(());
            }
            let bos = self.bos.as_mut_slice();
            if let Some(obj) = bos[i as usize].obj.as_ref() {
                f(obj)?;
            }
            bos[i as usize].flags &= !BO_EVICTED;
            self.st.evicted.unlink(bos, i, bo_ev_link);
        }
    }

    /// Checks every internal invariant (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let vas = self.vas.as_slice();
        let bos = self.bos.as_slice();
        self.st
            .tree
            .check(self.nodes.as_slice(), |i| vas[i as usize].addr);
        assert!(
            self.nodes.as_slice().len() >= nodes_for(vas.len()),
            "node storage too small"
        );
        self.st.bo_tree.check(bos);
        let mut prev_end = self.st.start;
        let mut per_bo = std::collections::BTreeMap::<u32, u32>::new();
        for va in self.iter() {
            assert!(va.addr() >= prev_end, "overlap or out of VM");
            prev_end = va.end();
            assert!(va.data().is_some());
            if va.slot.bo != NIL {
                *per_bo.entry(va.slot.bo).or_default() += 1;
            }
        }
        assert!(prev_end <= self.st.end);
        assert_eq!(self.st.deferred, NIL);
        let mut live_bos = 0;
        for bo in self.vm_bos() {
            live_bos += 1;
            assert_eq!(
                per_bo.get(&bo.i).copied().unwrap_or(0),
                bo.va_count() as u32
            );
            assert!(bo.va_count() > 0, "empty VM-BO kept");
            assert_eq!(bo.is_extobj(), self.is_extobj(bo.obj()));
            for va in bo.vas() {
                assert_eq!(va.obj().map(|o| o.id()), Some(bo.obj().id()));
            }
        }
        assert_eq!(per_bo.len(), live_bos);
        assert_eq!(self.extobjs().count(), self.st.extobjs.len as usize);
        assert_eq!(
            self.vm_bos().filter(|b| b.is_extobj()).count(),
            self.st.extobjs.len as usize
        );
        assert_eq!(
            self.st.free_va_count as usize + self.len(),
            vas.len(),
            "VA slot leaked"
        );
        assert_eq!(
            self.st.free_bo_count as usize + live_bos,
            bos.len(),
            "VM-BO slot leaked"
        );
    }
}

/// A read-only view of one VM-BO: the pair (VM, object).
pub struct VmBo<'a, O, D> {
    slot: &'a BoSlot<O>,
    obj: &'a O,
    vas: &'a [VaSlot<D>],
    #[cfg(test)]
    i: u32,
}

impl<'a, O: GemObject, D> VmBo<'a, O, D> {
    /// The GEM object.
    pub fn obj(&self) -> &'a O {
        self.obj
    }

    /// Number of VAs of this object in the VM.
    pub fn va_count(&self) -> usize {
        self.slot.vas.len as usize
    }

    /// Whether the object is on the VM's external-object list.
    pub fn is_extobj(&self) -> bool {
        self.slot.flags & BO_EXTOBJ != 0
    }

    /// Whether the object is on the VM's evicted list.
    pub fn is_evicted(&self) -> bool {
        self.slot.flags & BO_EVICTED != 0
    }

    /// The object's VAs in this VM, in the order they were created.
    pub fn vas(&self) -> impl Iterator<Item = Va<'a, O, D>> + 'a {
        let vas = self.vas;
        let obj = Some(self.obj);
        let mut cur = self.slot.vas.head;
        core::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let slot = &vas[cur as usize];
            cur = slot.bo_link.next;
            Some(Va { slot, obj })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn slot_sizes_match_the_documented_memory_cost() {
        // 40 bytes of VA and `Option<D>`; the index nodes live in their own storage.
        assert_eq!(size_of::<crate::btree::Node>(), 200);
        assert_eq!(size_of::<VaSlot<()>>(), 48);
        assert_eq!(size_of::<VaSlot<u32>>(), 48);
        assert_eq!(size_of::<VaSlot<u64>>(), 56);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<VaSlot<&u8>>(), 48);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(size_of::<BoSlot<&u8>>(), 72);
        assert_eq!(size_of::<crate::OpEntry>(), 16);
    }

    #[derive(Clone)]
    struct Bo;

    impl GemObject for Bo {
        fn id(&self) -> u64 {
            1
        }
        fn size(&self) -> u64 {
            1 << 40
        }
        fn resv_id(&self) -> u64 {
            0
        }
    }

    /// The node storage use the module docs state: 14 bytes per VA for VAs created in address
    /// order, about 20 after random churn, never more than the storage sized for the slots.
    #[test]
    fn index_memory_per_va_matches_the_docs() {
        const P: u64 = 0x1000;
        // Small trees round up (a part-filled last leaf, the root): Miri's gets more slack.
        let (n, seq_max, churn_max): (u64, f64, f64) = if cfg!(miri) {
            (200, 16.0, 24.0)
        } else {
            (3000, 15.0, 22.0)
        };
        // Two spare slots: a map needs two free ones.
        let mut vas: std::vec::Vec<VaSlot<()>> = (0..n + 2).map(|_| VaSlot::new()).collect();
        let mut bos = [BoSlot::new()];
        let mut nodes = std::vec![IndexNode::new(); IndexNode::needed(vas.len())];
        let mut vm = Gpuvm::with_nodes(
            VmConfig::new(0, 1 << 40).align(P),
            vas.as_mut_slice(),
            bos.as_mut_slice(),
            nodes.as_mut_slice(),
        )
        .unwrap();
        let bo = Bo;
        let in_use = |vm: &Gpuvm<Bo, (), _, _, &mut [IndexNode]>| {
            vm.nodes.as_slice().len() - vm.st.tree.free_nodes(vm.nodes.as_slice())
        };
        for i in 0..n {
            vm.map(Mapping::new(2 * i * P, P, &bo, 0), ()).unwrap();
        }
        let bytes = |used: usize| (used * size_of::<IndexNode>()) as f64 / n as f64;
        let sequential = bytes(in_use(&vm));
        assert!(sequential < seq_max, "{sequential} bytes per VA");
        // Random churn: flip random pages in [0, 2n), keeping at most n VAs.
        let mut x = 1u64;
        for _ in 0..if cfg!(miri) { 5 * n } else { 20 * n } {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = ((x >> 33) % (2 * n)) * P;
            if vm.find(a, P).is_some() {
                vm.unmap(a, P).unwrap();
            } else if (vm.len() as u64) < n {
                vm.map(Mapping::new(a, P, &bo, 0), ()).unwrap();
            }
        }
        let churned = in_use(&vm) * size_of::<IndexNode>();
        let per_va = churned as f64 / vm.len() as f64;
        assert!(per_va < churn_max, "{per_va} bytes per VA");
        assert!(in_use(&vm) <= IndexNode::needed(vm.len()));
        std::println!("index: {sequential:.1} bytes/VA in address order, {per_va:.1} after churn");
        vm.check_invariants();
    }
}
