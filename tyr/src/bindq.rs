// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Bind queues: asynchronous `VM_BIND` operations as jobs of the VM's queue.
//!
//! With `DRM_PANTHOR_VM_BIND_ASYNC`, every operation of the array is a job that waits on the
//! syncobjs of its wait operations, changes the mappings once they have signalled, and then
//! signals the syncobjs of its signal operations, so that userspace orders binds and GPU jobs
//! with the same syncobjs. Binds of one VM apply in submission order.
//!
//! Changing mappings happens in the fence-signalling path, so it must not allocate. The
//! ioctl (`ioctl`, on top) does every check and sets aside the memory applying needs
//! ([`Vm::reserve_bind`](crate::vm::Vm::reserve_bind): VA and VM-BO slots, and page-table
//! pages for the worst case) into a [`BindPayload`]; the job applies with that memory only
//! ([`Vm::apply_reserved`](crate::vm::Vm::apply_reserved)). A job that never applies (a
//! dependency failed, the VM was destroyed) gives its reservation back when it is dropped.
//! While binds are queued, a synchronous `VM_BIND` on the same VM fails with `EBUSY`, since it
//! could consume what they set aside.
//!
//! A job applies its op in the bounded steps of every bind (`vm::BIND_STEP_ENTRIES` entries,
//! the address-space lock per step, [`Backend::cond_resched`] between steps). Each VM's bind
//! queue runs on a worker of its own ([`Backend::new_bind_executor`], [`Events::bind_work`]),
//! as panthor gives every VM a bind scheduler on a workqueue apart from its group scheduler:
//! while a huge op runs, interrupts, submissions, synchronous binds and other VMs'
//! asynchronous binds go on (waiting for one step at most, for the address-space lock). Only
//! later binds of the same VM wait for the op, as they must. An op is not resumable: it
//! holds its own VM's worker until done.
//!
//! [`Events::bind_work`]: crate::backend::Events::bind_work
//! [`Backend::cond_resched`]: crate::backend::Backend::cond_resched
//! [`Backend::new_bind_executor`]: crate::backend::Backend::new_bind_executor
//!
//! A bind job reaches its device through [`BindDevice`] (the environment and the
//! address-space slots), which the device state on the scheduling floor above implements.

use jobqueue::{
    Backend as JqBackend, FenceError, QueueConfig, RunJob, SignalCtx, SignalFence, TimedOutJob,
    TimeoutAction,
};

use crate::backend::{Backend, Lock, LockOf};
use crate::gem::{BoRef, SharedVm};
use crate::job::{SchedClock, JOB_SLOTS, JOB_TIMEOUT};
use crate::mmu::{AsSlots, AsStepUpdate};
use crate::vm::{BindReq, BindReservation};
use crate::{env, Error, Result};

/// What a decoded bind operation does to its range.
pub enum BindOp<B: Backend> {
    /// Map `obj` from `offset` with the map `flags`.
    Map {
        /// The object.
        obj: BoRef<B>,
        /// Offset in the object.
        offset: u64,
        /// Map flags.
        flags: u32,
    },
    /// Map the range sparsely (onto the VM's sparse backing) with the map `flags`.
    MapSparse {
        /// Map flags, `DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE` among them.
        flags: u32,
    },
    /// Unmap the range.
    Unmap,
}

impl<B: Backend> BindOp<B> {
    /// The VM request for `size` bytes at `va`.
    pub fn req(&self, va: u64, size: u64) -> BindReq<'_, BoRef<B>> {
        match self {
            BindOp::Map { obj, offset, flags } => BindReq::Map {
                va,
                size,
                obj,
                offset: *offset,
                flags: *flags,
            },
            BindOp::MapSparse { flags } => BindReq::MapSparse {
                va,
                size,
                flags: *flags,
            },
            BindOp::Unmap => BindReq::Unmap { va, size },
        }
    }
}

/// One bind operation waiting to be applied.
pub struct BindPayload<B: Backend> {
    vm: SharedVm<B>,
    va: u64,
    size: u64,
    op: BindOp<B>,
    res: BindReservation,
    applied: bool,
    hw: B::Fence,
}

impl<B: Backend> BindPayload<B> {
    /// A bind of `size` bytes at `va` in `vm` doing `op`, applied with the memory `res` set
    /// aside.
    pub(crate) fn new(
        vm: SharedVm<B>,
        va: u64,
        size: u64,
        op: BindOp<B>,
        res: BindReservation,
        hw: B::Fence,
    ) -> Self {
        BindPayload {
            vm,
            va,
            size,
            op,
            res,
            applied: false,
            hw,
        }
    }
}

impl<B: Backend> Drop for BindPayload<B> {
    fn drop(&mut self) {
        if !self.applied {
            self.vm.guard().release_bind(self.res);
        }
    }
}

/// What a bind job needs of its device: the environment and the address-space slots (which
/// VM holds which address space, so that a bind into an active VM locks and flushes it).
/// Implemented by the device state, on the scheduling floor above.
pub trait BindDevice<B: Backend>: Send + Sync {
    /// The environment.
    fn backend(&self) -> &B;
    /// The address-space slots.
    fn as_slots(&self) -> &LockOf<B, AsSlots>;
}

/// The bind queue's backend: applies a bind when the queue runs it.
pub struct BindHw<B: Backend, D> {
    dev: env::Weak<D, B::Alloc>,
}

impl<B: Backend, D: BindDevice<B>> JqBackend for BindHw<B, D> {
    type Fence = B::Fence;
    type Alloc = B::JobAlloc;
    type Payload = BindPayload<B>;

