// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Tiler heaps: the memory the GPU's tiler writes its per-tile primitive lists into
//! (panthor's `panthor_heap`).
//!
//! # The hardware
//!
//! Before a render pass is rasterised, the tiler bins its primitives into lists, one per
//! screen tile. How much memory that takes depends on the geometry, so the lists go into a
//! *heap* that can grow while the GPU runs: a singly linked list of *chunks* of one size in
//! GPU memory. Each chunk starts with a 64-byte header whose first word links to the next
//! chunk (its GPU address in bits 63:12, its size in 4 KiB pages in bits 11:0; 0 ends the
//! list). Next to the chunks, the GPU keeps a small *heap context* in GPU memory (32 bytes,
//! opaque to the driver, which only zeroes it), whose address a command stream gives the
//! tiler (`HEAP_SET`). When the tiler has used every chunk it knows, the firmware stalls the
//! stream and raises the stream's `TILER_OOM` event with the heap context's address and the
//! heap's render-pass counters; the driver either hands a new chunk over (its link in the
//! stream's `HEAP_START`/`HEAP_END` input) or answers 0, which makes the tiler fail the job
//! with an out-of-memory fault (real firmware may first wait for fragment work or run the
//! stream's exception handler; the simulated one has neither).
//!
//! # The driver's side
//!
//! Heaps belong to a VM: every VM has at most one [`HeapPool`], made at its first
//! `TILER_HEAP_CREATE`, holding up to [`MAX_HEAPS_PER_POOL`] heaps whose contexts share one
//! block of DMA memory (one context per GPU cache line, zeroed when the heap is made). A heap
//! starts with `initial_chunk_count` chunks linked into a list (each new chunk's header links
//! to the one made before it, and the last one made is the first of the list) and may grow,
//! one chunk per `TILER_OOM`, to `max_chunks`. Contexts and chunks are DMA memory mapped
//! read-write, not executable, into the VM's kernel region; a chunk larger than a kernel VA
//! chunk (1 MiB) takes consecutive ones, so the kernel region (256 MiB) bounds what one VM's
//! heaps can hold.
//!
//! What panthor does and this pool does too: the argument checks of `TILER_HEAP_CREATE`
//! (`EINVAL` for no initial chunk, more initial chunks than `max_chunks`, a chunk size that is
//! not page aligned or outside 128 KiB..=8 MiB), heap handles `vm_id << 16 | index` with
//! indices from 0, `EBUSY` when a pool has no free index, `ENOENT` for a destroy in a VM that
//! has no pool, `EINVAL` for an unknown index; growth refused (`ENOMEM`, answered 0) when the
//! heap has `max_chunks` chunks or more render passes are in flight than `target_in_flight`.
//!
//! Deliberate differences:
//!
//! - The arguments are checked before the pool is made, so a refused create changes nothing
//!   (panthor makes the pool first).
//! - Per-client budget: the chunks of every heap of a file count against
//!   [`MAX_HEAP_BYTES_PER_FILE`] ([`HeapBudget`]), so that one client cannot take the memory
//!   every other client needs; a create beyond it fails with `ENOMEM` and a growth beyond it
//!   is refused as one beyond `max_chunks` is.
//! - Growth runs on the device's work item, on the way to the job's fence: it allocates
//!   through the backend's DMA memory, which fails rather than waits for memory to be
//!   reclaimed (`dma_alloc_coherent` without `__GFP_DIRECT_RECLAIM` in a kernel). This is the
//!   one place where the rule "nothing allocates in a fence-signalling path" bends, as it
//!   does in panthor (whose FIXME asks for this non-blocking allocation): a failed
//!   allocation is answered 0, so the job fails with the out-of-memory fault, and the fence
//!   still signals in finite time.
//!
//! Destroying a heap (or the VM, which destroys its pool) unmaps its chunks from the VM,
//! through the MMU when the VM holds an address space, before their memory is freed: a job
//! still tiling into them takes a translation fault and fails, and no freed memory stays
//! reachable by the GPU.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{Backend, DmaMemory, DmaRegion, Lock, LockOf, Words, PAGE_SIZE};
use crate::env;
use crate::gem::{SharedVm, TyrVm};
use crate::mmu::{AsSlots, AsUpdate};
use crate::vm::{KernelMapError, KERNEL_CHUNK};
use crate::{Error, Result};

