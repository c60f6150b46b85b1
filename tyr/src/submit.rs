// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The group ioctls and the device side of scheduling: interrupts, the work item, group
//! slots, teardown and GPU reset (see [`crate::sched`] for the design).

use core::any::Any;
use core::sync::atomic::Ordering;
use core::task::Waker;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use drm_ctx::drm::gem;
use drm_ctx::host::syncobj::{FenceRef, Registration, SignalledFence, SyncFence};
use drm_ctx::{Error as DrmError, Result as DrmResult};
use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{Cost, Executor, Fence as _, FenceError, MaxDeps, PreparedJob, SignalFence as _};
use register::io::Io;

use crate::backend::{Backend, Events, PAGE_SIZE};
use crate::csf::{cs, csg, glb};
use crate::driver::{AsUpdate, BoArgs, BoRef, DevInner, File, TyrBo, TyrDevice};
use crate::regs::{
    AS_FAULTADDRESS, AS_FAULTSTATUS, DOORBELL, GPU_IRQ_CLEAR, GPU_IRQ_STATUS, JOB_IRQ_CLEAR,
    JOB_IRQ_STATUS, MMU_IRQ_CLEAR, MMU_IRQ_STATUS,
};
use crate::sched::{
    self, Group, GroupQueue, GroupState, JobPayload, QueueMem, RingHw, Words, JOB_INSTRS,
    JOB_SLOTS, MAX_STREAM_SIZE, NO_SLOT, QUEUE_IFACE_BASE, QUEUE_IFACE_SIZE, RINGBUF_SIZES,
};
use crate::uapi::{self, UObj};
use crate::{dev_err, dev_info, gpu, mmu, Error, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------- syncobj fences

/// A job fence as a syncobj holds it.
#[derive(Clone, Debug)]
pub struct JobSyncFence(pub HostFence);

impl SyncFence for JobSyncFence {
    fn status(&self) -> Option<core::result::Result<(), i32>> {
        self.0.status().map(|r| r.map_err(|e| e.to_errno()))
    }

    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        let cb = HostFence::new_callback();
        match self.0.add_callback(&cb, waker) {
            jobqueue::AddCallback::Queued => {
                let fence = self.0.clone();
                Registration::new(move || {
                    fence.remove_callback(&cb);
                })
            }
            // A fresh node is never busy: the fence has signalled.
            jobqueue::AddCallback::Signalled(_) | jobqueue::AddCallback::Busy => {
                waker.wake_by_ref();
                Registration::done()
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The job fence behind a syncobj's fence ([`Error::Invalid`] for a foreign one).
pub(crate) fn job_fence(f: &FenceRef) -> Result<HostFence> {
    let any = f.as_any();
    if let Some(j) = any.downcast_ref::<JobSyncFence>() {
        return Ok(j.0.clone());
    }
    if any.downcast_ref::<SignalledFence>().is_some() {
        return Ok(HostFence::signalled(Ok(())));
    }
    Err(Error::Invalid)
}

// ---------------------------------------------------------------- user arrays

/// Reads an array of user objects as `PANTHOR_UOBJ_GET_ARRAY` does.
pub(crate) fn read_array<T: UObj>(
    user: &dyn drm_ctx::uaccess::UserMemory,
    a: &uapi::ObjArray,
    max: u32,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    if a.count == 0 {
        return Ok(out);
    }
    if a.count > max || (a.stride as usize) < T::MIN_SIZE {
        return Err(Error::Invalid);
    }
    out.try_reserve(a.count as usize)
        .map_err(|_| Error::NoMemory)?;
    for i in 0..u64::from(a.count) {
        let at = i
            .checked_mul(u64::from(a.stride))
            .and_then(|o| o.checked_add(a.array))
            .ok_or(Error::Fault)?;
        out.push(crate::driver::get_uobj(user, at, a.stride)?);
    }
    Ok(out)
}

/// Largest number of sync operations per job.
pub const MAX_SYNCS: u32 = 64;

/// Checks a sync op as panthor does; only binary syncobjs are supported.
pub(crate) fn check_sync_op(op: &uapi::SyncOp) -> Result {
    let known = uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK | uapi::DRM_PANTHOR_SYNC_OP_SIGNAL;
    if op.flags & !known != 0 {
        return Err(Error::Invalid);
    }
    match op.flags & uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK {
        uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ if op.timeline_value == 0 => Ok(()),
        // Timeline syncobjs are not supported by the host DRM core.
        _ => Err(Error::Invalid),
    }
}

/// Splits the sync ops of one job into the fences it waits on and the syncobjs it signals.
///
/// A wait on a syncobj that an earlier job of the same call signals depends on that job
/// (`earlier` finds its done fence); otherwise the syncobj must exist (`ENOENT`) and hold a fence
/// (`EINVAL`). Signalled syncobjs must exist (`EINVAL`), as panthor checks them.
pub(crate) fn resolve_syncs(
    syncs: &[uapi::SyncOp],
    table: &drm_ctx::host::syncobj::SyncobjTable,
    earlier: impl Fn(u32) -> Option<HostFence>,
) -> Result<(Vec<HostFence>, Vec<u32>)> {
    let mut waits = Vec::new();
    let mut signals = Vec::new();
    for op in syncs {
        check_sync_op(op)?;
        if op.flags & uapi::DRM_PANTHOR_SYNC_OP_SIGNAL != 0 {
            if !table.contains(op.handle) {
                return Err(Error::Invalid);
            }
            signals.push(op.handle);
        } else {
            let fence = match earlier(op.handle) {
                Some(f) => f,
                None => match table.fence(op.handle)? {
                    Some(f) => job_fence(&f)?,
                    None => return Err(Error::Invalid),
                },
            };
            waits.push(fence);
        }
    }
    Ok((waits, signals))
}

// ---------------------------------------------------------------- GROUP_CREATE / DESTROY

pub(crate) fn group_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::GroupCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    let info = &dev.gpu_info.raw;
    let prio_ok = match args.priority {
        uapi::PANTHOR_GROUP_PRIORITY_LOW | uapi::PANTHOR_GROUP_PRIORITY_MEDIUM => true,
        uapi::PANTHOR_GROUP_PRIORITY_HIGH | uapi::PANTHOR_GROUP_PRIORITY_REALTIME => {
            let o = file.options();
            if !(o.sys_admin || o.master) {
                return Err(DrmError::Access);
            }
            true
        }
        _ => false,
    };
    if args.pad != 0
        || !prio_ok
        || args.compute_core_mask & !info.shader_present != 0
        || args.fragment_core_mask & !info.shader_present != 0
        || args.tiler_core_mask & !info.tiler_present != 0
        || args.compute_core_mask.count_ones() < u32::from(args.max_compute_cores)
        || args.fragment_core_mask.count_ones() < u32::from(args.max_fragment_cores)
        || args.tiler_core_mask.count_ones() < u32::from(args.max_tiler_cores)
        || args.queues.count == 0
        || args.queues.count > dev.csif_info.cs_slot_count
    {
        return Err(DrmError::Invalid);
    }
    let qargs: Vec<uapi::QueueCreate> =
        read_array(file.user(), &args.queues, dev.csif_info.cs_slot_count)?;
    for q in &qargs {
        if q.pad != [0; 3]
            || q.priority > 15
            || !RINGBUF_SIZES.contains(&q.ringbuf_size)
            || !q.ringbuf_size.is_power_of_two()
        {
            return Err(DrmError::Invalid);
        }
    }
    let vm = file.inner().vm(args.vm_id)?;
    let handle = dev.shared().create_group(dev, file, vm, &qargs)?;
    args.group_handle = handle;
    Ok(0)
}

impl<B: Backend> DevInner<B> {
    /// Creates a group with the given queues in `vm` and registers it in `file`.
    fn create_group(
        self: &Arc<Self>,
        dev: &TyrDevice<B>,
        file: &File<B>,
        vm: Arc<Mutex<crate::driver::TyrVm<B>>>,
        qargs: &[uapi::QueueCreate],
    ) -> Result<u32> {
        // The file's share of the queue interfaces, given back on every failure below and by
        // `remove_group` once the group is published.
        file.inner().reserve_queues(qargs.len())?;
        let r = self.create_group_reserved(dev, file, vm, qargs);
        if r.is_err() {
            file.inner().release_queues(qargs.len());
        }
        r
    }

    fn create_group_reserved(
        self: &Arc<Self>,
        dev: &TyrDevice<B>,
        file: &File<B>,
        vm: Arc<Mutex<crate::driver::TyrVm<B>>>,
        qargs: &[uapi::QueueCreate],
    ) -> Result<u32> {
        let rings: Vec<u32> = qargs.iter().map(|q| q.ringbuf_size).collect();
        let size = sched::group_mem_size(&rings);
        let mut vmg = lock(&vm);
        if vmg.is_unusable() {
            return Err(Error::Invalid);
        }
        let vm_key = vmg.key();
        let bo = gem::Object::<TyrBo<B>>::new(
            dev,
            size as usize,
            BoArgs::new(
                self.backend.dma().clone(),
                self.key(),
                uapi::DRM_PANTHOR_BO_NO_MMAP,
                vm_key,
            ),
        )?;
        let mem = BoRef(bo);
        let base = mem.0.dma_addr();
        let va = vmg.alloc_kernel_va()?;
        let mapped = {
            let slots = lock(&self.slots);
            let mut upd = AsUpdate {
                backend: &self.backend,
                slot: slots.slot_of(vm_key),
            };
            vmg.map_kernel(va, base, size, &mut upd)
        };
        if let Err(e) = mapped {
            vmg.free_kernel_va(va);
            return Err(e);
        }
        drop(vmg);
        let iface_slots = match self.sched.alloc_iface(qargs.len()) {
            Ok(s) => s,
            Err(e) => {
                self.unmap_group_mem(&vm, va, size);
                return Err(e);
            }
        };
        let state = Arc::new(GroupState {
            slot: core::sync::atomic::AtomicUsize::new(NO_SLOT),
            ..GroupState::default()
        });
        let mut queues = Vec::new();
        let mut off = 0u64;
        let sync_base = size - PAGE_SIZE;
        let w = Words(self.backend.dma());
        for (i, q) in qargs.iter().enumerate() {
            let iface = QUEUE_IFACE_BASE + iface_slots[i] as u64 * QUEUE_IFACE_SIZE;
            // Fresh interface words: nothing inserted, nothing extracted.
            for k in 0..4 {
                w.wr64(self.fw.base + iface + 8 * k, 0);
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
            let ring = RingHw::new(Arc::downgrade(self), state.clone(), i, m);
            let config = sched::queue_config(q.ringbuf_size);
            let jq = jobqueue::Queue::new(
                ring,
                self.backend.executor().clone(),
                sched::SchedClock(self.backend.clock().clone()),
                config,
            );
            match jq {
                Ok(jq) => queues.push(GroupQueue {
                    jq: Mutex::new(jq),
                    config,
                }),
                Err(_) => {
                    self.sched.free_iface(&iface_slots);
                    self.unmap_group_mem(&vm, va, size);
                    return Err(Error::Invalid);
                }
            }
        }
        let key = self.key();
        let group = Arc::new(Group {
            key,
            vm,
            vm_key,
            state,
            queues,
            mem,
            mem_va: va,
            iface_slots,
            teardown: Mutex::new(()),
        });
        // Registered with the scheduler before the handle is published: a GROUP_DESTROY racing
        // with this call can only find a group that its teardown removes everywhere.
        lock(&self.sched.groups).insert(key, group.clone());
        match file.inner().insert_group(group.clone()) {
            Ok(h) => Ok(h),
            Err(e) => {
                // Never visible to userspace: tear it down like a destroyed group.
                self.destroy_group(&group);
                Err(e)
            }
        }
    }

    fn unmap_group_mem(&self, vm: &Mutex<crate::driver::TyrVm<B>>, va: u64, size: u64) {
        let mut vmg = lock(vm);
        let slots = lock(&self.slots);
        let mut upd = AsUpdate {
            backend: &self.backend,
            slot: slots.slot_of(vmg.key()),
        };
        let _ = vmg.unmap_kernel(va, size, &mut upd);
        drop(slots);
        vmg.free_kernel_va(va);
    }

    /// Stops a dead group for good: fails what is on its rings, cancels what is queued, takes
    /// its slot away and frees its memory. Idempotent.
    pub(crate) fn teardown_group(&self, g: &Group<B>, first: FenceError) {
        // A concurrent teardown (work item and GROUP_DESTROY) finishes before this returns.
        let _serial = lock(&g.teardown);
        if g.state.torn_down.swap(true, Ordering::AcqRel) {
            return;
        }
        self.unbind_group(g);
        let fatal = g.state.fatal_queues.load(Ordering::Acquire);
        for (i, q) in g.queues.iter().enumerate() {
            let mut jq = lock(&q.jq);
            let err = if fatal & (1 << i) != 0 {
                FenceError::new(-14).unwrap_or(FenceError::IO)
            } else {
                first
            };
            // Jobs the GPU finished keep their result.
            jq.backend_mut().complete(self.backend.dma());
            jq.backend_mut().fail_inflight(err);
            jq.run();
            jq.kill();
        }
        let size = g.mem.0.size() as u64;
        self.unmap_group_mem(&g.vm, g.mem_va, size);
        self.sched.free_iface(&g.iface_slots);
        // The last group of a VM its file already destroyed: its address space goes too.
        if Arc::strong_count(&g.vm) == 1 {
            lock(&self.zombie_vms).remove(&g.vm_key);
            self.release_unpinned_as(&mut lock(&self.slots), g.vm_key);
        }
        lock(&self.sched.groups).remove(&g.key);
    }

    /// Destroys a group (`GROUP_DESTROY`, file close).
    pub(crate) fn destroy_group(&self, g: &Group<B>) {
        g.state.dead.store(true, Ordering::Release);
        self.teardown_group(g, FenceError::CANCELED);
    }
}

pub(crate) fn group_destroy<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::GroupDestroy,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let g = file
        .inner()
        .remove_group(args.group_handle)
        .ok_or(DrmError::Invalid)?;
    dev.destroy_group(&g);
    Ok(0)
}

pub(crate) fn group_get_state<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::GroupGetState,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let g = file
        .inner()
        .group(args.group_handle)
        .ok_or(DrmError::Invalid)?;
    let (state, fatal) = g.get_state();
    args.state = state;
    args.fatal_queues = fatal;
    Ok(0)
}

// ---------------------------------------------------------------- GROUP_SUBMIT

/// A job of a submission being prepared.
struct Prep {
    queue: usize,
    job: PreparedJob<HostFence, HostAlloc, JobPayload>,
    signals: Vec<u32>,
}

pub(crate) fn group_submit<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::GroupSubmit,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let g = file
        .inner()
        .group(args.group_handle)
        .ok_or(DrmError::Invalid)?;
    if dev.sched.broken.load(Ordering::Acquire) {
        return Err(DrmError::NoDevice);
    }
    // A group that timed out, faulted or is being destroyed cannot run (panthor: EINVAL).
    if g.state.dead.load(Ordering::Acquire) {
        return Err(DrmError::Invalid);
    }
    let subs: Vec<uapi::QueueSubmit> =
        read_array(file.user(), &args.queue_submits, JOB_SLOTS as u32)?;
    let alloc = HostAlloc::new();
    let table = file.syncobjs();
    let mut preps: Vec<Prep> = Vec::new();
    preps
        .try_reserve(subs.len())
        .map_err(|_| DrmError::NoMemory)?;
    // Prepare every job; nothing is visible until all are prepared.
    for qs in &subs {
        if qs.pad != 0
            || (qs.stream_size == 0) != (qs.stream_addr == 0)
            || qs.stream_addr & 63 != 0
            || qs.stream_size & 7 != 0
            || qs.latest_flush & (0x7f << 24) != 0
            || qs.stream_size > MAX_STREAM_SIZE
            || qs.queue_index as usize >= g.queues.len()
        {
            return Err(DrmError::Invalid);
        }
        let syncs: Vec<uapi::SyncOp> = read_array(file.user(), &qs.syncs, MAX_SYNCS)?;
        let (waits, signals) = resolve_syncs(&syncs, table, |h| {
            // A syncobj an earlier job of this submission signals: depend on that job.
            preps
                .iter()
                .rev()
                .find(|p| p.signals.contains(&h))
                .map(|p| p.job.done_fence().clone())
        })?;
        let q = &g.queues[qs.queue_index as usize];
        let payload = JobPayload {
            stream_addr: qs.stream_addr,
            stream_size: qs.stream_size,
            hw: HostFence::new(),
        };
        let mut job = PreparedJob::new(
            &alloc,
            &q.config,
            Cost(JOB_INSTRS),
            MaxDeps(waits.len()),
            payload,
        )
        .map_err(|r| Error::from_errno(r.error.to_errno()))?;
        for f in &waits {
            job.add_dependency(f)
                .map_err(|e| Error::from_errno(e.to_errno()))?;
        }
        preps.push(Prep {
            queue: qs.queue_index as usize,
            job,
            signals,
        });
    }
    // Lock the queues involved (in index order) and check there is room for every job.
    let mut locks: Vec<(usize, MutexGuard<'_, sched::JobQueue<B>>)> = Vec::new();
    for (i, q) in g.queues.iter().enumerate() {
        let n = preps.iter().filter(|p| p.queue == i).count();
        if n == 0 {
            continue;
        }
        let jq = lock(&q.jq);
        if jq.is_killed() || g.state.dead.load(Ordering::Acquire) {
            return Err(DrmError::Invalid);
        }
        if jq.pending_jobs() + n > JOB_SLOTS {
            return Err(DrmError::Busy);
        }
        locks.push((i, jq));
    }
    // Commit: nothing fails from here on.
    for p in preps {
        let Some((_, jq)) = locks.iter_mut().find(|(i, _)| *i == p.queue) else {
            continue;
        };
        let Ok(r) = jq.reserve() else {
            // Ruled out above (room checked, queue not killed, under its lock); should it
            // happen anyway, later jobs of this submission depending on this one fail too.
            p.job.done_fence().signal(Err(FenceError::CANCELED));
            continue;
        };
        let done = r.commit(p.job).done;
        for h in p.signals {
            let fence: FenceRef = Arc::new(JobSyncFence(done.clone()));
            let _ = table.replace(h, Some(fence));
        }
    }
    drop(locks);
    dev.backend.executor().waker().wake_by_ref();
    Ok(0)
}

// ---------------------------------------------------------------- interrupts and work

impl<B: Backend> Events for DevInner<B> {
    fn irq(&self) {
        let io = self.backend.io();
        let gpu = io.read(GPU_IRQ_STATUS).into_raw();
        if gpu != 0 {
            io.write_reg(GPU_IRQ_CLEAR::from(gpu));
        }
        let mmu = io.read(MMU_IRQ_STATUS).into_raw();
        if mmu != 0 {
            self.mmu_irq(mmu);
            io.write_reg(MMU_IRQ_CLEAR::from(mmu));
        }
        let job = io.read(JOB_IRQ_STATUS).into_raw();
        if job != 0 {
            io.write_reg(JOB_IRQ_CLEAR::from(job));
            for n in 0..self.fw.csg.len().min(31) {
                if job & (1 << n) != 0 {
                    self.csg_irq(n);
                }
            }
            self.collect_completions();
        }
        self.backend.executor().waker().wake_by_ref();
    }

    fn work(&self) {
        self.run_bind_queues();
        let groups = self.sched.group_list();
        for g in &groups {
            for q in &g.queues {
                lock(&q.jq).run();
            }
        }
        for g in &groups {
            if g.state.dead.load(Ordering::Acquire) {
                self.teardown_group(g, FenceError::CANCELED);
            }
        }
        if self.sched.shared.reset_needed.swap(false, Ordering::AcqRel) {
            self.reset();
        }
        self.schedule();
    }
}

impl<B: Backend> DevInner<B> {
    fn fw_words(&self) -> Words<'_, B::Dma> {
        Words(self.backend.dma())
    }

    /// The group in slot `n`.
    fn group_in(&self, n: usize) -> Option<Arc<Group<B>>> {
        let key = (*lock(&self.sched.slots).get(n)?)?;
        lock(&self.sched.groups).get(&key).cloned()
    }

    /// Acknowledges the events of group slot `n` and handles stream faults.
    fn csg_irq(&self, n: usize) {
        let Some(&(cin, cout)) = self.fw.csg.get(n) else {
            return;
        };
        let w = self.fw_words();
        let base = self.fw.base;
        let req = w.rd32(base + cin + csg::REQ);
        let ack = w.rd32(base + cout + csg::REQ);
        let events = (req ^ ack) & (csg::SYNC_UPDATE | csg::IDLE);
        if events != 0 {
            w.wr32(base + cin + csg::REQ, req ^ events);
        }
        let irq_req = w.rd32(base + cout + csg::CS_IRQ_REQ);
        let irq_ack = w.rd32(base + cin + csg::CS_IRQ_ACK);
        let pending = irq_req ^ irq_ack;
        if pending == 0 {
            return;
        }
        let group = self.group_in(n);
        for (s, &(sin, sout)) in self.fw.cs[n].iter().enumerate() {
            if pending & (1 << s) == 0 {
                continue;
            }
            let sreq = w.rd32(base + sin + cs::REQ);
            let sack = w.rd32(base + sout + cs::REQ);
            let ev = (sreq ^ sack) & (cs::FAULT_EVENT | cs::FATAL_EVENT);
            if ev == 0 {
                continue;
            }
            w.wr32(base + sin + cs::REQ, sreq ^ ev);
            let (code, info) = if ev & cs::FAULT_EVENT != 0 {
                (
                    w.rd32(base + sout + cs::FAULT) & 0xff,
                    w.rd64(base + sout + cs::FAULT_INFO),
                )
            } else {
                (w.rd32(base + sout + cs::FATAL) & 0xff, 0)
            };
            dev_err!(
                &self.backend,
                "CSG slot {n} CS {s}: fault {code:#x} at {info:#x}"
            );
            if let Some(g) = &group {
                g.state.fatal_queues.fetch_or(1 << s, Ordering::AcqRel);
                g.state
                    .state
                    .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, Ordering::AcqRel);
                g.state.dead.store(true, Ordering::Release);
            }
        }
        w.wr32(base + cin + csg::CS_IRQ_ACK, irq_req);
    }

    /// Page faults: the VM of the faulting address space becomes unusable.
    fn mmu_irq(&self, status: u32) {
        let io = self.backend.io();
        for a in 0..16usize {
            if status & (1 << a) == 0 {
                continue;
            }
            let fs = AS_FAULTSTATUS::try_at(a).map(|l| io.read(l).into_raw());
            let addr = AS_FAULTADDRESS::try_at(a).map(|l| io.read(l).into_raw());
            dev_err!(
                &self.backend,
                "Unhandled page fault in AS{a} (status {:#x}) at VA {:#x}",
                fs.unwrap_or(0),
                addr.unwrap_or(0)
            );
            let Some(key) = lock(&self.slots).vm_in(a) else {
                continue;
            };
            for g in lock(&self.sched.groups).values() {
                if g.vm_key == key {
                    lock(&g.vm).set_unusable();
                    g.state
                        .state
                        .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, Ordering::AcqRel);
                    g.state.dead.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Signals the hardware fences of every completed job of the groups holding a slot.
    fn collect_completions(&self) {
        let dma = self.backend.dma();
        for g in lock(&self.sched.groups).values() {
            if g.state.slot.load(Ordering::Acquire) == NO_SLOT {
                continue;
            }
            for q in &g.queues {
                lock(&q.jq).backend_mut().complete(dma);
            }
        }
    }

    fn glb_doorbell(&self, slot_bits: u32) {
        let w = self.fw_words();
        let base = self.fw.base;
        let (gin, _) = self.fw.glb;
        let db = w.rd32(base + gin + glb::DOORBELL_REQ);
        w.wr32(base + gin + glb::DOORBELL_REQ, db ^ slot_bits);
        if let Some(r) = DOORBELL::try_at(0) {
            self.backend
                .io()
                .write(r, DOORBELL::zeroed().with_ring(true));
        }
    }

    /// Puts `g` into group slot `n`: address space, stream configuration, start.
    fn bind_group(&self, n: usize, g: &Group<B>) -> Result {
        // A concurrent GROUP_DESTROY must see either no slot or the whole binding.
        let _serial = lock(&g.teardown);
        if g.state.dead.load(Ordering::Acquire) || g.state.torn_down.load(Ordering::Acquire) {
            return Ok(());
        }
        let as_slot = {
            let vm = lock(&g.vm);
            if vm.is_unusable() {
                return Err(Error::Invalid);
            }
            let s = self.activate(&vm)?;
            lock(&self.slots).pin(g.vm_key);
            s
        };
        let w = self.fw_words();
        let base = self.fw.base;
        let (cin, _) = self.fw.csg[n];
        let mut streams = 0u32;
        for (s, q) in g.queues.iter().enumerate() {
            let Some(&(sin, _)) = self.fw.cs[n].get(s) else {
                continue;
            };
            let jq = lock(&q.jq);
            let r = jq.backend();
            let mcu = crate::fw::MCU_SHARED_REGION_START;
            w.wr64(base + sin + cs::RINGBUF_BASE, r.ring_va);
            w.wr32(base + sin + cs::RINGBUF_SIZE, r.ring_size as u32);
            w.wr64(base + sin + cs::RINGBUF_INPUT, mcu + r.iface);
            w.wr64(base + sin + cs::RINGBUF_OUTPUT, mcu + r.iface + 0x10);
            w.wr32(base + sin + cs::CONFIG, (1 + n as u32) << 8);
            w.wr32(base + sin + cs::ACK_IRQ_MASK, 0);
            let req = w.rd32(base + sin + cs::REQ);
            w.wr32(
                base + sin + cs::REQ,
                (req & !cs::STATE_MASK) | cs::STATE_START,
            );
            streams |= 1 << s;
        }
        w.wr32(base + cin + csg::CONFIG, as_slot as u32);
        w.wr32(base + cin + csg::ACK_IRQ_MASK, csg::SYNC_UPDATE | csg::IDLE);
        let req = w.rd32(base + cin + csg::REQ);
        w.wr32(
            base + cin + csg::REQ,
            (req & !csg::STATE_MASK) | csg::STATE_START,
        );
        let db = w.rd32(base + cin + csg::DOORBELL_REQ);
        w.wr32(base + cin + csg::DOORBELL_REQ, db ^ streams);
        g.state.slot.store(n, Ordering::Release);
        lock(&self.sched.slots)[n] = Some(g.key);
        self.glb_doorbell(1 << n);
        sched::ring_doorbell(&self.backend, n);
        Ok(())
    }

    /// Takes `g`'s slot away (terminating its streams), if it has one.
    fn unbind_group(&self, g: &Group<B>) {
        let n = g.state.slot.swap(NO_SLOT, Ordering::AcqRel);
        if n == NO_SLOT {
            return;
        }
        if let Some(&(cin, _)) = self.fw.csg.get(n) {
            let w = self.fw_words();
            let base = self.fw.base;
            let req = w.rd32(base + cin + csg::REQ);
            w.wr32(
                base + cin + csg::REQ,
                (req & !csg::STATE_MASK) | csg::STATE_TERMINATE,
            );
            // The streams stop with the group; their requests say so too.
            for &(sin, _) in &self.fw.cs[n] {
                let sreq = w.rd32(base + sin + cs::REQ);
                w.wr32(base + sin + cs::REQ, sreq & !cs::STATE_MASK);
            }
            self.glb_doorbell(1 << n);
        }
        if let Some(s) = lock(&self.sched.slots).get_mut(n) {
            *s = None;
        }
        let mut slots = lock(&self.slots);
        slots.unpin(g.vm_key);
        // A VM destroyed while its group ran keeps its address space until now.
        if !slots.is_pinned(g.vm_key) && lock(&self.zombie_vms).remove(&g.vm_key) {
            self.release_unpinned_as(&mut slots, g.vm_key);
        }
    }

    /// Takes the address space of VM `vm_key`, which its file destroyed, away, unless a
    /// resident group still pins it. A failure to disable it leaves the slot faulting.
    fn release_unpinned_as(&self, slots: &mut mmu::AsSlots, vm_key: u64) {
        if !slots.is_pinned(vm_key) {
            if let Some(a) = slots.release(vm_key) {
                let _ = mmu::disable(&self.backend, a, false);
            }
        }
    }

    /// Gives slots to groups with work. While some group waits, resident groups with nothing
    /// on their rings give their slots (and their address-space pins) up first.
    fn schedule(&self) {
        if self.sched.broken.load(Ordering::Acquire) {
            return;
        }
        let groups = self.sched.group_list();
        let waiting = |g: &Group<B>| {
            !g.state.dead.load(Ordering::Acquire)
                && g.state.slot.load(Ordering::Acquire) == NO_SLOT
                && g.state.wants_slot.load(Ordering::Acquire)
        };
        if !groups.iter().any(|g| waiting(g)) {
            return;
        }
        self.evict_idle();
        for g in groups.iter().filter(|g| waiting(g)) {
            let free = lock(&self.sched.slots).iter().position(Option::is_none);
            let Some(n) = free else {
                break;
            };
            match self.bind_group(n, g) {
                Ok(()) => g.state.wants_slot.store(false, Ordering::Release),
                // No address space right now: try again at the next wake-up.
                Err(Error::Busy) => {}
                Err(e) => {
                    dev_err!(&self.backend, "Cannot start group: {e}");
                    g.state.dead.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Takes the slots of the groups whose queues have nothing on their rings.
    fn evict_idle(&self) {
        let dma = self.backend.dma();
        for n in 0..self.fw.csg.len() {
            let Some(g) = self.group_in(n) else {
                continue;
            };
            let idle = g.queues.iter().all(|q| {
                let mut jq = lock(&q.jq);
                jq.backend_mut().complete(dma);
                jq.backend().is_idle()
            });
            if idle {
                self.unbind_group(&g);
            }
        }
    }

    /// Resets the GPU after a timeout and brings every surviving group back.
    fn reset(&self) {
        let b = &self.backend;
        self.sched.shared.resets.fetch_add(1, Ordering::AcqRel);
        // The reset takes every slot away from the hardware.
        for n in 0..self.fw.csg.len() {
            if let Some(g) = self.group_in(n) {
                g.state.slot.store(NO_SLOT, Ordering::Release);
            }
            if let Some(s) = lock(&self.sched.slots).get_mut(n) {
                *s = None;
            }
        }
        lock(&self.slots).clear();
        // No address space is left, so none is waiting to be released.
        lock(&self.zombie_vms).clear();
        let mut ok = false;
        for attempt in 1..=3 {
            if gpu::soft_reset(b).is_ok() {
                ok = true;
                break;
            }
            dev_err!(b, "GPU reset attempt {attempt} failed");
        }
        // The firmware restarts with nothing requested: clear the input blocks so that every
        // request word agrees with the (fresh) acknowledge words.
        if ok {
            let w = self.fw_words();
            let base = self.fw.base;
            for off in [glb::REQ, glb::DOORBELL_REQ] {
                w.wr32(base + self.fw.glb.0 + off, 0);
            }
            for (n, &(cin, _)) in self.fw.csg.iter().enumerate() {
                for off in [csg::REQ, csg::DOORBELL_REQ, csg::CS_IRQ_ACK] {
                    w.wr32(base + cin + off, 0);
                }
                for &(sin, _) in &self.fw.cs[n] {
                    w.wr32(base + sin + cs::REQ, 0);
                }
            }
        }
        let booted = ok
            && gpu::l2_power_on(b).is_ok()
            && {
                let regs = lock(&self.mcu_vm).as_regs();
                regs.and_then(|r| mmu::enable(b, crate::driver::MCU_AS, &r))
                    .is_ok()
            }
            && crate::fw::boot(b, self.fw.base, crate::driver::FW_INTERFACE_SIZE as u64).is_ok();
        if !booted {
            dev_err!(b, "GPU did not come back after a reset; failing all work");
            self.sched.broken.store(true, Ordering::Release);
            for g in self.sched.group_list() {
                g.state
                    .state
                    .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_TIMEDOUT, Ordering::AcqRel);
                g.state.dead.store(true, Ordering::Release);
                self.teardown_group(&g, FenceError::CANCELED);
            }
            return;
        }
        sched::enable_irqs(b);
        dev_info!(b, "GPU reset done; replaying unfinished jobs");
        // Every surviving group restarts from its first unfinished job.
        let w = self.fw_words();
        for g in self.sched.group_list() {
            if g.state.dead.load(Ordering::Acquire) {
                self.teardown_group(&g, FenceError::CANCELED);
                continue;
            }
            let mut pending = false;
            for q in &g.queues {
                let mut jq = lock(&q.jq);
                let r = jq.backend_mut();
                r.complete(b.dma());
                let from = r.replay_from();
                // Output words: extract, active.
                w.wr64(self.fw.base + r.iface + 0x10, from);
                w.wr64(self.fw.base + r.iface + 0x18, 0);
                pending |= !r.is_idle();
            }
            if pending {
                g.state.wants_slot.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syncobj_waiter_that_gives_up_leaves_nothing_on_the_job_fence() {
        let hw = HostFence::new();
        let fence = JobSyncFence(hw.clone());
        // A waiter polling a long job: each poll queues a callback and takes it back.
        for _ in 0..10 {
            let r = fence.wake_on_signal(Waker::noop());
            assert_eq!(hw.queued_callbacks(), 1);
            drop(r);
            assert_eq!(hw.queued_callbacks(), 0);
        }
        // Once the job is done the waiter is woken at once and nothing is queued.
        let kept = fence.wake_on_signal(Waker::noop());
        assert!(hw.signal(Ok(())));
        assert_eq!(hw.queued_callbacks(), 0);
        drop(kept);
        let late = fence.wake_on_signal(Waker::noop());
        assert_eq!(hw.queued_callbacks(), 0);
        drop(late);
        assert_eq!(fence.status(), Some(Ok(())));
    }

    /// Issue 20, suspected item: a reset takes every address space away (and every pin), so
    /// no VM is left waiting for its slot to go; the list of such "zombie" VMs must not keep
    /// them forever.
    #[cfg(feature = "host")]
    #[test]
    #[cfg_attr(miri, ignore = "a probe and a GPU reset take minutes under Miri")]
    fn a_reset_forgets_zombie_vms() {
        let parent = drm_ctx::device::Device::new("mali").unwrap();
        let backend = crate::host::HostBackend::new(mali_sim::Config::g610());
        let reg = crate::driver::probe(&parent, backend).unwrap();
        let dev = reg.device().shared();
        // A VM destroyed while a group of it held a slot.
        lock(&dev.zombie_vms).insert(0x1234);
        assert_eq!(dev.zombie_vm_count(), 1);
        dev.reset();
        assert_eq!(dev.zombie_vm_count(), 0, "a zombie VM outlived the reset");
    }
}
