// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Asynchronous `VM_BIND`: each operation becomes a job of the VM's bind queue.
//!
//! With `DRM_PANTHOR_VM_BIND_ASYNC`, every operation of the array is a job that waits on the
//! syncobjs of its wait operations, changes the mappings once they have signalled, and then
//! signals the syncobjs of its signal operations, so that userspace orders binds and GPU jobs
//! with the same syncobjs. Binds of one VM apply in submission order.
//!
//! Changing mappings happens in the fence-signalling path, so it must not allocate. The
//! ioctl does every check and sets aside the memory applying needs
//! ([`Vm::reserve_bind`](crate::vm::Vm::reserve_bind): VA and VM-BO slots, and page-table
//! pages for the worst case); the job applies with that memory only
//! ([`Vm::apply_reserved`](crate::vm::Vm::apply_reserved)). A job that never applies (a
//! dependency failed, the VM was destroyed) gives its reservation back when it is dropped.
//! While binds are queued, a synchronous `VM_BIND` on the same VM fails with `EBUSY`, since it
//! could consume what they set aside.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::vec::Vec;

use drm_ctx::host::syncobj::FenceRef;
use drm_ctx::{Error as DrmError, Result as DrmResult};
use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{
    Backend as JqBackend, Cost, Executor, FenceError, MaxDeps, PreparedJob, QueueConfig, RunJob,
    SignalCtx, SignalFence, TimedOutJob, TimeoutAction,
};

use crate::backend::Backend;
use crate::driver::{AsUpdate, BoRef, DevInner, File, TyrDevice, TyrVm};
use crate::sched::{SchedClock, JOB_SLOTS, JOB_TIMEOUT};
use crate::submit::JobSyncFence;
use crate::uapi;
use crate::vm::{BindReq, BindReservation};
use crate::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One bind operation waiting to be applied.
pub struct BindPayload<B: Backend> {
    vm: Arc<Mutex<TyrVm<B>>>,
    va: u64,
    size: u64,
    map: Option<(BoRef<B>, u64, u32)>,
    res: BindReservation,
    applied: bool,
    hw: HostFence,
}

impl<B: Backend> Drop for BindPayload<B> {
    fn drop(&mut self) {
        if !self.applied {
            lock(&self.vm).release_bind(self.res);
        }
    }
}

/// The bind queue's backend: applies a bind when the queue runs it.
pub struct BindHw<B: Backend> {
    dev: Weak<DevInner<B>>,
}

impl<B: Backend> JqBackend for BindHw<B> {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = BindPayload<B>;

    fn run_job(
        &mut self,
        mut job: RunJob<'_, BindPayload<B>>,
        _ctx: &SignalCtx<'_>,
    ) -> core::result::Result<HostFence, FenceError> {
        let p = job.payload_mut();
        p.applied = true;
        let result = match self.dev.upgrade() {
            Some(dev) => {
                let mut vm = lock(&p.vm);
                let req = match &p.map {
                    Some((obj, offset, flags)) => BindReq::Map {
                        va: p.va,
                        size: p.size,
                        obj,
                        offset: *offset,
                        flags: *flags,
                    },
                    None => BindReq::Unmap {
                        va: p.va,
                        size: p.size,
                    },
                };
                let slots = lock(&dev.slots);
                let mut upd = AsUpdate {
                    backend: &dev.backend,
                    slot: slots.slot_of(vm.key()),
                };
                vm.apply_reserved(&[req], p.res, &mut upd)
                    .map_err(|e| FenceError::new(e.to_errno()).unwrap_or(FenceError::IO))
            }
            None => {
                lock(&p.vm).release_bind(p.res);
                Err(FenceError::CANCELED)
            }
        };
        p.hw.signal(result);
        Ok(p.hw.clone())
    }

    fn timed_out(
        &mut self,
        _job: TimedOutJob<'_, BindPayload<B>>,
        _ctx: &SignalCtx<'_>,
    ) -> TimeoutAction {
        // Binds complete in `run_job`; nothing can be left running.
        TimeoutAction::Fail
    }
}

/// A VM's bind queue.
pub type BindQueue<B> =
    jobqueue::Queue<BindHw<B>, <B as Backend>::Exec, SchedClock<<B as Backend>::Clock>, JOB_SLOTS>;

/// Configuration of bind queues: one credit per bind.
pub const BIND_CONFIG: QueueConfig = QueueConfig::new(JOB_SLOTS as u32).with_timeout(JOB_TIMEOUT);

impl<B: Backend> DevInner<B> {
    /// The bind queue of the VM with key `key`, created on first use.
    ///
    /// `live` tells, under the lock of the queue map, whether the VM still belongs to its file.
    /// A VM is removed from its file before its queue is dropped (`release_vm`, which takes
    /// that lock too), so a queue is never created for a VM already destroyed: it would stay
    /// behind with its binds, and the VM's page tables with it. [`Error::Invalid`] then.
    fn bind_queue(
        self: &Arc<Self>,
        key: u64,
        live: impl FnOnce() -> bool,
    ) -> Result<Arc<Mutex<BindQueue<B>>>> {
        let mut map = lock(&self.sched.binds);
        if !live() {
            return Err(Error::Invalid);
        }
        if let Some(q) = map.get(&key) {
            return Ok(q.clone());
        }
        let q = jobqueue::Queue::new(
            BindHw {
                dev: Arc::downgrade(self),
            },
            self.backend.executor().clone(),
            SchedClock(self.backend.clock().clone()),
            BIND_CONFIG,
        )
        .map_err(|_| Error::Invalid)?;
        let q = Arc::new(Mutex::new(q));
        map.insert(key, q.clone());
        Ok(q)
    }