/// Heaps per pool (per VM).
pub const MAX_HEAPS_PER_POOL: u32 = 128;
/// Bytes of a heap context as the GPU uses it.
pub const HEAP_CONTEXT_SIZE: u64 = 32;
/// Smallest chunk.
pub const MIN_CHUNK_SIZE: u32 = 128 << 10;
/// Largest chunk.
pub const MAX_CHUNK_SIZE: u32 = 8 << 20;
/// Bytes of chunks all heaps of one file may hold together.
pub const MAX_HEAP_BYTES_PER_FILE: u64 = 256 << 20;

/// The link of a chunk, as chunk headers and `HEAP_START` hold it: GPU address in bits 63:12,
/// size in pages in bits 11:0.
pub const fn chunk_link(va: u64, size: u32) -> u64 {
    (va & !0xfff) | (size as u64 >> 12)
}

/// The distance between two heap contexts: a context per GPU cache line, given the GPU's
/// `L2_FEATURES` (log2 of the line size in bits 7:0).
pub fn context_stride(l2_features: u32) -> u64 {
    let line = 1u64 << (l2_features & 0xff).clamp(4, 12);
    HEAP_CONTEXT_SIZE.next_multiple_of(line)
}

/// The arguments of a new heap, checked by [`HeapArgs::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapArgs {
    /// Chunks made at creation.
    pub initial_chunks: u32,
    /// Bytes per chunk.
    pub chunk_size: u32,
    /// Most chunks the heap may have.
    pub max_chunks: u32,
    /// Most render passes in flight for which the heap still grows.
    pub target_in_flight: u32,
}

impl HeapArgs {
    /// Checks the arguments as panthor does: [`Error::Invalid`] for no initial chunk, more
    /// initial chunks than `max_chunks`, a chunk size that is not page aligned or outside
    /// [`MIN_CHUNK_SIZE`]`..=`[`MAX_CHUNK_SIZE`].
    pub fn check(&self) -> Result {
        let size_ok = u64::from(self.chunk_size).is_multiple_of(PAGE_SIZE)
            && (MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&self.chunk_size);
        if self.initial_chunks == 0 || self.initial_chunks > self.max_chunks || !size_ok {
            return Err(Error::Invalid);
        }
        Ok(())
    }
}

/// A file's budget of heap memory, shared by the pools of its VMs.
#[derive(Debug, Default)]
pub struct HeapBudget {
    used: AtomicU64,
}

impl HeapBudget {
    /// Bytes of chunks the file's heaps hold.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Whether `bytes` more fit in the budget now ([`Error::NoMemory`] if not); takes nothing.
    fn fits(&self, bytes: u64) -> Result {
        match self.used().checked_add(bytes) {
            Some(t) if t <= MAX_HEAP_BYTES_PER_FILE => Ok(()),
            _ => Err(Error::NoMemory),
        }
    }

