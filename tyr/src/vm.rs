// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GPU virtual address spaces and VM_BIND.
//!
//! Each VM is a GPU virtual address space: a `gpuvm` [`Gpuvm`] that records which ranges map
//! which buffer objects, and an `io-pgtable` ARM_64_LPAE_S1 page table ([`PageTable`]) that the
//! GPU's MMU walks. The top of the address space is reserved for the kernel (at least 256 MiB,
//! a power of two, as panthor lays it out: [`VmLayout`]); userspace binds below it.
//!
//! A `VM_BIND` is all or nothing ([`Vm::bind`]):
//!
//! 1. every request is checked (alignment, kernel region, BO bounds, private BOs) and planned
//!    with [`Gpuvm::bind`], which computes the map, remap and unmap steps against the VM as
//!    the earlier requests leave it;
//! 2. the page-table pages the plan can need are counted and allocated into a pool
//!    ([`PtMem`]) — this is the only step that allocates;
//! 3. if the VM has an address space, the covered region is locked ([`MmuUpdate`]);
//! 4. the plan is committed: the page tables are written from the pool only (4K pages and 2M
//!    blocks chosen by alignment, by `io-pgtable`), then the region is unlocked.
//!
//! A failure in steps 1 to 3 drops the plan, which leaves the VM exactly as it was.
//!
//! Sparse binds ([`BindReq::MapSparse`], `DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE`) are `gpuvm`
//! VAs without an object. Their page-table entries point into one 2 MiB object, the VM's
//! sparse backing ([`Vm::set_sparse_backing`]), over and over: address `va` of a sparse range
//! is backed by byte `va % 2M` of it. The GPU cannot drop writes, so whatever it writes into a
//! sparse range lands there, and reads return it (or anything else written to the same
//! offset). Splitting a sparse VA (an unmap or a map over part of it) leaves remnants that are
//! sparse too, backed the same way.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use gpuvm::{
    BoSlot, CommitOps, GemObject, Gpuvm, Mapping, Op, OpEntry, OpMap, OpMapped, OpRemap,
    OpRemapped, OpUnmap, OpUnmapped, SmOps, Storage, VaSlot, VmConfig,
};
use io_pgtable::regs::MaliAsRegs;
use io_pgtable::{
    Arm64LpaeS1, Config as PtConfig, NoFlush, PageTable, Prot, TableAlloc, TableMem, SZ_2M, SZ_4K,
};

use drm_ctx::mem::Allocator;

use crate::backend::{DmaMemory, PAGE_SIZE};
use crate::{env, uapi};
use crate::{Error, Result};

/// The kernel keeps at least this much of every VM.
pub const MIN_KERNEL_VA_SIZE: u64 = 1 << 28;
/// Granule of the driver's own mappings in a VM's kernel region (ring buffers and sync
/// objects of one group fit in one).
pub const KERNEL_CHUNK: u64 = 1 << 20;
/// Number of kernel chunks a VM hands out.
const KERNEL_CHUNKS: usize = (MIN_KERNEL_VA_SIZE / KERNEL_CHUNK) as usize;

/// How a VM's address space is split between userspace and the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmLayout {
    /// Size of the whole address space (`1 << va_bits`).
    pub full_range: u64,
    /// First address of the kernel region; userspace owns `[0, kernel_start)`.
    pub kernel_start: u64,
    /// Size of the kernel region (a power of two).
    pub kernel_range: u64,
}

impl VmLayout {
    /// The layout for an MMU with `va_bits` virtual-address bits and a requested user range
    /// (0 for the default: everything but the minimum kernel region).
    ///
    /// # Examples
    ///
    /// ```
    /// use tyr::vm::VmLayout;
    ///
    /// let l = VmLayout::new(48, 0).unwrap();
    /// assert_eq!((l.kernel_start, l.kernel_range), ((1 << 48) - (1 << 28), 1 << 28));
    /// let l = VmLayout::new(48, 1 << 32).unwrap();
    /// assert_eq!(l.kernel_start, 1 << 47); // the kernel range is rounded down to a power of two
    /// assert!(VmLayout::new(48, 1 << 48).is_err());
    /// ```
    pub fn new(va_bits: u32, requested_user_range: u64) -> Result<Self> {
        if !(32..=52).contains(&va_bits) {
            return Err(Error::Invalid);
        }
        let full_range = 1u64 << va_bits;
        let max_user = full_range - MIN_KERNEL_VA_SIZE;
        let user = if requested_user_range != 0 {
            requested_user_range
        } else {
            max_user
        };
        if user > max_user {
            return Err(Error::Invalid);
        }
        let rest = full_range - user;
        let kernel_range = 1u64 << (63 - rest.leading_zeros());
        Ok(VmLayout {
            full_range,
            kernel_start: full_range - kernel_range,
            kernel_range,
        })
    }
}

/// A buffer object as a VM sees it: a `gpuvm` object with contiguous memory.
pub trait BoBacking: GemObject {
    /// Device address of the first byte of the object's memory.
    fn dma_addr(&self) -> u64;

    /// Key of the VM the object is private to, or 0.
    fn exclusive_vm(&self) -> u64 {
        0
    }
}

/// Where a VM keeps its `gpuvm` slots.
pub trait VmSlots<O> {
    /// VA slots.
    type Vas: Storage<VaSlot<()>>;
    /// VM-BO slots.
    type Bos: Storage<BoSlot<O>>;
    /// Op entries of one bind.
    type Ops: Storage<OpEntry>;

    /// Empty VA storage.
    fn vas() -> Self::Vas;
    /// Empty VM-BO storage.
    fn bos() -> Self::Bos;
    /// Empty op storage.
    fn ops() -> Self::Ops;
}

/// Slot storage in [`env::Vec`]s that grow fallibly, with memory from `A`.
pub struct EnvSlots<A>(PhantomData<fn() -> A>);

impl<O, A: Allocator> VmSlots<O> for EnvSlots<A> {
    type Vas = env::Vec<VaSlot<()>, A>;
    type Bos = env::Vec<BoSlot<O>, A>;
    type Ops = env::Vec<OpEntry, A>;

    fn vas() -> Self::Vas {
        env::Vec::new()
    }
    fn bos() -> Self::Bos {
        env::Vec::new()
    }
    fn ops() -> Self::Ops {
        env::Vec::new()
    }
}

/// Page-table pages (4 KiB each) the VMs of one file may hold together: 16,384 pages, 64 MiB.
///
/// Panthor has no such limit: its page tables come from the kernel's page allocator on demand
/// and a client can make it allocate hundreds of MiB with one sparse bind (a 128 TiB
/// `MAP_SPARSE` needs 131,000 table pages, 513 MiB) that no cgroup sees. This budget is what
/// every page table of a file's VMs holds, the pages set aside for queued binds included; a
/// bind that would exceed it fails with `ENOMEM` before anything changes, and the pages come
/// back when the tables are freed (an unmap that empties them, a VM that goes away).
///
/// 64 MiB is far more than a client needs: a level-3 table maps 2 MiB of 4 KiB pages and a
/// level-2 table 1 GiB of 2 MiB blocks, so it holds, for example, 16 GiB of 4 KiB mappings
/// (8,200 pages) together with 8 TiB of sparse ranges backed by 2 MiB blocks (8,200 pages),
/// or one 15 TiB sparse range, across up to 32 VMs (one root table each). It is an eighth of
/// what one 128 TiB sparse bind would take.
pub const MAX_PT_PAGES_PER_FILE: usize = 16_384;