    /// Cancels the queued binds of a VM that goes away.
    pub(crate) fn drop_bind_queue(&self, key: u64) {
        let q = lock(&self.sched.binds).remove(&key);
        if let Some(q) = q {
            lock(&q).kill();
        }
    }

    /// Runs every bind queue (the work item).
    pub(crate) fn run_bind_queues(&self) {
        let queues: Vec<_> = lock(&self.sched.binds).values().cloned().collect();
        for q in queues {
            lock(&q).run();
        }
    }
}

/// A decoded asynchronous op.
struct Prep<B: Backend> {
    job: PreparedJob<HostFence, HostAlloc, BindPayload<B>>,
    signals: Vec<u32>,
}

/// `VM_BIND` with `DRM_PANTHOR_VM_BIND_ASYNC`.
pub(crate) fn vm_bind_async<B: Backend>(
    dev: &TyrDevice<B>,
    args: &uapi::VmBind,
    file: &File<B>,
    ops: &[uapi::VmBindOp],
) -> DrmResult<u32> {
    let vm = file.inner().vm(args.vm_id)?;
    let key = lock(&vm).key();
    let queue = dev.shared().bind_queue(key, || {
        lock(&file.inner().vms)
            .get(&args.vm_id)
            .is_some_and(|v| Arc::ptr_eq(v, &vm))
    })?;
    // Refuse what cannot fit before setting any memory aside (checked again at commit).
    {
        let q = lock(&queue);
        if q.is_killed() {
            return Err(DrmError::Invalid);
        }
        if q.pending_jobs() + ops.len() > JOB_SLOTS {
            return Err(DrmError::Busy);
        }
    }
    let table = file.syncobjs();
    let alloc = HostAlloc::new();
    let mut preps: Vec<Prep<B>> = Vec::new();
    preps
        .try_reserve(ops.len())
        .map_err(|_| DrmError::NoMemory)?;
    // Unlike a synchronous bind, a failing asynchronous one leaves `ops.count` alone (as
    // panthor does); nothing of the call is queued.
    for op in ops {
        preps.push(prepare_op(op, file, &vm, &alloc, &preps, table)?);
    }
    let mut q = lock(&queue);
    if q.is_killed() {
        return Err(DrmError::Invalid);
    }
    if q.pending_jobs() + preps.len() > JOB_SLOTS {
        return Err(DrmError::Busy);
    }
    for p in preps {
        let Ok(r) = q.reserve() else {
            // Ruled out above (room checked under the queue's lock); should it happen anyway,
            // later binds of this call depending on this one fail too.
            p.job.done_fence().signal(Err(FenceError::CANCELED));
            continue;
        };
        let done = r.commit(p.job).done;
        for h in p.signals {
            let fence: FenceRef = Arc::new(JobSyncFence(done.clone()));
            let _ = table.replace(h, Some(fence));
        }
    }
    drop(q);
    dev.backend.executor().waker().wake_by_ref();
    Ok(0)
}

fn prepare_op<B: Backend>(
    op: &uapi::VmBindOp,
    file: &File<B>,
    vm: &Arc<Mutex<TyrVm<B>>>,
    alloc: &HostAlloc,
    earlier: &[Prep<B>],
    table: &drm_ctx::host::syncobj::SyncobjTable,
) -> Result<Prep<B>> {
    use uapi::*;
    let syncs: Vec<SyncOp> =
        crate::submit::read_array(file.user(), &op.syncs, crate::submit::MAX_SYNCS)?;
    let decoded =
        if op.flags & DRM_PANTHOR_VM_BIND_OP_TYPE_MASK == DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY {
            if op.flags & !DRM_PANTHOR_VM_BIND_OP_TYPE_MASK != 0
                || op.bo_handle != 0
                || op.bo_offset != 0
                || op.va != 0
                || op.size != 0
                || op.syncs.count == 0
            {
                // A sync-only op exists for its syncs.
                return Err(Error::Invalid);
            }
            None
        } else {
            crate::driver::decode_op(op, file)?
        };
    let (waits, signals) = crate::submit::resolve_syncs(&syncs, table, |h| {
        earlier
            .iter()
            .rev()
            .find(|p| p.signals.contains(&h))
            .map(|p| p.job.done_fence().clone())
    })?;
    let (va, size, map) = decoded.unwrap_or((0, 0, None));
    let res = {
        let mut v = lock(vm);
        if v.is_unusable() {
            return Err(Error::Invalid);
        }
        let req = match &map {
            Some((obj, offset, flags)) => BindReq::Map {
                va,
                size,
                obj,
                offset: *offset,
                flags: *flags,
            },
            None => BindReq::Unmap { va, size },
        };
        v.reserve_bind(&[req]).map_err(|(_, e)| e)?
    };
    let payload = BindPayload {
        vm: vm.clone(),
        va,
        size,
        map,
        res,
        applied: false,
        hw: HostFence::new(),
    };
    let mut job = PreparedJob::new(alloc, &BIND_CONFIG, Cost(1), MaxDeps(waits.len()), payload)
        .map_err(|r| Error::from_errno(r.error.to_errno()))?;
    for f in &waits {
        job.add_dependency(f)
            .map_err(|e| Error::from_errno(e.to_errno()))?;
    }
    Ok(Prep { job, signals })
}
