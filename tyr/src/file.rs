// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Open files: a client's VMs and groups (panthor's `panthor_file` with its VM and group
//! pools).
//!
//! Each open file ([`TyrFile`]) has up to [`MAX_VMS_PER_FILE`] VMs, numbered from 1, and up to
//! [`MAX_GROUPS_PER_FILE`] groups, whose queues count against a per-file budget
//! ([`MAX_QUEUES_PER_FILE`]) so that no client can take the queue interfaces every other client
//! needs. A group is created here (its memory, rings and queues, registered with the scheduler
//! before its handle is published); closing the file destroys its groups and releases its VMs.
//!
//! A VM gets an address space when the GPU needs it ([`vm_activate`]; the scheduler does it
//! when a group of the VM gets a slot), least recently used first among the VMs no running
//! group needs; binds into an active VM lock, update and flush through the MMU.

use drm_ctx::drm::{self, gem};
use drm_ctx::Result as DrmResult;

use crate::backend::{Backend, Lock, LockOf, Words, PAGE_SIZE};
use crate::gem::{BoArgs, BoRef, SharedVm, TyrBo, TyrDevice, TyrDriver, TyrVm};
use crate::heap::HeapBudget;
use crate::mmu::{self, AsUpdate};
use crate::sched::{
    self, DevInner, Group, GroupQueue, GroupRef, GroupState, QueueMem, RingHw, SharedDev,
    QUEUE_IFACE_BASE, QUEUE_IFACE_SIZE,
};
use crate::vm;
use crate::{env, uapi, Error, Result};

/// VMs per file.
pub const MAX_VMS_PER_FILE: u32 = 32;

/// Per-file data: the file's VMs and groups.
pub struct TyrFile<B: Backend> {
    pub(crate) vms: LockOf<B, env::IdMap<SharedVm<B>, B::Alloc>>,
    groups: LockOf<B, env::IdMap<GroupRef<B>, B::Alloc>>,
    /// Queues of the file's groups (created or being created), at most
    /// [`MAX_QUEUES_PER_FILE`].
    queues: core::sync::atomic::AtomicUsize,
    /// Where the user MMIO pages start in the file's mmap offsets.
    user_mmio_offset: core::sync::atomic::AtomicU64,
    /// What the sparse ranges of the file's VMs are backed with, made at the first sparse
    /// bind (see [`TyrFile::sparse_backing`]).
    sparse: LockOf<B, Option<BoRef<B>>>,
    /// What the tiler heaps of the file's VMs may hold together (see [`crate::heap`]).
    pub heap_budget: env::Arc<HeapBudget, B::Alloc>,
    /// The page-table pages the file's VMs hold together, at most
    /// [`vm::MAX_PT_PAGES_PER_FILE`]; every VM of the file charges its tables to it.
    pub pt_budget: env::Arc<vm::PtBudget, B::Alloc>,
}

/// Groups per file.
pub const MAX_GROUPS_PER_FILE: u32 = 128;

/// Queues per file, over all its groups: a sixth of the device's 768 queue interfaces, so that
/// one client cannot take the interfaces every other client needs (`EBUSY` beyond).
pub const MAX_QUEUES_PER_FILE: usize = 128;

impl<B: Backend> TyrFile<B> {
    /// Counts `n` more queues against the file's budget; [`Error::Busy`] if it would be
    /// exceeded.
    pub(crate) fn reserve_queues(&self, n: usize) -> Result<()> {
        use core::sync::atomic::Ordering::AcqRel;
        self.queues
            .fetch_update(AcqRel, core::sync::atomic::Ordering::Acquire, |q| {
                q.checked_add(n).filter(|t| *t <= MAX_QUEUES_PER_FILE)
            })
            .map(|_| ())
            .map_err(|_| Error::Busy)
    }

    /// Gives back `n` queues of the file's budget.
    pub(crate) fn release_queues(&self, n: usize) {
        self.queues
            .fetch_sub(n, core::sync::atomic::Ordering::AcqRel);
    }

    /// Registers a group under the lowest free handle (from 1).
    pub(crate) fn insert_group(&self, g: GroupRef<B>) -> Result<u32> {
        let mut groups = self.groups.guard();
        let h = groups
            .first_free(1, MAX_GROUPS_PER_FILE)
            .ok_or(Error::Busy)?;
        groups.try_insert(h, g)?;
        Ok(h)
    }