/// What page-table pages are charged to.
pub trait PtAccount {
    /// Takes `pages` more pages.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if they do not fit; nothing is taken then.
    fn charge(&self, pages: usize) -> Result;
    /// Gives back `pages` pages.
    fn uncharge(&self, pages: usize);
}

/// An account without a limit (the MCU's VM, unit tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlimited;

impl PtAccount for Unlimited {
    fn charge(&self, _pages: usize) -> Result {
        Ok(())
    }
    fn uncharge(&self, _pages: usize) {}
}

/// The page-table pages a client's VMs hold together, at most a limit
/// ([`MAX_PT_PAGES_PER_FILE`] for a file).
#[derive(Debug)]
pub struct PtBudget {
    used: AtomicUsize,
    limit: usize,
}

impl PtBudget {
    /// An empty budget of `limit` pages.
    pub const fn new(limit: usize) -> Self {
        PtBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// Pages held.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The limit in pages.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for PtBudget {
    fn default() -> Self {
        Self::new(MAX_PT_PAGES_PER_FILE)
    }
}

impl PtAccount for PtBudget {
    fn charge(&self, pages: usize) -> Result {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(pages).filter(|t| *t <= self.limit)
            })
            .map(|_| ())
            .map_err(|_| Error::NoMemory)
    }

    fn uncharge(&self, pages: usize) {
        // Never below zero, whatever a caller does.
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(pages))
            });
    }
}

impl<T: PtAccount, A: Allocator> PtAccount for env::Arc<T, A> {
    fn charge(&self, pages: usize) -> Result {
        (**self).charge(pages)
    }
    fn uncharge(&self, pages: usize) {
        (**self).uncharge(pages)
    }
}

/// Page-table memory: pages from DMA memory, handed out from a pool filled beforehand.
///
/// Free pages of the pool are linked through their first word; a page leaves the pool zeroed.
/// The list is changed only with `lock` held, so page tables updated from several threads at
/// once (disjoint ranges, see `map_pages_shared`) never get the same page.
///
/// # Invariants
///
/// Every page in the pool is a live `alloc_page` page of `dma`, zero except for its first word;
/// `head` and the links are only changed with `lock` held.
pub struct PtMem<D: DmaMemory, C: PtAccount = Unlimited> {
    dma: D,
    /// What every page the pool holds (in it, or in the page table) is charged to.
    account: C,
    lock: AtomicBool,
    head: AtomicU64,
    len: AtomicUsize,
}

/// Holds the pool's lock.
struct PoolGuard<'a>(&'a AtomicBool);

impl Drop for PoolGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<D: DmaMemory> PtMem<D> {
    /// An empty pool over `dma`, charged to no budget.
    pub fn new(dma: D) -> Self {
        Self::with_account(dma, Unlimited)
    }
}

impl<D: DmaMemory, C: PtAccount> PtMem<D, C> {
    /// An empty pool over `dma` whose pages are charged to `account`.
    pub fn with_account(dma: D, account: C) -> Self {
        PtMem {
            dma,
            account,
            lock: AtomicBool::new(false),
            head: AtomicU64::new(0),
            len: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> PoolGuard<'_> {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        PoolGuard(&self.lock)
    }

    /// Number of pages in the pool.
    pub fn pooled(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Fills the pool up to `pages` pages, charging the pages it adds to the account first.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if the account cannot hold the pages (nothing is allocated then);
    /// the allocation error, with the pages allocated so far in the pool (and charged).
    pub fn reserve(&self, pages: usize) -> Result {
        let need = pages.saturating_sub(self.pooled());
        if need == 0 {
            return Ok(());
        }
        self.account.charge(need)?;
        let mut left = need;
        let res = self.fill(pages, &mut left);
        // Whatever was charged and not allocated goes back.
        self.account.uncharge(left);
        res
    }

    fn fill(&self, pages: usize, left: &mut usize) -> Result {
        while self.pooled() < pages && *left > 0 {
            let page = self.dma.alloc_page()?;
            let Some(word) = self.dma.cpu_u64(page) else {
                // SAFETY: The page was just allocated and is not used anywhere.
                unsafe { self.dma.free_page(page) };
                return Err(Error::NoMemory);
            };
            *left -= 1;
            let _guard = self.lock();
            // SAFETY: `word` points into the live page just allocated (`DmaMemory` contract).
            unsafe { word.as_ref() }.store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
            self.head.store(page, Ordering::Relaxed);
            self.len.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn pop(&self) -> Option<u64> {
        let _guard = self.lock();
        let page = self.head.load(Ordering::Relaxed);
        if page == 0 {
            return None;
        }
        let word = self.dma.cpu_u64(page)?;
        // SAFETY: Pool pages are live (type invariant); the first word holds the link.
        let word = unsafe { word.as_ref() };
        self.head
            .store(word.load(Ordering::Relaxed), Ordering::Relaxed);
        word.store(0, Ordering::Relaxed);
        self.len.fetch_sub(1, Ordering::Relaxed);
        Some(page)
    }

    /// Frees every page of the pool.
    pub fn drain(&self) {
        self.drain_to(0);
    }

    /// Frees pages of the pool until at most `keep` are left.
    pub fn drain_to(&self, keep: usize) {
        while self.pooled() > keep {
            let Some(page) = self.pop() else {
                break;
            };
            // SAFETY: The page left the pool and nothing else refers to it.
            unsafe { self.dma.free_page(page) };
            self.account.uncharge(1);
        }
    }

    /// Puts a page that is no longer used back into the pool, zeroing it.
    ///
    /// # Safety
    ///
    /// `page` is a live `alloc_page` page of this pool's memory that nothing uses any more.
    unsafe fn push(&self, page: u64) {
        for i in 0..PAGE_SIZE / 8 {
            if let Some(word) = self.dma.cpu_u64(page + 8 * i) {
                // SAFETY: `cpu_u64` returned a pointer into the live page (`DmaMemory`
                // contract), which nothing else uses (caller's guarantee).
                unsafe { word.as_ref() }.store(0, Ordering::Relaxed);
            }
        }
        let Some(first) = self.dma.cpu_u64(page) else {
            // SAFETY: As above; without a CPU view the page cannot be pooled, so it is freed.
            unsafe { self.dma.free_page(page) };
            self.account.uncharge(1);
            return;
        };
        let _guard = self.lock();
        // SAFETY: As above.
        unsafe { first.as_ref() }.store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
        self.head.store(page, Ordering::Relaxed);
        self.len.fetch_add(1, Ordering::Relaxed);
    }
}

impl<D: DmaMemory, C: PtAccount> Drop for PtMem<D, C> {
    fn drop(&mut self) {
        self.drain();
    }
}

// SAFETY: Tables are whole pages (`size <= 4096`) taken from the pool, which holds only live,
// disjoint DMA pages that are zero once popped; their CPU view comes from `cpu_u64`, which is
// valid for atomic accesses until the page is freed in `free_table`, and `table_cpu` returns the
// same pointer for the same address.
unsafe impl<D: DmaMemory, C: PtAccount> TableAlloc for PtMem<D, C> {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if size as u64 > PAGE_SIZE {
            return None;
        }
        let dev = self.pop()?;
        let cpu = self.dma.cpu_u64(dev)?;
        Some(TableMem { cpu, dev })
    }

    unsafe fn free_table(&self, table: TableMem, _size: usize) {
        // Freed tables go back to the pool: the remnants of a split mapping are mapped again
        // from it, so a bind prepared in advance never needs more pages than it set aside.
        // SAFETY: The page table no longer uses the table (caller's guarantee); it is a pool
        // page of this memory.
        unsafe { self.push(table.dev) };
    }

    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        self.dma.cpu_u64(dev).unwrap_or(NonNull::dangling())
    }

    fn sync_for_device(&self, dev: u64, len: usize) {
        self.dma.sync_for_device(dev, len);
    }
}

/// Protection bits for the panthor map flags.
///
/// # Examples
///
/// ```
/// use io_pgtable::Prot;
/// use tyr::{uapi, vm::map_prot};
///
/// assert_eq!(map_prot(0), Prot::READ | Prot::WRITE | Prot::CACHE);
/// assert_eq!(map_prot(uapi::DRM_PANTHOR_VM_BIND_OP_MAP_READONLY
///     | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC), Prot::READ | Prot::NOEXEC | Prot::CACHE);
/// ```
pub fn map_prot(flags: u32) -> Prot {
    let mut prot = Prot::READ;
    if flags & uapi::DRM_PANTHOR_VM_BIND_OP_MAP_READONLY == 0 {
        prot |= Prot::WRITE;
    }
    if flags & uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC != 0 {
        prot |= Prot::NOEXEC;
    }
    if flags & uapi::DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED == 0 {
        prot |= Prot::CACHE;
    }
    prot
}

/// The map flags a bind request may carry.
pub const MAP_FLAGS: u32 = uapi::DRM_PANTHOR_VM_BIND_OP_MAP_READONLY
    | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC
    | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED;

/// The flags a sparse bind request carries: [`MAP_FLAGS`] and
/// `DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE` (which it must have, with
/// `DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC`).
pub const MAP_SPARSE_FLAGS: u32 = MAP_FLAGS | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE;

/// Size of a VM's sparse backing: sparse ranges repeat it every 2 MiB.
pub const SPARSE_BACKING_SIZE: u64 = SZ_2M;

/// One request of a VM_BIND.
#[derive(Debug)]
pub enum BindReq<'a, O> {
    /// Map `size` bytes of `obj` from `offset` at `va`.
    Map {
        /// GPU virtual address.
        va: u64,
        /// Size in bytes.
        size: u64,
        /// The object.
        obj: &'a O,
        /// Offset in the object.
        offset: u64,
        /// Map flags ([`MAP_FLAGS`]).
        flags: u32,
    },
    /// Map `[va, va + size)` sparsely: onto the VM's sparse backing, repeated every 2 MiB
    /// (the VM must have one: [`Vm::set_sparse_backing`]).
    MapSparse {
        /// GPU virtual address.
        va: u64,
        /// Size in bytes.
        size: u64,
        /// Map flags ([`MAP_SPARSE_FLAGS`], with `DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE` and
        /// `DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC` set).
        flags: u32,
    },
    /// Unmap `[va, va + size)`.
    Unmap {
        /// GPU virtual address.
        va: u64,
        /// Size in bytes.
        size: u64,
    },
}

impl<O> BindReq<'_, O> {
    /// The request's address and size.
    pub fn range(&self) -> (u64, u64) {
        match *self {
            BindReq::Map { va, size, .. }
            | BindReq::MapSparse { va, size, .. }
            | BindReq::Unmap { va, size } => (va, size),
        }
    }