    fn take(&self, bytes: u64) -> Result {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes)
                    .filter(|t| *t <= MAX_HEAP_BYTES_PER_FILE)
            })
            .map(|_| ())
            .map_err(|_| Error::NoMemory)
    }

    fn give(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// DMA memory mapped in a VM's kernel region: a chunk, or a pool's contexts.
///
/// # Invariants
///
/// `mem` is a live block of `dma` owned by this value; while `mapped`, the VM maps it at `va`.
/// Unless `leak` is set, the block is not mapped anywhere once the value drops.
struct Mapped<D: DmaMemory> {
    dma: D,
    mem: DmaRegion,
    va: u64,
    /// Kernel VA chunks reserved at `va`.
    vchunks: usize,
    mapped: bool,
    /// The unmap failed and the page tables may still point at the block: it is never freed.
    leak: bool,
}

impl<D: DmaMemory + Clone> Mapped<D> {
    /// Allocates `size` bytes (zeroed) and maps them in `vm`.
    fn new<B: Backend<Dma = D>>(
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        vm: &mut TyrVm<B>,
        size: u64,
    ) -> Result<Self> {
        let pages = usize::try_from(size.div_ceil(PAGE_SIZE)).map_err(|_| Error::NoMemory)?;
        let vchunks = usize::try_from(size.div_ceil(KERNEL_CHUNK)).map_err(|_| Error::NoMemory)?;
        let mem = backend.dma().alloc(pages, PAGE_SIZE)?;
        let mut m = Mapped {
            dma: backend.dma().clone(),
            mem,
            va: 0,
            vchunks: 0,
            mapped: false,
            leak: false,
        };
        m.va = vm.alloc_kernel_range(vchunks)?;
        m.vchunks = vchunks;
        let mapped = {
            let slots = slots.guard();
            let mut upd = AsUpdate {
                backend,
                slot: slots.slot_of(vm.key()),
            };
            vm.map_kernel(m.va, m.mem.addr, m.mem.size(), &mut upd)
        };
        match mapped {
            Ok(()) => {}
            Err(KernelMapError::NotMapped(e)) => {
                // Nothing is mapped (`map_kernel` undoes a partial map): VA back, memory freed.
                vm.free_kernel_range(m.va, m.vchunks);
                return Err(e);
            }
            Err(KernelMapError::Stuck(e)) => {
                // The tables map the block and the MMU did not take the change: the GPU may
                // reach it, so it is kept (never freed) and its VA stays taken.
                m.leak = true;
                m.vchunks = 0;
                crate::vm::keep_pages(m.mem.size());
                return Err(e);
            }
        }
        m.mapped = true;
        Ok(m)
    }

    /// Unmaps the memory and gives its VA back; the memory is freed when `self` drops.
    fn unmap<B: Backend<Dma = D>>(
        &mut self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        vm: &mut TyrVm<B>,
    ) {
        if self.mapped {
            let slots = slots.guard();
            let mut upd = AsUpdate {
                backend,
                slot: slots.slot_of(vm.key()),
            };
            let unmapped = vm.unmap_kernel(self.va, self.mem.size(), &mut upd);
            self.mapped = false;
            if unmapped.is_err() {
                // The MMU did not take the change (the tables or its TLB may still point at
                // the block): the GPU may still reach it, so it is leaked rather than freed,
                // and its VA stays taken.
                self.leak = true;
                self.vchunks = 0;
                crate::vm::keep_pages(self.mem.size());
            }
        }
        if self.vchunks > 0 {
            vm.free_kernel_range(self.va, self.vchunks);
            self.vchunks = 0;
        }
    }
}

impl<D: DmaMemory> Drop for Mapped<D> {
    fn drop(&mut self) {
        if self.leak {
            return;
        }
        // SAFETY: The block is owned by `self` (type invariant) and no page table maps it:
        // either it was never mapped (`new` failed before the map or `map_kernel` undid it:
        // `KernelMapError::NotMapped`), or `unmap` removed it and the MMU confirmed the
        // unlock (flush) after; every case where the MMU did not confirm (a stuck map or
        // unmap) set `leak`, which returned above. Nothing else keeps a CPU pointer into it.
        unsafe { self.dma.free(self.mem) };
    }
}

/// One heap: its chunks (the list's first chunk last) and limits.
struct Heap<B: Backend> {
    chunks: env::Vec<Mapped<B::Dma>, B::Alloc>,
    args: HeapArgs,
}

/// The heaps of one VM (panthor's `panthor_heap_pool`).
pub struct HeapPool<B: Backend> {
    vm_key: u64,
    /// The VM, kept alive while the pool maps memory in it.
    vm: SharedVm<B>,
    budget: env::Arc<HeapBudget, B::Alloc>,
    /// The heap contexts, one per `stride` bytes.
    contexts: Mapped<B::Dma>,
    stride: u64,
    heaps: env::Vec<Option<Heap<B>>, B::Alloc>,
}

/// What a new heap is: its index in the pool, its context's GPU address, its first chunk's
/// GPU address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewHeap {
    /// Index in the pool (the low 16 bits of the handle).
    pub index: u32,
    /// GPU address of the heap context.
    pub context_va: u64,
    /// GPU address of the first chunk of the list.
    pub first_chunk_va: u64,
}