    fn run_job(
        &mut self,
        mut job: RunJob<'_, BindPayload<B>>,
        _ctx: &SignalCtx<'_>,
    ) -> core::result::Result<B::Fence, FenceError> {
        let p = job.payload_mut();
        p.applied = true;
        let result = match self.dev.upgrade() {
            Some(dev) => {
                let mut vm = p.vm.guard();
                let req = p.op.req(p.va, p.size);
                let mut upd = AsStepUpdate::new(dev.backend(), dev.as_slots(), vm.key());
                vm.apply_reserved(&[req], p.res, &mut upd)
                    .map_err(|e| FenceError::new(e.to_errno()).unwrap_or(FenceError::IO))
            }
            None => {
                p.vm.guard().release_bind(p.res);
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

/// A VM's bind queue, for device `D`.
pub type BindQueue<B, D> = jobqueue::Queue<
    BindHw<B, D>,
    <B as Backend>::BindExec,
    SchedClock<<B as Backend>::TimerClock>,
    JOB_SLOTS,
>;

/// Configuration of bind queues: one credit per bind.
pub const BIND_CONFIG: QueueConfig = QueueConfig::new(JOB_SLOTS as u32).with_timeout(JOB_TIMEOUT);

/// The bind queues of a device: one per VM (by key) that has had an asynchronous bind.
pub struct BindQueues<B: Backend, D: BindDevice<B>>(LockOf<B, BindQueueMap<B, D>>);

/// The bind queues of a device by VM key.
pub type BindQueueMap<B, D> = env::IdMap<SharedBindQueue<B, D>, <B as Backend>::Alloc, u64>;

/// A bind queue as the device and the VM_BIND calls share it.
pub type SharedBindQueue<B, D> = env::Arc<BindQueueState<B, D>, <B as Backend>::Alloc>;

/// A VM's bind queue and the fences and memory of its jobs.
pub struct BindQueueState<B: Backend, D: BindDevice<B>> {
    /// The queue.
    pub queue: LockOf<B, env::Box<BindQueue<B, D>, B::Alloc>>,
    /// Its fences and job memory.
    pub alloc: B::JobAlloc,
    /// Its executor (what the queue was made with), to wake it after a commit.
    pub exec: B::BindExec,
}

impl<B: Backend, D: BindDevice<B> + 'static> BindQueues<B, D> {
    /// No bind queue yet; [`Error::NoMemory`] if the lock cannot be made.
    pub fn new() -> Result<Self> {
        Ok(BindQueues(Lock::new(
            env::IdMap::new(),
            crate::lock_class!(c"tyr_bind_queues"),
        )?))
    }

    /// The bind queue of the VM with key `key`, created on first use for device `dev`.
    ///
    /// `live` tells, under the lock of the queue map, whether the VM still belongs to its file.
    /// A VM is removed from its file before its queue is dropped (`release_vm`, which takes
    /// that lock too), so a queue is never created for a VM already destroyed: it would stay
    /// behind with its binds, and the VM's page tables with it. [`Error::Invalid`] then.
    pub fn get(
        &self,
        dev: &env::Arc<D, B::Alloc>,
        key: u64,
        live: impl FnOnce() -> bool,
    ) -> Result<SharedBindQueue<B, D>> {
        let mut map = self.0.guard();
        if !live() {
            return Err(Error::Invalid);
        }
        if let Some(q) = map.get(key) {
            return Ok(q.clone());
        }
        let weak = env::Arc::downgrade(dev);
        let backend = dev.backend();
        let exec = backend.new_bind_executor(key)?;
        let waker = exec.clone();
        // Made in place: a queue holds its job slots inline (tens of KiB).
        let q = env::Box::try_new_in_place(|slot| {
            jobqueue::Queue::init_in_place(
                slot,
                BindHw { dev: weak },
                exec,
                SchedClock(backend.timer_clock().clone()),
                BIND_CONFIG,
            )
            .map_err(|_| Error::Invalid)
        })?;
        let q: SharedBindQueue<B, D> = env::Arc::try_new(BindQueueState {
            queue: Lock::new(q, crate::lock_class!(c"tyr_bind_queue"))?,
            alloc: backend.new_job_alloc()?,
            exec: waker,
        })?;
        map.try_insert(key, q.clone())?;
        Ok(q)
    }

    /// Cancels the queued binds of a VM that goes away.
    pub fn remove(&self, key: u64) {
        let q = self.0.guard().remove(key);
        if let Some(q) = q {
            q.queue.guard().kill();
        }
    }

    /// Runs the bind queue of the VM with key `key`, if it still has one (its worker's turn,
    /// [`Events::bind_work`]).
    ///
    /// [`Events::bind_work`]: crate::backend::Events::bind_work
    pub fn run(&self, key: u64) {
        // The map's lock is let go while the queue runs (a bind job may need it).
        let q = self.0.guard().get(key).cloned();
        if let Some(q) = q {
            q.queue.guard().run();
        }
    }

    /// Cancels the queued binds of every VM (the device goes).
    pub fn remove_all(&self) {
        loop {
            // The map's guard must be gone before `remove` takes it again (in a `while let`
            // condition it would live through the loop's body).
            let next = self.0.guard().next_after(None).map(|(k, _)| k);
            let Some(key) = next else {
                break;
            };
            self.remove(key);
        }
    }

    /// Number of bind queues.
    pub fn len(&self) -> usize {
        self.0.guard().len()
    }

    /// Whether there is no bind queue.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