    /// The request as a `gpuvm` map request, `None` for an unmap.
    fn mapping(&self) -> Option<Mapping<'_, O>> {
        match *self {
            BindReq::Map {
                va,
                size,
                obj,
                offset,
                flags,
            } => Some(Mapping::new(va, size, obj, offset).with_flags(flags)),
            BindReq::MapSparse { va, size, flags } => {
                Some(Mapping::sparse(va, size).with_flags(flags))
            }
            BindReq::Unmap { .. } => None,
        }
    }
}

/// The MMU side of a page-table update: lock a region before, unlock after. A VM without an
/// address space needs neither ([`NoMmu`]).
pub trait MmuUpdate {
    /// Locks the region covering `[start, start + size)`.
    fn lock(&mut self, start: u64, size: u64) -> Result;
    /// Flushes and unlocks.
    fn unlock(&mut self) -> Result;
}

/// [`MmuUpdate`] for a VM that no address space holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMmu;

impl MmuUpdate for NoMmu {
    fn lock(&mut self, _start: u64, _size: u64) -> Result {
        Ok(())
    }
    fn unlock(&mut self) -> Result {
        Ok(())
    }
}

/// Upper bound of the page-table pages mapping `range` bytes at `addr` to `pa` needs (4K
/// granule, root at level 0, 4K pages and 2M blocks).
fn tables_for(addr: u64, range: u64, pa: u64) -> usize {
    if range == 0 {
        return 0;
    }
    let last = addr.saturating_add(range - 1);
    let span = |shift: u32| ((last >> shift) - (addr >> shift) + 1) as usize;
    let end = addr.saturating_add(range);
    let l3 = if (addr ^ pa) & (SZ_2M - 1) == 0 {
        let full_start = addr.next_multiple_of(SZ_2M);
        let full_end = end & !(SZ_2M - 1);
        if full_start >= full_end {
            span(21)
        } else {
            usize::from(addr < full_start) + usize::from(end > full_end)
        }
    } else {
        span(21)
    };
    span(39) + span(30) + l3
}

/// A physical address with the same offset in a 2M block as the one `m` maps its first byte
/// to, which is all [`tables_for`] looks at: a sparse mapping is backed from offset
/// `addr % 2M` of a 2M-aligned backing.
fn phase_pa<O: BoBacking>(m: &Mapping<'_, O>) -> u64 {
    match m.obj {
        Some(o) => o.dma_addr().wrapping_add(m.offset),
        None => m.addr,
    }
}

/// How [`Vm::map_kernel`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelMapError {
    /// Nothing is mapped: the VM is as it was, the memory may be freed and the range reused.
    NotMapped(Error),
    /// The page tables were written but the MMU did not confirm the update (its UNLOCK
    /// failed): the GPU may still reach the memory through the range, so the memory must never
    /// be freed nor the range handed out again ([`keep_pages`]).
    Stuck(Error),
}

impl KernelMapError {
    /// The error to report.
    pub fn error(self) -> Error {
        match self {
            KernelMapError::NotMapped(e) | KernelMapError::Stuck(e) => e,
        }
    }
}

impl From<KernelMapError> for Error {
    fn from(e: KernelMapError) -> Self {
        e.error()
    }
}

/// Pages of memory never freed because the MMU did not confirm that a VM stopped mapping them.
static KEPT_PAGES: AtomicU64 = AtomicU64::new(0);