/// Makes one chunk of `chunk_size` bytes in `vm` (its header linking to `link_to`, a chunk
/// link or 0), counted against `budget`.
fn new_chunk<B: Backend>(
    backend: &B,
    slots: &LockOf<B, AsSlots>,
    vm: &mut TyrVm<B>,
    budget: &HeapBudget,
    chunk_size: u32,
    link_to: u64,
) -> Result<Mapped<B::Dma>> {
    budget.take(u64::from(chunk_size))?;
    let chunk = match Mapped::new(backend, slots, vm, u64::from(chunk_size)) {
        Ok(c) => c,
        Err(e) => {
            budget.give(u64::from(chunk_size));
            return Err(e);
        }
    };
    // The header of a fresh chunk is zero (the memory is zeroed) but for its link.
    if link_to != 0 {
        Words(backend.dma()).wr64(chunk.mem.addr, link_to);
        backend.dma().sync_for_device(chunk.mem.addr, 8);
    }
    Ok(chunk)
}

/// Unmaps and frees chunks, giving their bytes back to `budget`.
fn drop_chunks<B: Backend>(
    backend: &B,
    slots: &LockOf<B, AsSlots>,
    vm: &mut TyrVm<B>,
    budget: &HeapBudget,
    chunks: env::Vec<Mapped<B::Dma>, B::Alloc>,
) {
    for mut chunk in chunks {
        chunk.unmap(backend, slots, vm);
        budget.give(chunk.mem.size());
    }
}