    /// Removes a group from the file (giving its queues back to the file's budget).
    pub(crate) fn remove_group(&self, handle: u32) -> Option<GroupRef<B>> {
        let g = self.groups.guard().remove(handle)?;
        self.release_queues(g.queues.len());
        Some(g)
    }

    /// The group `handle`.
    pub fn group(&self, handle: u32) -> Option<GroupRef<B>> {
        self.groups.guard().get(handle).cloned()
    }

    /// The VM `id`, or [`Error::Invalid`].
    pub fn vm(&self, id: u32) -> Result<SharedVm<B>> {
        self.vms.guard().get(id).cloned().ok_or(Error::Invalid)
    }

    /// Where the user MMIO pages start in the file's mmap offsets: at open
    /// `DRM_PANTHOR_USER_MMIO_OFFSET` (the host DRM core has no 32-bit tasks, for which panthor
    /// starts at the 32-bit offset), then what `SET_USER_MMIO_OFFSET` chose.
    pub fn user_mmio_offset(&self) -> u64 {
        self.user_mmio_offset
            .load(core::sync::atomic::Ordering::Acquire)
    }

    /// Moves the user MMIO pages to `offset` (checked by the caller).
    pub(crate) fn set_user_mmio_offset(&self, offset: u64) {
        self.user_mmio_offset
            .store(offset, core::sync::atomic::Ordering::Release);
    }

    /// The object the sparse ranges of the file's VMs are backed with: 2 MiB, never mapped
    /// for the CPU, one per file, as panthor has one per file (what the GPU writes into a
    /// sparse range stays among the file's VMs). It is made the first time a VM of the file
    /// binds sparsely (panthor creates the object when the file is opened and gives it
    /// memory at the first sparse bind); every VM given it keeps a reference, so it lives as
    /// long as the last of them.
    ///
    /// # Errors
    ///
    /// The allocation error ([`Error::NoMemory`]) the first time.
    pub(crate) fn sparse_backing(&self, dev: &TyrDevice<B>) -> Result<BoRef<B>> {
        let mut backing = self.sparse.guard();
        if let Some(bo) = &*backing {
            return Ok(bo.clone());
        }
        let bo = BoRef(gem::Object::<TyrBo<B>>::new(
            dev,
            vm::SPARSE_BACKING_SIZE as usize,
            BoArgs::new(
                dev.backend.dma().clone(),
                dev.key(),
                uapi::DRM_PANTHOR_BO_NO_MMAP,
                0,
            ),
        )?);
        *backing = Some(bo.clone());
        Ok(bo)
    }

    /// Gives `vm` the file's sparse backing ([`sparse_backing`](Self::sparse_backing)) unless
    /// it has it already.
    ///
    /// # Errors
    ///
    /// The allocation error; the VM is unchanged then.
    pub(crate) fn give_sparse_backing(&self, dev: &TyrDevice<B>, vm: &mut TyrVm<B>) -> Result {
        if vm.sparse_backing().is_some() {
            return Ok(());
        }
        vm.set_sparse_backing(self.sparse_backing(dev)?)
    }
}

/// An open file of the driver.
pub type File<B> = drm::File<TyrFile<B>>;

impl<B: Backend> drm::DriverFile for TyrFile<B> {
    type Driver = TyrDriver<B>;

    fn open(_device: &TyrDevice<B>) -> DrmResult<Self> {
        Ok(TyrFile {
            vms: Lock::new(env::IdMap::new(), crate::lock_class!(c"tyr_file_vms"))?,
            groups: Lock::new(env::IdMap::new(), crate::lock_class!(c"tyr_file_groups"))?,
            queues: core::sync::atomic::AtomicUsize::new(0),
            user_mmio_offset: core::sync::atomic::AtomicU64::new(
                uapi::DRM_PANTHOR_USER_MMIO_OFFSET,
            ),
            sparse: Lock::new(None, crate::lock_class!(c"tyr_file_sparse"))?,
            heap_budget: env::Arc::try_new(HeapBudget::default())?,
            pt_budget: env::Arc::try_new(vm::PtBudget::default())?,
        })
    }

    fn close(&self, device: &TyrDevice<B>) {
        let groups = core::mem::take(&mut *self.groups.guard());
        for g in groups.into_values() {
            device.destroy_group(&g);
        }
        let vms = core::mem::take(&mut *self.vms.guard());
        for vm in vms.into_values() {
            release_vm(device, &vm);
        }
    }
}