/// Counts `bytes` of memory that will never be freed (rounded up to pages) because the MMU
/// failed while a VM's page tables mapped them: a failed UNLOCK after a kernel-region map
/// ([`KernelMapError::Stuck`]) or around an unmap. Leaking is the price of never letting the
/// GPU reach freed memory.
pub fn keep_pages(bytes: u64) {
    KEPT_PAGES.fetch_add(bytes.div_ceil(PAGE_SIZE), Ordering::Relaxed);
}

/// Pages kept (leaked) by [`keep_pages`] so far, every device of the process (or kernel)
/// together.
pub fn kept_pages() -> u64 {
    KEPT_PAGES.load(Ordering::Relaxed)
}

/// A GPU virtual address space.
pub struct Vm<D: DmaMemory, O: BoBacking, S: VmSlots<O>, C: PtAccount = Unlimited> {
    key: u64,
    layout: VmLayout,
    gpuvm: Gpuvm<O, (), S::Vas, S::Bos>,
    pt: PageTable<Arm64LpaeS1, PtMem<D, C>, NoFlush>,
    unusable: bool,
    kchunks: [u64; KERNEL_CHUNKS / 64],
    reserved: BindReservation,
    /// What sparse ranges are backed with (kept alive as long as the VM).
    sparse: Option<O>,
}

/// What binds submitted for later set aside in a VM: free VA and VM-BO slots and page-table
/// pages, so that applying them allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindReservation {
    vas: u32,
    bos: u32,
    tables: usize,
}

impl BindReservation {
    fn add(self, o: Self) -> Self {
        BindReservation {
            vas: self.vas.saturating_add(o.vas),
            bos: self.bos.saturating_add(o.bos),
            tables: self.tables.saturating_add(o.tables),
        }
    }

    fn sub(self, o: Self) -> Self {
        BindReservation {
            vas: self.vas.saturating_sub(o.vas),
            bos: self.bos.saturating_sub(o.bos),
            tables: self.tables.saturating_sub(o.tables),
        }
    }

    /// Whether nothing is set aside.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl<D: DmaMemory, O: BoBacking, S: VmSlots<O>> Vm<D, O, S> {
    /// Creates an empty VM identified by `key` (unique per device, not 0), with page tables in
    /// `dma` for an MMU with `pa_bits` physical-address bits, charged to no budget.
    pub fn new(key: u64, dma: D, layout: VmLayout, pa_bits: u32) -> Result<Self> {
        Self::new_charged(key, dma, layout, pa_bits, Unlimited)
    }
}

impl<D: DmaMemory, O: BoBacking, S: VmSlots<O>, C: PtAccount> Vm<D, O, S, C> {
    /// [`new`](Vm::new) with every page-table page (the root too) charged to `account`.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if the account cannot hold the root table, the allocation errors.
    pub fn new_charged(
        key: u64,
        dma: D,
        layout: VmLayout,
        pa_bits: u32,
        account: C,
    ) -> Result<Self> {
        let va_bits = layout.full_range.trailing_zeros();
        let mem = PtMem::with_account(dma, account);
        mem.reserve(1)?;
        let pt = PageTable::new(PtConfig::new(SZ_4K | SZ_2M, va_bits, pa_bits), mem, NoFlush)?;
        let cfg = VmConfig::new(0, layout.full_range)
            .reserve(layout.kernel_start, layout.kernel_range)
            .align(SZ_4K)
            .resv_id(key);
        let gpuvm = Gpuvm::new(cfg, S::vas(), S::bos())?;
        Ok(Vm {
            key,
            layout,
            gpuvm,
            pt,
            unusable: false,
            kchunks: [0; KERNEL_CHUNKS / 64],
            reserved: BindReservation::default(),
            sparse: None,
        })
    }

    /// The VM's key.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The layout.
    pub fn layout(&self) -> VmLayout {
        self.layout
    }

    /// Whether an unrecoverable error made the VM unusable.
    pub fn is_unusable(&self) -> bool {
        self.unusable
    }

    /// Marks the VM unusable.
    pub fn set_unusable(&mut self) {
        self.unusable = true;
    }

    /// Number of mappings.
    pub fn mapping_count(&self) -> usize {
        self.gpuvm.len()
    }

    /// The address-space registers for the VM's page table.
    pub fn as_regs(&self) -> Result<MaliAsRegs> {
        Ok(self.pt.mali_as_regs()?)
    }

    /// The physical address `va` maps to, as the page table says.
    pub fn iova_to_phys(&self, va: u64) -> Option<u64> {
        self.pt.iova_to_phys(va)
    }

    /// Gives the VM the object its sparse ranges are backed with: at least
    /// [`SPARSE_BACKING_SIZE`] bytes at a 2 MiB-aligned device address (of which the first
    /// 2 MiB are used). The VM keeps it until it is dropped; once it has one, later calls do
    /// nothing (the sparse ranges already mapped point into the first).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an object that is too small or not 2 MiB aligned.
    pub fn set_sparse_backing(&mut self, obj: O) -> Result {
        if obj.size() < SPARSE_BACKING_SIZE || obj.dma_addr() & (SZ_2M - 1) != 0 {
            return Err(Error::Invalid);
        }
        if self.sparse.is_none() {
            self.sparse = Some(obj);
        }
        Ok(())
    }

    /// The object sparse ranges are backed with, if the VM has one.
    pub fn sparse_backing(&self) -> Option<&O> {
        self.sparse.as_ref()
    }

    /// Reserves a [`KERNEL_CHUNK`] of the kernel region for the driver's own mappings and
    /// returns its address; [`Error::NoSpace`] when all are in use.
    pub fn alloc_kernel_va(&mut self) -> Result<u64> {
        for (w, word) in self.kchunks.iter_mut().enumerate() {
            if *word != u64::MAX {
                let bit = word.trailing_ones() as usize;
                *word |= 1 << bit;
                let index = (w * 64 + bit) as u64;
                return Ok(self.layout.kernel_start + index * KERNEL_CHUNK);
            }
        }
        Err(Error::NoSpace)
    }

    /// Returns a chunk from [`alloc_kernel_va`](Self::alloc_kernel_va) (anything else is
    /// ignored).
    pub fn free_kernel_va(&mut self, va: u64) {
        let Some(off) = va.checked_sub(self.layout.kernel_start) else {
            return;
        };
        let index = (off / KERNEL_CHUNK) as usize;
        if off % KERNEL_CHUNK == 0 && index < KERNEL_CHUNKS {
            self.kchunks[index / 64] &= !(1 << (index % 64));
        }
    }

    /// Reserves `count` consecutive [`KERNEL_CHUNK`]s of the kernel region (a mapping larger
    /// than one chunk: a tiler heap chunk of up to 8 MiB) and returns the first one's address;
    /// [`Error::NoSpace`] if there is no such run free (or `count` is 0).
    pub fn alloc_kernel_range(&mut self, count: usize) -> Result<u64> {
        let used = |k: &[u64; KERNEL_CHUNKS / 64], i: usize| k[i / 64] & (1 << (i % 64)) != 0;
        let mut start = 0;
        while count > 0 && start + count <= KERNEL_CHUNKS {
            match (start..start + count).find(|&i| used(&self.kchunks, i)) {
                Some(taken) => start = taken + 1,
                None => {
                    for i in start..start + count {
                        self.kchunks[i / 64] |= 1 << (i % 64);
                    }
                    return Ok(self.layout.kernel_start + start as u64 * KERNEL_CHUNK);
                }
            }
        }
        Err(Error::NoSpace)
    }