impl<B: Backend> HeapPool<B> {
    /// Makes a heap (arguments already checked).
    fn create(
        &mut self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        args: HeapArgs,
    ) -> Result<NewHeap> {
        let index = match self.heaps.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.heaps.len() < MAX_HEAPS_PER_POOL as usize => {
                self.heaps.try_push(None)?;
                self.heaps.len() - 1
            }
            None => return Err(Error::Busy),
        };
        let mut chunks = env::Vec::try_with_capacity(args.initial_chunks as usize)?;
        let mut vm = self.vm.guard();
        let mut link = 0;
        for _ in 0..args.initial_chunks {
            match new_chunk(backend, slots, &mut vm, &self.budget, args.chunk_size, link) {
                Ok(c) => {
                    link = chunk_link(c.va, args.chunk_size);
                    // Room was reserved for every initial chunk.
                    let _ = chunks.push_within_capacity(c);
                }
                Err(e) => {
                    drop_chunks(backend, slots, &mut vm, &self.budget, chunks);
                    return Err(e);
                }
            }
        }
        drop(vm);
        let context_va = self.contexts.va + index as u64 * self.stride;
        let ctx_dma = self.contexts.mem.addr + index as u64 * self.stride;
        let w = Words(backend.dma());
        for off in (0..self.stride).step_by(8) {
            w.wr64(ctx_dma + off, 0);
        }
        backend.dma().sync_for_device(ctx_dma, self.stride as usize);
        let first_chunk_va = chunks.last().map_or(0, |c| c.va);
        self.heaps[index] = Some(Heap { chunks, args });
        Ok(NewHeap {
            index: index as u32,
            context_va,
            first_chunk_va,
        })
    }

    /// Destroys heap `index`; [`Error::Invalid`] if there is none.
    fn destroy(&mut self, backend: &B, slots: &LockOf<B, AsSlots>, index: u32) -> Result {
        let heap = self
            .heaps
            .get_mut(index as usize)
            .and_then(Option::take)
            .ok_or(Error::Invalid)?;
        let mut vm = self.vm.guard();
        drop_chunks(backend, slots, &mut vm, &self.budget, heap.chunks);
        Ok(())
    }

    /// Grows the heap whose context is at `context_va` by one chunk and returns its link.
    fn grow(
        &mut self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        context_va: u64,
        in_flight: u32,
    ) -> Result<u64> {
        let offset = context_va.wrapping_sub(self.contexts.va);
        let index = offset / self.stride;
        if !offset.is_multiple_of(self.stride) || index >= u64::from(MAX_HEAPS_PER_POOL) {
            return Err(Error::Invalid);
        }
        let heap = self
            .heaps
            .get(index as usize)
            .and_then(Option::as_ref)
            .ok_or(Error::Invalid)?;
        let args = heap.args;
        if in_flight > args.target_in_flight
            || heap.chunks.len() as u64 >= u64::from(args.max_chunks)
        {
            return Err(Error::NoMemory);
        }
        let mut vm = self.vm.guard();
        let heap = self.heaps[index as usize].as_mut().ok_or(Error::Invalid)?;
        // Room for the chunk first, so that keeping it cannot fail once it exists.
        heap.chunks.try_reserve(1)?;
        // A grown chunk links to nothing: the GPU links it behind the one it filled.
        let chunk = new_chunk(backend, slots, &mut vm, &self.budget, args.chunk_size, 0)?;
        let link = chunk_link(chunk.va, args.chunk_size);
        // Room was reserved above.
        let _ = heap.chunks.push_within_capacity(chunk);
        Ok(link)
    }

    /// Destroys every heap and unmaps the contexts (the pool is dropped after).
    fn destroy_all(&mut self, backend: &B, slots: &LockOf<B, AsSlots>) {
        let mut vm = self.vm.guard();
        for heap in core::mem::take(&mut self.heaps).into_iter().flatten() {
            drop_chunks(backend, slots, &mut vm, &self.budget, heap.chunks);
        }
        self.contexts.unmap(backend, slots, &mut vm);
    }
}

/// Every heap pool of a device, by VM (the device state holds one).
///
/// Dropped with the device: the MCU is stopped by then, so memory still mapped (heaps of
/// VMs that outlived the file, which the DRM core does not allow) is freed with no stream
/// left to use it.
pub struct HeapPools<B: Backend> {
    pools: LockOf<B, env::Vec<HeapPool<B>, B::Alloc>>,
}

impl<B: Backend> HeapPools<B> {
    /// No pool yet; [`Error::NoMemory`] if the lock cannot be made.
    pub fn new() -> Result<Self> {
        Ok(HeapPools {
            pools: Lock::new(env::Vec::new(), crate::lock_class!(c"tyr_heap_pools"))?,
        })
    }