/// Takes the address space away from a VM that is going away, and its tiler heaps (their
/// chunks are unmapped before they are freed, so a job still using them faults).
pub(crate) fn release_vm<B: Backend>(dev: &DevInner<B>, vm: &LockOf<B, TyrVm<B>>) {
    let key = vm.guard().key();
    dev.heaps.destroy_pool(&dev.backend, &dev.slots, key);
    dev.sched.binds.remove(key);
    let mut slots = dev.slots.guard();
    {
        let mut vms = dev.vm_zombie.guard();
        if slots.is_pinned(key) {
            // A group of the VM holds a group slot: the address space goes when it is
            // unbound. (The entry was made with the VM.)
            if let Some(zombie) = vms.get_mut(key) {
                *zombie = true;
            }
            return;
        }
        vms.remove(key);
    }
    if let Some(slot) = slots.release(key) {
        // A failure leaves the slot faulting; the VM's tables are freed only after this.
        let _ = mmu::disable(&dev.backend, slot, false);
    }
}

/// Gives VM `id` of `file` an address space (evicting the least recently used VM that no
/// running group needs) and returns the slot.
///
/// # Errors
///
/// [`Error::Invalid`] for an unknown VM, [`Error::Busy`] if every address space is held by a VM
/// with running groups, the MMU's errors.
pub fn vm_activate<B: Backend>(
    dev: &TyrDevice<B>,
    file: &drm::File<TyrFile<B>>,
    id: u32,
) -> Result<usize> {
    let vm = file.inner().vm(id)?;
    let vm = vm.guard();
    dev.activate(&vm)
}

/// The address space VM `id` of `file` holds, if any.
pub fn vm_slot<B: Backend>(
    dev: &TyrDevice<B>,
    file: &drm::File<TyrFile<B>>,
    id: u32,
) -> Result<Option<usize>> {
    let key = (*file.inner().vm(id)?).guard().key();
    Ok(dev.slots.guard().slot_of(key))
}

impl<B: Backend> DevInner<B> {
    /// Creates a group with the given queues in `vm` and registers it in `file`.
    pub(crate) fn create_group(
        this: &SharedDev<B>,
        dev: &TyrDevice<B>,
        file: &File<B>,
        vm: SharedVm<B>,
        qargs: &[uapi::QueueCreate],
        priority: u8,
    ) -> Result<u32> {
        // The file's share of the queue interfaces, given back on every failure below and by
        // `remove_group` once the group is published.
        file.inner().reserve_queues(qargs.len())?;
        let r = Self::create_group_reserved(this, dev, file, vm, qargs, priority);
        if r.is_err() {
            file.inner().release_queues(qargs.len());
        }
        r
    }

    /// Queue `i` of a group being made, over ring memory `m`.
    ///
    /// Never inlined: its locals (the ring, the queue's configuration, the lock) would add to
    /// `create_group_reserved`'s frame, which is on the stack while the group memory's mapping
    /// waits for the MMU (see `xtask/src/frames.rs`).
    #[inline(never)]
    fn new_group_queue(
        this: &SharedDev<B>,
        state: &env::Arc<GroupState, B::Alloc>,
        i: usize,
        m: QueueMem,
        q: &uapi::QueueCreate,
    ) -> Result<GroupQueue<B>> {
        let ring = RingHw::new(env::Arc::downgrade(this), state.clone(), i, m)?;
        let config = sched::queue_config(q.ringbuf_size);
        // Made in place: a queue holds its job slots inline (tens of KiB).
        let jq = env::Box::try_new_in_place(|slot| {
            jobqueue::Queue::init_in_place(
                slot,
                ring,
                this.backend.executor().clone(),
                sched::SchedClock(this.backend.timer_clock().clone()),
                config,
            )
            .map_err(|_| Error::Invalid)
        })?;
        // Eviction locks a group's queues together, in index order.
        let class = crate::lock_class_nth!(c"tyr_job_queue", i, crate::fw::MAX_CS_PER_CSG);
        let jq = Lock::new(jq, class)?;
        Ok(GroupQueue {
            jq,
            config,
            alloc: this.backend.new_job_alloc()?,
            // Checked by GROUP_CREATE (at most 15).
            priority: q.priority,
        })
    }