    /// Returns `count` chunks from [`alloc_kernel_range`](Self::alloc_kernel_range).
    pub fn free_kernel_range(&mut self, va: u64, count: usize) {
        for i in 0..count as u64 {
            self.free_kernel_va(va.wrapping_add(i * KERNEL_CHUNK));
        }
    }

    /// Checks the requests of a bind as [`bind`](Self::bind) and
    /// [`reserve_bind`](Self::reserve_bind) do, except that a sparse request is accepted
    /// whether or not the VM has a sparse backing yet (so that a caller can find out before
    /// setting one up).
    ///
    /// # Errors
    ///
    /// The index of the first bad request and the error ([`Error::Invalid`]).
    pub fn check_requests(&self, reqs: &[BindReq<'_, O>]) -> Result<(), (usize, Error)> {
        for (i, r) in reqs.iter().enumerate() {
            self.check(r).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// The first sparse request (of a size other than 0) the VM has no backing for.
    fn lacks_backing(&self, reqs: &[BindReq<'_, O>]) -> Option<usize> {
        if self.sparse.is_some() {
            return None;
        }
        reqs.iter()
            .position(|r| matches!(r, BindReq::MapSparse { size: 1.., .. }))
    }

    /// Checks one request on its own (not whether the VM has a sparse backing).
    fn check(&self, req: &BindReq<'_, O>) -> Result {
        let (va, size) = req.range();
        if (va | size) & (SZ_4K - 1) != 0 {
            return Err(Error::Invalid);
        }
        match va.checked_add(size) {
            Some(end) if end <= self.layout.kernel_start => {}
            _ => return Err(Error::Invalid),
        }
        if let BindReq::Map {
            size,
            obj,
            offset,
            flags,
            ..
        } = *req
        {
            if offset & (SZ_4K - 1) != 0 || flags & !MAP_FLAGS != 0 {
                return Err(Error::Invalid);
            }
            match offset.checked_add(size) {
                Some(end) if end <= obj.size() => {}
                _ => return Err(Error::Invalid),
            }
            let exclusive = obj.exclusive_vm();
            if exclusive != 0 && exclusive != self.key {
                return Err(Error::Invalid);
            }
        }
        if let BindReq::MapSparse { flags, .. } = *req {
            let must =
                uapi::DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
            if flags & !MAP_SPARSE_FLAGS != 0 || flags & must != must {
                return Err(Error::Invalid);
            }
        }
        Ok(())
    }

    /// Applies the requests of one VM_BIND, all or nothing; requests of size 0 do nothing. A
    /// sparse request needs the VM's sparse backing ([`set_sparse_backing`](
    /// Self::set_sparse_backing)).
    ///
    /// # Errors
    ///
    /// The index of the failing request (the last one for failures of the whole batch: memory,
    /// MMU) and the error ([`Error::Invalid`] for a sparse request without a sparse backing);
    /// the VM is unchanged then, except when
    /// the MMU fails to unlock after the page tables were written, which makes the VM
    /// unusable and reports `(reqs.len(), error)`.
    pub fn bind(
        &mut self,
        reqs: &[BindReq<'_, O>],
        mmu: &mut impl MmuUpdate,
    ) -> Result<(), (usize, Error)> {
        self.bind_in(reqs, mmu)
    }

    /// Maps `size` bytes of DMA memory at device address `pa` at `va` in the kernel region (the
    /// driver's own mappings, which `gpuvm` does not track: ring buffers, sync objects).
    ///
    /// # Errors
    ///
    /// [`KernelMapError::NotMapped`] with [`Error::Invalid`] for an unaligned range or one
    /// outside the kernel region, the page-table errors (`EEXIST` over an existing mapping) or
    /// the MMU's error before anything was written; nothing changes then.
    /// [`KernelMapError::Stuck`] when the page tables were written but the MMU failed to
    /// unlock (flush) after: the GPU may reach the memory, which the caller must then never
    /// free (nor reuse the range).
    pub fn map_kernel(
        &mut self,
        va: u64,
        pa: u64,
        size: u64,
        mmu: &mut impl MmuUpdate,
    ) -> Result<(), KernelMapError> {
        self.check_kernel(va, size)
            .map_err(KernelMapError::NotMapped)?;
        let pool = self.pt.allocator();
        let ready = pool
            .reserve(self.reserved.tables + tables_for(va, size, pa))
            .and_then(|()| mmu.lock(va, size));
        if let Err(e) = ready {
            pool.drain_to(self.reserved.tables);
            return Err(KernelMapError::NotMapped(e));
        }
        let mapped = self
            .pt
            .map(va, pa, size, Prot::READ | Prot::WRITE | Prot::NOEXEC);
        if mapped.is_err() {
            // Undo whatever prefix was written.
            let _ = self.pt.unmap(va, size, None);
        }
        self.pt.allocator().drain_to(self.reserved.tables);
        let unlocked = mmu.unlock();
        match (mapped, unlocked) {
            (Ok(()), Ok(())) => Ok(()),
            // The tables map the range and the MMU did not confirm the update.
            (Ok(()), Err(e)) => Err(KernelMapError::Stuck(e)),
            // Nothing stays mapped; a failed unlock leaves at most TLB entries for a range
            // that mapped nothing before either.
            (Err(e), Ok(())) => Err(KernelMapError::NotMapped(e.into())),
            (Err(_), Err(e)) => Err(KernelMapError::Stuck(e)),
        }
    }

    /// Unmaps a range mapped with [`map_kernel`](Self::map_kernel).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a range outside the kernel region; the MMU's errors.
    pub fn unmap_kernel(&mut self, va: u64, size: u64, mmu: &mut impl MmuUpdate) -> Result {
        self.check_kernel(va, size)?;
        mmu.lock(va, size)?;
        let _ = self.pt.unmap(va, size, None);
        mmu.unlock()
    }

    /// Validates the requests of a bind that will be applied later (an asynchronous
    /// `VM_BIND`) and sets aside what applying them needs: VA and VM-BO slots, and page-table
    /// pages for the worst case (every page of the range, plus one level-3 table at each edge
    /// for splitting a 2M block). A sparse request may be accepted before the VM has a sparse
    /// backing, but must have one by the time it is applied.
    ///
    /// # Errors
    ///
    /// The index of the failing request and the error; nothing is set aside then.
    pub fn reserve_bind(
        &mut self,
        reqs: &[BindReq<'_, O>],
    ) -> Result<BindReservation, (usize, Error)> {
        let mut res = BindReservation::default();
        for (i, r) in reqs.iter().enumerate() {
            self.check(r).map_err(|e| (i, e))?;
            let more = match *r {
                BindReq::Map { size: 0, .. }
                | BindReq::MapSparse { size: 0, .. }
                | BindReq::Unmap { size: 0, .. } => BindReservation::default(),
                BindReq::Map {
                    va,
                    size,
                    obj,
                    offset,
                    ..
                } => BindReservation {
                    vas: 3,
                    bos: 1,
                    tables: tables_for(va, size, obj.dma_addr().wrapping_add(offset)) + 2,
                },
                BindReq::MapSparse { va, size, .. } => BindReservation {
                    vas: 3,
                    bos: 0,
                    tables: tables_for(va, size, va) + 2,
                },
                BindReq::Unmap { .. } => BindReservation {
                    vas: 2,
                    bos: 0,
                    tables: 2,
                },
            };
            res = res.add(more);
        }
        let last = reqs.len().saturating_sub(1);
        let total = self.reserved.add(res);
        self.gpuvm
            .reserve(total.vas, total.bos)
            .map_err(|e| (last, Error::from(e)))?;
        if let Err(e) = self.pt.allocator().reserve(total.tables) {
            // What was allocated goes back (with its charge).
            self.pt.allocator().drain_to(self.reserved.tables);
            return Err((last, e));
        }
        self.reserved = total;
        Ok(res)
    }

    /// Gives back what [`reserve_bind`](Self::reserve_bind) set aside for a bind that will not
    /// be applied.
    pub fn release_bind(&mut self, res: BindReservation) {
        self.reserved = self.reserved.sub(res);
        if self.reserved.is_empty() {
            self.pt.allocator().drain();
        }
    }

    /// Whether binds set aside memory and have not been applied or released yet.
    pub fn has_reserved_binds(&self) -> bool {
        !self.reserved.is_empty()
    }

    /// Applies requests that [`reserve_bind`](Self::reserve_bind) accepted, one after the
    /// other, using only the memory it set aside (this runs in a fence-signalling path).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] if the VM became unusable meanwhile or a sparse request finds no
    /// sparse backing (nothing is applied); a failure while applying (which the reservation
    /// rules out) makes the VM unusable.
    pub fn apply_reserved(
        &mut self,
        reqs: &[BindReq<'_, O>],
        res: BindReservation,
        mmu: &mut impl MmuUpdate,
    ) -> Result {
        let result = if self.unusable || self.lacks_backing(reqs).is_some() {
            Err(Error::Invalid)
        } else {
            self.apply_now(reqs, mmu)
        };
        self.release_bind(res);
        result
    }

    fn apply_now(&mut self, reqs: &[BindReq<'_, O>], mmu: &mut impl MmuUpdate) -> Result {
        // Every page-table change is made in bounded steps, each in its own locked region
        // (`Apply::step`).
        let mut apply = Apply {
            pt: &mut self.pt,
            sparse: self.sparse.as_ref().map(BoBacking::dma_addr),
            mmu,
            failed: false,
            error: None,
        };
        let mut err = None;
        for r in reqs {
            let (va, size) = r.range();
            let res = match r.mapping() {
                _ if size == 0 => Ok(()),
                Some(m) => self.gpuvm.sm_map(&mut apply, m),
                None => self.gpuvm.sm_unmap(&mut apply, va, size),
            };
            if let Err(e) = res {
                err = Some(Error::from(e));
                break;
            }
        }
        if apply.failed || err.is_some() {
            let e = err.or(apply.error).unwrap_or(Error::NoMemory);
            self.unusable = true;
            return Err(e);
        }
        Ok(())
    }

    fn check_kernel(&self, va: u64, size: u64) -> Result {
        let end = va.checked_add(size).ok_or(Error::Invalid)?;
        if (va | size) & (SZ_4K - 1) != 0
            || size == 0
            || va < self.layout.kernel_start
            || end > self.layout.full_range
        {
            return Err(Error::Invalid);
        }
        Ok(())
    }

    fn bind_in(
        &mut self,
        reqs: &[BindReq<'_, O>],
        mmu: &mut impl MmuUpdate,
    ) -> Result<(), (usize, Error)> {
        self.check_requests(reqs)?;
        if let Some(i) = self.lacks_backing(reqs) {
            return Err((i, Error::Invalid));
        }
        // Applying now could use what queued binds set aside.
        if !self.reserved.is_empty() {
            return Err((0, Error::Busy));
        }
        let mut ops = S::ops();
        let mut plan = self.gpuvm.bind(&mut ops).map_err(|e| (0, e.into()))?;
        for (i, r) in reqs.iter().enumerate() {
            let (va, size) = r.range();
            let res = match r.mapping() {
                _ if size == 0 => Ok(()),
                Some(m) => plan.map(m),
                None => plan.unmap(va, size),
            };
            res.map_err(|e| (i, Error::from(e)))?;
        }
        // Page-table pages for everything the plan maps, and the region it touches.
        let mut tables = 0usize;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let mut touch = |m: &Mapping<'_, O>| {
            lo = lo.min(m.addr);
            hi = hi.max(m.end());
        };
        for op in plan.ops() {
            match op {
                Op::Map(m) => {
                    touch(&m);
                    tables = tables.saturating_add(tables_for(m.addr, m.range, phase_pa(&m)));
                }
                Op::Unmap { va, .. } => touch(&va),
                Op::Remap { va, prev, next, .. } => {
                    touch(&va);
                    for m in [prev, next].into_iter().flatten() {
                        tables = tables.saturating_add(tables_for(m.addr, m.range, phase_pa(&m)));
                    }
                }
            }
        }
        let fail = reqs.len().saturating_sub(1);
        let pool = self.pt.allocator();
        // The pages are charged to the VM's budget before they are allocated: a bind the
        // budget cannot hold fails here, having changed nothing.
        let ready = pool
            .reserve(self.reserved.tables.saturating_add(tables))
            .and_then(|()| {
                // The MMU is asked once before anything changes, so that an MMU that does not
                // answer fails the bind while the VM is still as it was.
                if lo < hi {
                    mmu.lock(lo, SZ_4K)?;
                    mmu.unlock()
                } else {
                    Ok(())
                }
            });
        if let Err(e) = ready {
            // Dropping the plan restores the VM; the reserved pages go back.
            pool.drain_to(self.reserved.tables);
            return Err((fail, e));
        }
        let mut apply = Apply {
            pt: &mut self.pt,
            sparse: self.sparse.as_ref().map(BoBacking::dma_addr),
            mmu,
            failed: false,
            error: None,
        };
        plan.commit(&mut apply);
        let (failed, error) = (apply.failed, apply.error);
        self.pt.allocator().drain_to(self.reserved.tables);
        if failed {
            // A step failed after earlier ones changed the page tables: every op was still
            // written to the tables and recorded (the two agree), but the bind is reported as
            // failed and the VM is unusable, as for any failure once the update has begun.
            self.unusable = true;
            return Err((reqs.len(), error.unwrap_or(Error::NoMemory)));
        }
        Ok(())
    }
}

/// Page-table entries one step of a page-table update writes, at most (besides the 4 KiB
/// pages of two partial blocks at the edges of a block-mapped step): 512, one table's worth.
///
/// Steps are bounded by entries written rather than by VA covered, since writing an entry is
/// what costs: 512 entries take about 1.7 ms in a debug build on the 2-core CI machine (a
/// tenth of that in a release build), so a client waiting for the address-space lock, or for
/// the CPU the bind runs on, waits that long at most.
pub const BIND_STEP_ENTRIES: u64 = 512;

/// VA covered by one step of a page-table update of mappings that can use 2 MiB blocks (and
/// of sparse ranges): [`BIND_STEP_ENTRIES`] blocks, 1 GiB.
pub const BIND_STEP: u64 = BIND_STEP_ENTRIES * SZ_2M;

/// VA covered by one step of a page-table update of mappings made of 4 KiB pages:
/// [`BIND_STEP_ENTRIES`] pages, 2 MiB (one level-3 table).
pub const BIND_STEP_4K: u64 = BIND_STEP_ENTRIES * SZ_4K;

/// The step for a mapping whose first byte maps to `pa`.
fn step_for(addr: u64, pa: u64) -> u64 {
    if (addr ^ pa) & (SZ_2M - 1) == 0 {
        BIND_STEP
    } else {
        BIND_STEP_4K
    }
}

/// Writes the page tables for committed ops, in steps of at most [`BIND_STEP_ENTRIES`] entries
/// ([`BIND_STEP`] or [`BIND_STEP_4K`] of VA), each in its own locked region of the MMU ([`MmuUpdate::lock`] and
/// [`MmuUpdate::unlock`] around every step, never around the whole bind).
struct Apply<'a, D: DmaMemory, C: PtAccount, M: MmuUpdate> {
    pt: &'a mut PageTable<Arm64LpaeS1, PtMem<D, C>, NoFlush>,
    /// Device address of the VM's sparse backing (2M aligned), if it has one.
    sparse: Option<u64>,
    mmu: &'a mut M,
    failed: bool,
    /// The first MMU error.
    error: Option<Error>,
}

type Pt<D, C> = PageTable<Arm64LpaeS1, PtMem<D, C>, NoFlush>;

impl<D: DmaMemory, C: PtAccount, M: MmuUpdate> Apply<'_, D, C, M> {
    /// Changes `[addr, end)` with `f`, one step (aligned to `step`) at a time. The tables are
    /// written even when the MMU fails (an unmap must leave no entry to memory about to be
    /// freed); the failure is recorded.
    fn steps(
        &mut self,
        addr: u64,
        end: u64,
        step: u64,
        mut f: impl FnMut(&mut Pt<D, C>, u64, u64) -> bool,
    ) {
        let mut at = addr;
        while at < end {
            let next = (at | (step - 1)).saturating_add(1).min(end);
            let len = next - at;
            if let Err(e) = self.mmu.lock(at, len) {
                self.failed = true;
                self.error.get_or_insert(e);
            }
            if !f(self.pt, at, len) {
                self.failed = true;
            }
            if let Err(e) = self.mmu.unlock() {
                self.failed = true;
                self.error.get_or_insert(e);
            }
            at = next;
        }
    }

    fn map<O: BoBacking>(&mut self, m: &Mapping<'_, O>) {
        let prot = map_prot(m.flags);
        let (addr, end) = (m.addr, m.end());
        match (m.obj, self.sparse) {
            (Some(obj), _) => {
                let pa = obj.dma_addr().wrapping_add(m.offset);
                self.steps(addr, end, step_for(addr, pa), |pt, at, len| {
                    pt.map(at, pa.wrapping_add(at - addr), len, prot).is_ok()
                });
            }
            (None, Some(backing)) => self.steps(addr, end, BIND_STEP, |pt, at, len| {
                map_sparse(pt, at, at + len, backing, prot)
            }),
            // Ruled out by the checks (a sparse request needs a backing).
            (None, None) => self.failed = true,
        }
    }

    fn unmap(&mut self, addr: u64, range: u64, pa: u64) {
        self.steps(
            addr,
            addr.saturating_add(range),
            step_for(addr, pa),
            |pt, at, len| pt.unmap(at, len, None) == Ok(len),
        );
    }
}

/// Maps `[addr, end)` onto the 2M at `backing`, one piece per 2M-aligned block of the range:
/// the whole backing (as a 2M block) for every full one, the matching part of it at the
/// edges.
fn map_sparse<D: DmaMemory, C: PtAccount>(
    pt: &mut Pt<D, C>,
    addr: u64,
    end: u64,
    backing: u64,
    prot: Prot,
) -> bool {
    let mut at = addr;
    while at < end {
        let in_block = at & (SZ_2M - 1);
        let len = (SZ_2M - in_block).min(end - at);
        if pt.map(at, backing + in_block, len, prot).is_err() {
            return false;
        }
        at += len;
    }
    true
}

impl<D: DmaMemory, C: PtAccount, M: MmuUpdate, O: BoBacking> SmOps<O, ()> for Apply<'_, D, C, M> {
    type Error = gpuvm::Error;

    fn sm_step_map<'op>(&mut self, op: OpMap<'op, O, ()>) -> Result<OpMapped<'op>, gpuvm::Error> {
        Ok(CommitOps::map(self, op))
    }

    fn sm_step_unmap<'op>(
        &mut self,
        op: OpUnmap<'op, O, ()>,
    ) -> Result<OpUnmapped<'op>, gpuvm::Error> {
        Ok(CommitOps::unmap(self, op))
    }

    fn sm_step_remap<'op>(
        &mut self,
        op: OpRemap<'op, O, ()>,
    ) -> Result<OpRemapped<'op>, gpuvm::Error> {
        Ok(CommitOps::remap(self, op))
    }
}