    /// Makes a heap in VM `vm` (key `vm_key`), making the VM's pool first if it has none.
    /// `still_live` is asked, under the pools' lock, whether the VM is still its file's: a VM
    /// destroyed meanwhile gets no pool (its destruction takes the same lock after leaving the
    /// file).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for bad arguments ([`HeapArgs::check`]) or a VM no longer live,
    /// [`Error::Busy`] when the pool holds [`MAX_HEAPS_PER_POOL`] heaps, [`Error::NoMemory`]
    /// (memory, the file's budget) and [`Error::NoSpace`] (the VM's kernel region); nothing
    /// changes then.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        vm: &SharedVm<B>,
        budget: &env::Arc<HeapBudget, B::Alloc>,
        stride: u64,
        args: HeapArgs,
        still_live: impl FnOnce() -> bool,
    ) -> Result<NewHeap> {
        args.check()?;
        // The chunk list is reserved for every initial chunk at once: bound the count by what
        // the budget can still hold before anything is allocated (`u32::MAX` chunks would be
        // a 275 GB table). Panthor fails such a create with `ENOMEM` when its chunk
        // allocations run out; it is refused here before they start.
        budget.fits(u64::from(args.initial_chunks) * u64::from(args.chunk_size))?;
        let vm_key = vm.guard().key();
        let mut pools = self.pools.guard();
        if !still_live() {
            return Err(Error::Invalid);
        }
        let existing = pools.iter().position(|p| p.vm_key == vm_key);
        let at = match existing {
            Some(i) => i,
            None => {
                pools.try_reserve(1)?;
                let size = stride * u64::from(MAX_HEAPS_PER_POOL);
                let contexts = Mapped::new(backend, slots, &mut vm.guard(), size)?;
                // Room was reserved above.
                let _ = pools.push_within_capacity(HeapPool {
                    vm_key,
                    vm: vm.clone(),
                    budget: budget.clone(),
                    contexts,
                    stride,
                    heaps: env::Vec::new(),
                });
                pools.len() - 1
            }
        };
        let made = pools[at].create(backend, slots, args);
        if made.is_err() && existing.is_none() {
            // A pool made for this call goes again: a refused create changes nothing.
            if let Some(mut pool) = pools.swap_remove(at) {
                pool.destroy_all(backend, slots);
            }
        }
        made
    }

    /// Destroys heap `index` of VM `vm_key`'s pool.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if the VM has no pool, [`Error::Invalid`] if the pool has no such
    /// heap.
    pub fn destroy(
        &self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        vm_key: u64,
        index: u32,
    ) -> Result {
        let mut pools = self.pools.guard();
        let pool = pools
            .iter_mut()
            .find(|p| p.vm_key == vm_key)
            .ok_or(Error::NotFound)?;
        pool.destroy(backend, slots, index)
    }

    /// Grows the heap whose context is at `context_va` in VM `vm_key` by one chunk, for a
    /// `TILER_OOM` with `in_flight` render passes in flight; returns the new chunk's link.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] when the heap may not grow (`max_chunks`, `target_in_flight`, the
    /// file's budget) or memory or VA runs out; [`Error::Invalid`] for an address that is no
    /// heap context of the VM (or a VM without heaps).
    pub fn grow(
        &self,
        backend: &B,
        slots: &LockOf<B, AsSlots>,
        vm_key: u64,
        context_va: u64,
        in_flight: u32,
    ) -> Result<u64> {
        let mut pools = self.pools.guard();
        let pool = pools
            .iter_mut()
            .find(|p| p.vm_key == vm_key)
            .ok_or(Error::Invalid)?;
        pool.grow(backend, slots, context_va, in_flight)
            .map_err(|e| match e {
                Error::NoSpace => Error::NoMemory,
                e => e,
            })
    }

    /// Destroys VM `vm_key`'s pool and every heap in it (VM destruction, file close).
    pub fn destroy_pool(&self, backend: &B, slots: &LockOf<B, AsSlots>, vm_key: u64) {
        let mut pools = self.pools.guard();
        if let Some(at) = pools.iter().position(|p| p.vm_key == vm_key) {
            let pool = pools.swap_remove(at);
            drop(pools);
            if let Some(mut pool) = pool {
                pool.destroy_all(backend, slots);
            }
        }
    }

    /// Live pools, heaps and chunks of the device (for tests counting what is left).
    pub fn counts(&self) -> (usize, usize, usize) {
        let pools = self.pools.guard();
        let heaps = pools.iter().flat_map(|p| p.heaps.iter().flatten());
        let (h, c) = heaps.fold((0, 0), |(h, c), heap| (h + 1, c + heap.chunks.len()));
        (pools.len(), h, c)
    }
}