    fn create_group_reserved(
        this: &SharedDev<B>,
        dev: &TyrDevice<B>,
        file: &File<B>,
        vm: SharedVm<B>,
        qargs: &[uapi::QueueCreate],
        priority: u8,
    ) -> Result<u32> {
        let size = sched::group_mem_size(qargs.iter().map(|q| q.ringbuf_size));
        // What can be made before any resource is taken is made first: the failures below
        // give back what they took.
        let teardown = Lock::new((), crate::lock_class!(c"tyr_group_teardown"))?;
        let mut queues = env::Vec::try_with_capacity(qargs.len())?;
        let state = env::Arc::try_new(GroupState::new(priority))?;
        let mut vmg = vm.guard();
        if vmg.is_unusable() {
            return Err(Error::Invalid);
        }
        let vm_key = vmg.key();
        let bo = gem::Object::<TyrBo<B>>::new(
            dev,
            size as usize,
            BoArgs::new(
                this.backend.dma().clone(),
                this.key(),
                uapi::DRM_PANTHOR_BO_NO_MMAP,
                vm_key,
            ),
        )?;
        let mem = BoRef(bo);
        let base = mem.0.dma_addr();
        let va = vmg.alloc_kernel_va()?;
        let mapped = {
            let slots = this.slots.guard();
            let mut upd = AsUpdate {
                backend: &this.backend,
                slot: slots.slot_of(vm_key),
            };
            vmg.map_kernel(va, base, size, &mut upd)
        };
        match mapped {
            Ok(()) => {}
            Err(crate::vm::KernelMapError::NotMapped(e)) => {
                // Nothing maps the memory: the VA goes back, the object is freed.
                vmg.free_kernel_va(va);
                return Err(e);
            }
            Err(crate::vm::KernelMapError::Stuck(e)) => {
                // The tables map the object and the MMU did not confirm it: the GPU may reach
                // it, so it is kept (a reference never dropped) and the VA stays taken.
                crate::vm::keep_pages(size);
                core::mem::forget(mem);
                return Err(e);
            }
        }
        drop(vmg);
        let iface_slots = match this.sched.alloc_iface(qargs.len()) {
            Ok(s) => s,
            Err(e) => {
                this.unmap_group_mem(&vm, va, &mem);
                return Err(e);
            }
        };
        // Given back by the group's teardown, which every failure after the group is made goes
        // through.
        let suspend_va = match this.take_suspend_buf() {
            Ok(va) => va,
            Err(e) => {
                this.sched.free_iface(&iface_slots);
                this.unmap_group_mem(&vm, va, &mem);
                return Err(e);
            }
        };
        let mut off = 0u64;
        let sync_base = size - PAGE_SIZE;
        let w = Words(this.backend.dma());
        for (i, q) in qargs.iter().enumerate() {
            let iface = QUEUE_IFACE_BASE + iface_slots[i] as u64 * QUEUE_IFACE_SIZE;
            // Fresh interface words: nothing inserted, nothing extracted.
            for k in 0..4 {
                w.wr64(this.fw.base + iface + 8 * k, 0);
            }
            let m = QueueMem {
                ring_va: va + off,
                ring_dma: base + off,
                ring_size: u64::from(q.ringbuf_size),
                sync_va: va + sync_base + i as u64 * sched::SYNCOBJ_SIZE,
                sync_dma: base + sync_base + i as u64 * sched::SYNCOBJ_SIZE,
                iface,
            };
            off += u64::from(q.ringbuf_size);
            match Self::new_group_queue(this, &state, i, m, q) {
                Ok(gq) => {
                    // Room for every queue was made above.
                    let _ = queues.push_within_capacity(gq);
                }
                Err(e) => {
                    this.put_suspend_buf(suspend_va);
                    this.sched.free_iface(&iface_slots);
                    this.unmap_group_mem(&vm, va, &mem);
                    return Err(e);
                }
            }
        }
        let key = this.key();
        let group = env::Arc::try_new_or_back(Group {
            key,
            vm,
            vm_key,
            state,
            queues,
            mem,
            mem_va: va,
            suspend_va,
            iface_slots,
            teardown,
        });
        let group = match group {
            Ok(g) => g,
            Err(g) => {
                // Never registered: torn down as a destroyed group, giving everything back.
                this.destroy_group(&g);
                return Err(Error::NoMemory);
            }
        };
        // Registered with the scheduler before the handle is published: a GROUP_DESTROY racing
        // with this call can only find a group that its teardown removes everywhere.
        if let Err(e) = this.sched.insert_group(group.clone()) {
            this.destroy_group(&group);
            return Err(e);
        }
        match file.inner().insert_group(group.clone()) {
            Ok(h) => Ok(h),
            Err(e) => {
                // Never visible to userspace: tear it down like a destroyed group.
                this.destroy_group(&group);
                Err(e)
            }
        }
    }
}