impl<D: DmaMemory, C: PtAccount, M: MmuUpdate, O: BoBacking> CommitOps<O, ()>
    for Apply<'_, D, C, M>
{
    fn map<'op>(&mut self, op: OpMap<'op, O, ()>) -> OpMapped<'op> {
        let m = op.mapping();
        Apply::map(self, &m);
        op.insert(())
    }

    fn unmap<'op>(&mut self, op: OpUnmap<'op, O, ()>) -> OpUnmapped<'op> {
        let va = op.va();
        let pa = phase_pa(&va.mapping());
        self.unmap(va.addr(), va.range(), pa);
        op.remove().0
    }

    fn remap<'op>(&mut self, op: OpRemap<'op, O, ()>) -> OpRemapped<'op> {
        // The old mapping may use 2M blocks that the remnants cannot keep: unmap it whole and
        // map the remnants again (with the memory reserved for them).
        let va = op.va();
        let pa = phase_pa(&va.mapping());
        self.unmap(va.addr(), va.range(), pa);
        for m in [op.prev(), op.next()].into_iter().flatten() {
            Apply::map(self, &m);
        }
        op.remap(|_, _| ()).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_estimates_bound_the_tables() {
        // One page: one table per level below the root.
        assert_eq!(tables_for(0x1000, 0x1000, 0x8000_1000), 3);
        // A 2M-aligned block with matching physical alignment needs no level-3 table.
        assert_eq!(tables_for(SZ_2M, SZ_2M, 0x8000_0000), 2);
        // The same block at a physical address that cannot use blocks needs one.
        assert_eq!(tables_for(SZ_2M, SZ_2M, 0x8000_1000), 3);
        // Crossing a 1G boundary.
        assert_eq!(tables_for((1 << 30) - 0x1000, 0x2000, 0x1000), 1 + 2 + 2);
        assert_eq!(tables_for(0, 0, 0), 0);
    }

    /// An object at a chosen device address (the page tables only record the address).
    #[cfg(feature = "host")]
    #[derive(Clone, Debug)]
    struct FakeBo {
        id: u64,
        addr: u64,
        size: u64,
    }

    #[cfg(feature = "host")]
    impl GemObject for FakeBo {
        fn id(&self) -> u64 {
            self.id
        }
        fn size(&self) -> u64 {
            self.size
        }
        fn resv_id(&self) -> u64 {
            u64::MAX - self.id
        }
    }

    #[cfg(feature = "host")]
    impl BoBacking for FakeBo {
        fn dma_addr(&self) -> u64 {
            self.addr
        }
    }

    #[cfg(feature = "host")]
    fn fake_vm() -> Vm<crate::host::SimDma, FakeBo, EnvSlots<drm_ctx::mem::Global>> {
        use crate::host::SimDma;
        use mali_sim::{MemConfig, SimMemory};
        use std::sync::Arc;
        let dma = SimDma::new(Arc::new(SimMemory::new(MemConfig::default())));
        Vm::new(1, dma, VmLayout::new(48, 0).unwrap(), 40).unwrap()
    }

    #[cfg(feature = "host")]
    const SPARSE_NX: u32 =
        uapi::DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE | uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;

    #[cfg(feature = "host")]
    #[test]
    fn sparse_requests_need_a_2m_backing_and_noexec() {
        let mut vm = fake_vm();
        let sparse = |va, size, flags| -> BindReq<'static, FakeBo> {
            BindReq::MapSparse { va, size, flags }
        };
        // Without a backing a sparse bind is refused; nothing changes.
        assert_eq!(
            vm.bind(&[sparse(0x20_0000, 0x1000, SPARSE_NX)], &mut NoMmu),
            Err((0, Error::Invalid))
        );
        assert_eq!(vm.mapping_count(), 0);
        // Queued without one, it cannot be applied without one either.
        let req = [sparse(0x20_0000, 0x1000, SPARSE_NX)];
        let res = vm.reserve_bind(&req).unwrap();
        assert_eq!(
            vm.apply_reserved(&req, res, &mut NoMmu),
            Err(Error::Invalid)
        );
        assert!(!vm.has_reserved_binds());
        assert_eq!((vm.mapping_count(), vm.iova_to_phys(0x20_0000)), (0, None));
        // Too small or not 2M aligned.
        let bo = |id, addr, size| FakeBo { id, addr, size };
        assert_eq!(
            vm.set_sparse_backing(bo(1, 1 << 32, SZ_2M - SZ_4K)),
            Err(Error::Invalid)
        );
        assert_eq!(
            vm.set_sparse_backing(bo(2, (1 << 32) + SZ_4K, SZ_2M)),
            Err(Error::Invalid)
        );
        assert!(vm.sparse_backing().is_none());
        vm.set_sparse_backing(bo(3, 1 << 32, SZ_2M)).unwrap();
        // A second one is ignored: what is mapped points into the first.
        vm.set_sparse_backing(bo(4, 1 << 33, SZ_2M)).unwrap();
        assert_eq!(vm.sparse_backing().map(|b| b.id), Some(3));
        // The flags: sparse and NOEXEC both needed, nothing unknown; a sparse flag on a map of
        // an object is refused.
        let obj = bo(5, 1 << 34, SZ_2M);
        for (i, r) in [
            sparse(0x20_0000, 0x1000, uapi::DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE),
            sparse(0x20_0000, 0x1000, uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC),
            sparse(0x20_0000, 0x1000, SPARSE_NX | 1 << 4),
            sparse(0x20_0800, 0x1000, SPARSE_NX),
            BindReq::Map {
                va: 0x20_0000,
                size: 0x1000,
                obj: &obj,
                offset: 0,
                flags: SPARSE_NX,
            },
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(
                vm.bind(&[r], &mut NoMmu),
                Err((0, Error::Invalid)),
                "case {i}"
            );
        }
        assert_eq!(vm.mapping_count(), 0);
    }

    #[cfg(feature = "host")]
    #[test]
    fn sparse_pages_point_into_the_backing_modulo_2m_and_remnants_too() {
        let mut vm = fake_vm();
        let backing = 1u64 << 32;
        vm.set_sparse_backing(FakeBo {
            id: 1,
            addr: backing,
            size: SZ_2M,
        })
        .unwrap();
        let (va, size) = (3 * SZ_2M - 0x3000, 2 * SZ_2M + 0x6000);
        let req: BindReq<'_, FakeBo> = BindReq::MapSparse {
            va,
            size,
            flags: SPARSE_NX,
        };
        vm.bind(&[req], &mut NoMmu).unwrap();
        let step = if cfg!(miri) { 0x3_3000 } else { SZ_4K };
        let expect = |a: u64| Some(backing + a % SZ_2M);
        for a in (va..va + size).step_by(step as usize) {
            assert_eq!(vm.iova_to_phys(a), expect(a), "{a:#x}");
        }
        assert_eq!(vm.iova_to_phys(va - SZ_4K), None);
        assert_eq!(vm.iova_to_phys(va + size), None);
        // A hole across a block boundary: two sparse remnants, mapped the same way.
        let hole = (4 * SZ_2M - 0x2000, 0x4000);
        vm.bind(
            &[BindReq::Unmap {
                va: hole.0,
                size: hole.1,
            }],
            &mut NoMmu,
        )
        .unwrap();
        assert_eq!(vm.mapping_count(), 2);
        for a in (va..va + size).step_by(step as usize) {
            let inside = (hole.0..hole.0 + hole.1).contains(&a);
            let want = if inside { None } else { expect(a) };
            assert_eq!(vm.iova_to_phys(a), want, "{a:#x}");
        }
        assert!(!vm.is_unusable());
    }

    /// Issue 20, defect 6: two threads taking tables from one pool at once (what
    /// `map_pages_shared` on disjoint ranges does) never get the same page.
    #[cfg(feature = "host")]
    #[test]
    fn pool_hands_each_page_out_once_under_concurrency() {
        use crate::host::SimDma;
        use mali_sim::{MemConfig, SimMemory};
        use std::sync::Arc;

        let rounds = if cfg!(miri) { 1 } else { 300 };
        let per_thread = if cfg!(miri) { 2 } else { 64 };
        let pool = PtMem::new(SimDma::new(Arc::new(SimMemory::new(MemConfig::default()))));
        for _ in 0..rounds {
            pool.reserve(2 * per_thread).unwrap();
            let barrier = std::sync::Barrier::new(2);
            let take = || {
                barrier.wait();
                (0..per_thread)
                    .map(|_| pool.alloc_table(4096).unwrap().dev)
                    .collect::<std::vec::Vec<u64>>()
            };
            let (a, b) = std::thread::scope(|s| {
                let a = s.spawn(take);
                let b = s.spawn(take);
                (a.join().unwrap(), b.join().unwrap())
            });
            let mut all: std::vec::Vec<u64> = a.iter().chain(&b).copied().collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 2 * per_thread, "a page was handed out twice");
            assert_eq!(pool.pooled(), 0);
            for page in all {
                // SAFETY: The page came from the pool and is not used.
                unsafe {
                    pool.free_table(
                        TableMem {
                            cpu: NonNull::dangling(),
                            dev: page,
                        },
                        4096,
                    )
                };
            }
            pool.drain();
        }
    }
}
