// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The panthor ioctls: the uAPI layer, on top of the driver (panthor_drv's role).
//!
//! Each handler checks its arguments as panthor does, copies user objects in and out
//! (`PANTHOR_UOBJ_GET`/`SET` semantics: `get_uobj`, `set_uobj`, `read_array`) and calls
//! down into the floors below: files ([`crate::file`]), scheduling ([`crate::sched`]), bind
//! queues ([`crate::bindq`]), VMs ([`crate::vm`]) and buffer objects ([`crate::gem`]). Nothing
//! below calls up into this file; the DRM driver glue (`driver`) lists the handlers in its ioctl
//! table.
//!
//! A synchronous `VM_BIND` is, unlike panthor's, all or nothing for the whole array of
//! operations (on failure `ops.count` is the index of the failing operation and nothing
//! changed); an asynchronous one queues each operation as a job of the VM's bind queue
//! (`vm_bind_async`). `GROUP_SUBMIT` prepares every job (its done fence, callback nodes,
//! dependencies and hardware fence) before any is visible, then commits them all.
//!
//! The sync ops of both take binary and timeline syncobjs (`SyncCtx`, panthor's submit
//! context): the signal ops of every job of the call are collected first (a timeline point's
//! chain link allocated then), each job's waits then resolve to an earlier job of the call that
//! signals the same `(handle, point)` or to the syncobj's fence for the point, and the fences
//! are installed in the syncobjs only after every job is committed.
//!
//! A sparse map op (`DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE`, with no BO handle, no BO offset and
//! `DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC`, else `EINVAL`) maps its range onto the file's 2 MiB
//! sparse backing ([`crate::vm`] describes how); the backing is made at the file's first
//! sparse bind, after every op of the call has been checked.

use core::mem::size_of;
use core::sync::atomic::Ordering;

use drm_ctx::drm::syncobj::{for_each_unwrapped, ChainLink, Syncobj};
use drm_ctx::drm::SyncobjFence;
use drm_ctx::drm::{gem, ioctl};
use drm_ctx::mem::Allocator;
use drm_ctx::types::ARef;
use drm_ctx::uaccess::UserMemory;
use drm_ctx::{Error as DrmError, Result as DrmResult};
use jobqueue::{Cost, Executor, Fence as _, FenceError, MaxDeps, PreparedJob, SignalFence as _};
use register::io::poll::PollClock;
use register::io::Io;

use crate::backend::{Backend, Lock, LockGuard, PAGE_SIZE};
use crate::bindq::{BindOp, BindPayload, BIND_CONFIG};
use crate::file::{release_vm, File, MAX_VMS_PER_FILE};
use crate::gem::{BoArgs, BoRef, SharedVm, TyrBo, TyrDevice, TyrVm};
use crate::mmu::AsStepUpdate;
use crate::regs::{CYCLE_COUNT, LATEST_FLUSH_ID, TIMESTAMP, TIMESTAMP_OFFSET};
use crate::sched::{self, JobPayload, JOB_INSTRS, JOB_SLOTS, MAX_STREAM_SIZE, RINGBUF_SIZES};
use crate::uapi::{self, UObj};
use crate::vm::{self, BindReq, VmLayout};
use crate::{env, heap};
use crate::{Error, Result};

// ---------------------------------------------------------------- user objects

/// Copies `obj` to a user object of `usize` bytes at `ptr`, as panthor's `PANTHOR_UOBJ_SET`:
/// at least the minimum size, what both know copied, the rest zeroed.
pub(crate) fn set_uobj<T: UObj>(user: &dyn UserMemory, ptr: u64, usize: u32, obj: &T) -> Result {
    let usize = usize as usize;
    if usize < T::MIN_SIZE {
        return Err(Error::Invalid);
    }
    let bytes = ioctl::as_bytes(obj);
    let n = usize.min(bytes.len());
    user.write(ptr, &bytes[..n])?;
    let zeros = [0u8; 256];
    let mut at = n;
    while at < usize {
        let len = (usize - at).min(zeros.len());
        user.write(ptr + at as u64, &zeros[..len])?;
        at += len;
    }
    Ok(())
}

/// Reads a user object of `usize` bytes at `ptr` into a `T` (zero-extended if shorter;
/// longer ones must have zero extra bytes).
pub(crate) fn get_uobj<T: UObj>(user: &dyn UserMemory, ptr: u64, usize: u32) -> Result<T> {
    let usize = usize as usize;
    if usize < T::MIN_SIZE {
        return Err(Error::Invalid);
    }
    let mut buf = [0u8; 256];
    let kern = size_of::<T>();
    let n = usize.min(kern).min(buf.len());
    user.read(ptr, &mut buf[..n])?;
    let mut at = kern;
    while at < usize {
        let len = (usize - at).min(buf.len());
        let mut extra = [0u8; 256];
        user.read(ptr + at as u64, &mut extra[..len])?;
        if extra[..len].iter().any(|&b| b != 0) {
            return Err(Error::TooBig);
        }
        at += len;
    }
    ioctl::from_bytes(&buf[..kern]).ok_or(Error::Invalid)
}

/// Reads an array of user objects as `PANTHOR_UOBJ_GET_ARRAY` does.
pub(crate) fn read_array<T: UObj, A: Allocator>(
    user: &dyn drm_ctx::uaccess::UserMemory,
    a: &uapi::ObjArray,
    max: u32,
) -> Result<env::Vec<T, A>> {
    let mut out = env::Vec::new();
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
        out.try_push(get_uobj(user, at, a.stride)?)?;
    }
    Ok(out)
}

/// Largest number of sync operations per job.
pub const MAX_SYNCS: u32 = 64;

/// Checks a sync op as panthor does: no unknown flag, a binary or a timeline syncobj, and no
/// point on a binary one (`EINVAL` otherwise). A timeline op on point 0 stands for the
/// syncobj as a whole, as a binary op does.
pub(crate) fn check_sync_op(op: &uapi::SyncOp) -> Result {
    let known = uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK | uapi::DRM_PANTHOR_SYNC_OP_SIGNAL;
    if op.flags & !known != 0 {
        return Err(Error::Invalid);
    }
    match op.flags & uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK {
        uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ if op.timeline_value == 0 => Ok(()),
        uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ => Ok(()),
        _ => Err(Error::Invalid),
    }
}

fn is_signal(op: &&uapi::SyncOp) -> bool {
    op.flags & uapi::DRM_PANTHOR_SYNC_OP_SIGNAL != 0
}

fn is_wait(op: &&uapi::SyncOp) -> bool {
    op.flags & uapi::DRM_PANTHOR_SYNC_OP_SIGNAL == 0
}

/// The fence a signal operation of a call stands for while the call is prepared.
enum Signal<F> {
    /// The `(handle, point)` had no fence when the call collected its signals.
    Nothing,
    /// What the syncobj held for the point when the call collected its signals.
    Current(SyncobjFence),
    /// The done fence of the latest job of the call that signals it, and the same fence as
    /// the syncobj will hold it.
    Job(F, SyncobjFence),
}

/// One `(handle, point)` that a call signals.
struct SyncSignal<F> {
    handle: u32,
    point: u64,
    /// The syncobj the handle named when the call collected its signals (a reference to it):
    /// the one that gets the fence, even if the handle is destroyed or reused meanwhile.
    syncobj: Syncobj,
    /// The chain link of a timeline point (point above 0), set aside while preparing.
    link: Option<ChainLink>,
    fence: Signal<F>,
}

/// The syncobj side of a `GROUP_SUBMIT` or an asynchronous `VM_BIND` (panthor's submit
/// context): every `(handle, point)` the call signals, collected for all its jobs before any
/// job's dependencies are resolved, so that a job waiting on what an earlier job of the same
/// call signals depends on that job.
///
/// Preparing may fail and changes no syncobj; [`push`](Self::push), once every job is
/// committed, installs the fences and allocates nothing. Dropping the context instead (a call
/// that fails) frees the chain links it set aside.
pub(crate) struct SyncCtx<'a, B: Backend> {
    file: &'a File<B>,
    signals: env::Vec<SyncSignal<B::Fence>, B::Alloc>,
}

impl<'a, B: Backend> SyncCtx<'a, B> {
    pub(crate) fn new(file: &'a File<B>) -> Self {
        Self {
            file,
            signals: env::Vec::new(),
        }
    }

    fn find(&self, handle: u32, point: u64) -> Option<&SyncSignal<B::Fence>> {
        self.signals
            .iter()
            .find(|s| s.handle == handle && s.point == point)
    }

    /// Records the signal operations of one job (`panthor_submit_ctx_collect_job_signal_ops`):
    /// each must be well formed (`EINVAL`) and name a syncobj (`EINVAL`, as panthor); a
    /// timeline point gets its chain link here (`ENOMEM`).
    pub(crate) fn collect_signals(&mut self, syncs: &[uapi::SyncOp]) -> Result {
        for op in syncs.iter().filter(is_signal) {
            check_sync_op(op)?;
            if self.find(op.handle, op.timeline_value).is_some() {
                continue;
            }
            self.signals.try_reserve(1).map_err(|_| Error::NoMemory)?;
            let link = match op.timeline_value {
                0 => None,
                _ => Some(ChainLink::new_in(self.file)?),
            };
            let syncobj = self.file.syncobj(op.handle).map_err(|_| Error::Invalid)?;
            // No fence for the point yet is fine for a signal.
            let fence = match self.file.syncobj_fence(op.handle, op.timeline_value, 0) {
                Ok(f) => Signal::Current(f),
                Err(_) => Signal::Nothing,
            };
            self.signals.try_push(SyncSignal {
                handle: op.handle,
                point: op.timeline_value,
                syncobj,
                link,
                fence,
            })?;
        }
        Ok(())
    }

    /// The fences a job waits on (`panthor_submit_ctx_add_sync_deps_to_job`), resolved after
    /// the signals of every job were collected and those of the earlier jobs set.
    ///
    /// A `(handle, point)` the call signals resolves to what the call knows of it: the done
    /// fence of the latest earlier job signalling it, or else what the syncobj held for it at
    /// collection (none: `EINVAL`). Any other resolves through the syncobj
    /// ([`SyncobjTable::find_fence`]: `ENOENT` for an unknown handle, `EINVAL` for a point
    /// without a fence). A syncobj's fence is unwrapped into the job fences it is made of (a
    /// timeline point waits for its own and every earlier point's).
    ///
    /// The fences are de-duplicated as `drm_sched_job_add_dependency` does: of the fences of
    /// one timeline (one queue's done fences) only the latest is kept, a fence already
    /// signalled without error is dropped, and a wait op repeating one of the job's earlier
    /// ones is skipped; so the table scales with the queues involved, not with the points
    /// pending on a timeline. At most [`MAX_JOB_DEPS`] fences remain (`ENOMEM` beyond).
    pub(crate) fn waits(&self, syncs: &[uapi::SyncOp]) -> Result<env::Vec<B::Fence, B::Alloc>> {
        let mut deps = Deps::<B>::default();
        let mut seen: env::Vec<(u32, u64), B::Alloc> = env::Vec::new();
        for op in syncs.iter().filter(is_wait) {
            check_sync_op(op)?;
            if seen.contains(&(op.handle, op.timeline_value)) {
                continue;
            }
            seen.try_push((op.handle, op.timeline_value))?;
            match self.find(op.handle, op.timeline_value).map(|s| &s.fence) {
                // Not committed yet: no place on its timeline to compare.
                Some(Signal::Job(done, _)) => deps.add(done.clone(), false)?,
                Some(Signal::Current(f)) => deps.add_unwrapped(f)?,
                Some(Signal::Nothing) => return Err(Error::Invalid),
                None => {
                    let f = self.file.syncobj_fence(op.handle, op.timeline_value, 0)?;
                    deps.add_unwrapped(&f)?;
                }
            }
        }
        Ok(deps.fences)
    }

    /// Makes the job whose done fence is `done` the one that signals its signal operations
    /// (`panthor_submit_ctx_update_job_sync_signal_fences`); later jobs of the call waiting on
    /// them depend on it.
    pub(crate) fn set_signaller(&mut self, syncs: &[uapi::SyncOp], done: &B::Fence) -> Result {
        let mut published: Option<SyncobjFence> = None;
        for op in syncs.iter().filter(is_signal) {
            let Some(s) = self
                .signals
                .iter_mut()
                .find(|s| s.handle == op.handle && s.point == op.timeline_value)
            else {
                // Every signal op was collected before.
                return Err(Error::Invalid);
            };
            let f = match &published {
                Some(f) => f.clone(),
                None => published.insert(B::syncobj_fence(done)?).clone(),
            };
            s.fence = Signal::Job(done.clone(), f);
        }
        Ok(())
    }

    /// Installs the fence of every signal (`panthor_submit_ctx_push_fences`), once the jobs are
    /// committed: a timeline point is added with its link, a binary syncobj's fence replaced.
    /// Allocates nothing and cannot fail (a syncobj whose handle was destroyed since the call
    /// looked it up gets the fence where nobody sees it, and a syncobj created since under its
    /// handle is not touched).
    pub(crate) fn push(self) {
        for s in self.signals {
            let Signal::Job(_, fence) = s.fence else {
                continue;
            };
            match s.link {
                Some(link) => s.syncobj.add_point(link, &fence, s.point),
                None => s.syncobj.replace_fence(Some(&fence)),
            }
        }
    }
}

/// Most fences one job waits on once they are de-duplicated (the submission's wait list): a bound
/// on the job's dependency table whatever the client does (the distinct timelines it can
/// wait on are its queues' and the binds' of its VMs; 4,096 is far above them).
pub const MAX_JOB_DEPS: usize = 4096;

/// The dependencies of one job, de-duplicated as they are added.
struct Deps<B: Backend> {
    fences: env::Vec<B::Fence, B::Alloc>,
    /// Whether a fence that signalled with an error is in `fences` (one fails the job).
    failed: bool,
}

impl<B: Backend> Default for Deps<B> {
    fn default() -> Self {
        Deps {
            fences: env::Vec::new(),
            failed: false,
        }
    }
}

impl<B: Backend> Deps<B> {
    /// Adds `f`; `placed` says whether its place on its timeline is known (a committed job's
    /// fence), and so whether it may replace an earlier fence of its timeline.
    fn add(&mut self, f: B::Fence, placed: bool) -> Result {
        match f.status() {
            // Nothing to wait for.
            Some(Ok(())) => return Ok(()),
            // One failed fence is enough to fail the job.
            Some(Err(_)) if self.failed => return Ok(()),
            Some(Err(_)) => self.failed = true,
            None => {}
        }
        if self.fences.iter().any(|d| d.same_fence(&f)) {
            return Ok(());
        }
        if let Some((ctx, seqno)) = placed.then(|| B::fence_timeline(&f)).flatten() {
            let same = self.fences.iter().position(|d| {
                d.status().is_none() && B::fence_timeline(d).is_some_and(|(c, _)| c == ctx)
            });
            if let Some(i) = same {
                if B::fence_timeline(&self.fences[i]).is_some_and(|(_, s)| seqno > s) {
                    self.fences[i] = f;
                }
                return Ok(());
            }
        }
        if self.fences.len() >= MAX_JOB_DEPS {
            return Err(Error::NoMemory);
        }
        self.fences.try_push(f)
    }

    /// Adds the job fences `f` is made of (a timeline link stands for the fences of its point
    /// and of every earlier one still pending); [`Error::Invalid`] for a fence not of this
    /// driver.
    fn add_unwrapped(&mut self, f: &SyncobjFence) -> Result {
        let mut res = Ok(());
        for_each_unwrapped(f, |part| {
            if res.is_ok() {
                res = B::dependency(part).and_then(|h| self.add(h, true));
            }
        });
        res
    }
}

// ---------------------------------------------------------------- DEV_QUERY, VM_*, BO_*

pub(crate) fn dev_query<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::DevQuery,
    file: &File<B>,
) -> DrmResult<u32> {
    use uapi::*;
    if args.pointer == 0 {
        args.size = match args.type_ {
            DRM_PANTHOR_DEV_QUERY_GPU_INFO => size_of::<GpuInfo>(),
            DRM_PANTHOR_DEV_QUERY_CSIF_INFO => size_of::<CsifInfo>(),
            DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO => size_of::<TimestampInfo>(),
            DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO => size_of::<GroupPrioritiesInfo>(),
            _ => return Err(DrmError::Invalid),
        } as u32;
        return Ok(0);
    }
    let user = file.user();
    match args.type_ {
        DRM_PANTHOR_DEV_QUERY_GPU_INFO => {
            set_uobj(user, args.pointer, args.size, &dev.gpu_info.raw)?
        }
        DRM_PANTHOR_DEV_QUERY_CSIF_INFO => set_uobj(user, args.pointer, args.size, &dev.csif_info)?,
        DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO => {
            let mut info: TimestampInfo = get_uobj(user, args.pointer, args.size)?;
            query_timestamp(&dev.backend, &mut info)?;
            set_uobj(user, args.pointer, args.size, &info)?
        }
        DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO => {
            let mut info = GroupPrioritiesInfo::default();
            for prio in PANTHOR_GROUP_PRIORITY_LOW..=PANTHOR_GROUP_PRIORITY_REALTIME {
                if group_priority_permit(file, prio).is_ok() {
                    info.allowed_mask |= 1 << prio;
                }
            }
            set_uobj(user, args.pointer, args.size, &info)?
        }
        _ => return Err(DrmError::Invalid),
    }
    Ok(0)
}

/// Whether the client of `file` may create groups of priority `prio`, as panthor decides:
/// LOW and MEDIUM for everyone, HIGH and REALTIME for the DRM master only ([`Error::Access`]
/// otherwise), anything above REALTIME is [`Error::Invalid`].
///
/// Panthor also lets a task with `CAP_SYS_NICE` use the high priorities; the host DRM core
/// records no such capability for a file (its `sys_admin` is `CAP_SYS_ADMIN`, another one), so
/// here only the master can.
pub(crate) fn group_priority_permit<B: Backend>(file: &File<B>, prio: u8) -> Result {
    match prio {
        uapi::PANTHOR_GROUP_PRIORITY_LOW | uapi::PANTHOR_GROUP_PRIORITY_MEDIUM => Ok(()),
        uapi::PANTHOR_GROUP_PRIORITY_HIGH | uapi::PANTHOR_GROUP_PRIORITY_REALTIME => {
            if file.options().master {
                Ok(())
            } else {
                Err(Error::Access)
            }
        }
        _ => Err(Error::Invalid),
    }
}

/// Fills a `TIMESTAMP_INFO` query as panthor does (flags 0 asks for what the first version
/// returned): the GPU's timestamp, then the CPU clock the flags name
/// ([`Backend::cpu_time`]: `CLOCK_MONOTONIC` or `CLOCK_MONOTONIC_RAW`, the kernel's clocks, as
/// userspace's `clock_gettime` reads them), then the cycle counter, in that order and one
/// right after the other; the duration of the three is measured on the system's clock.
fn query_timestamp<B: Backend>(b: &B, info: &mut uapi::TimestampInfo) -> Result {
    use crate::backend::CpuClock;
    use uapi::*;
    let flags = match info.flags {
        0 => {
            DRM_PANTHOR_TIMESTAMP_GPU
                | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET
                | DRM_PANTHOR_TIMESTAMP_FREQ
        }
        f => f,
    };
    let valid = DRM_PANTHOR_TIMESTAMP_GPU
        | DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK
        | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET
        | DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT
        | DRM_PANTHOR_TIMESTAMP_FREQ
        | DRM_PANTHOR_TIMESTAMP_DURATION;
    let cpu = match flags & DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK {
        DRM_PANTHOR_TIMESTAMP_CPU_NONE => None,
        DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC => Some(CpuClock::Monotonic),
        DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC_RAW => Some(CpuClock::MonotonicRaw),
        _ => return Err(Error::Invalid),
    };
    if flags & !valid != 0 {
        return Err(Error::Invalid);
    }
    let io = b.io();
    info.timestamp_frequency = if flags & DRM_PANTHOR_TIMESTAMP_FREQ != 0 {
        b.timestamp_frequency()
    } else {
        0
    };
    info.timestamp_offset = if flags & DRM_PANTHOR_TIMESTAMP_GPU_OFFSET != 0 {
        io.read(TIMESTAMP_OFFSET).into_raw()
    } else {
        0
    };
    let sys = b.sys_clock();
    let start = sys.now();
    info.current_timestamp = if flags & DRM_PANTHOR_TIMESTAMP_GPU != 0 {
        io.read(TIMESTAMP).into_raw()
    } else {
        0
    };
    let cpu_ts = cpu.map(|c| b.cpu_time(c));
    info.cycle_count = if flags & DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT != 0 {
        io.read(CYCLE_COUNT).into_raw()
    } else {
        0
    };
    info.duration_nsec = if flags & DRM_PANTHOR_TIMESTAMP_DURATION != 0 {
        u32::try_from(sys.now().saturating_sub(start).as_nanos()).unwrap_or(u32::MAX)
    } else {
        0
    };
    (info.cpu_timestamp_sec, info.cpu_timestamp_nsec) =
        cpu_ts.map_or((0, 0), |t| (t.as_secs(), u64::from(t.subsec_nanos())));
    info.flags = flags;
    Ok(())
}

pub(crate) fn vm_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.flags != 0 {
        return Err(DrmError::Invalid);
    }
    let layout = VmLayout::new(dev.gpu_info.va_bits(), args.user_va_range)?;
    let mut vms = file.inner().vms.guard();
    let id = vms.first_free(1, MAX_VMS_PER_FILE).ok_or(DrmError::Busy)?;
    let vm = TyrVm::<B>::new_charged(
        dev.key(),
        dev.backend.dma().clone(),
        layout,
        dev.gpu_info.pa_bits(),
        file.inner().pt_budget.clone(),
    )?;
    let key = vm.key();
    let vm = env::Arc::try_new(Lock::new(vm, crate::lock_class!(c"tyr_vm"))?)?;
    // The device's entry for the VM first (so that its destruction cannot fail), then the
    // file's handle.
    dev.vm_zombie.guard().try_insert(key, false)?;
    if let Err(e) = vms.try_insert(id, vm) {
        dev.vm_zombie.guard().remove(key);
        return Err(e.into());
    }
    args.id = id;
    args.user_va_range = layout.kernel_start;
    Ok(0)
}

pub(crate) fn vm_destroy<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmDestroy,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let vm = file
        .inner()
        .vms
        .guard()
        .remove(args.id)
        .ok_or(DrmError::Invalid)?;
    release_vm(dev, &vm);
    Ok(0)
}

/// Reads the `ops` array of a VM_BIND from user memory, as `PANTHOR_UOBJ_GET_ARRAY` does.
fn read_bind_ops<A: Allocator>(
    user: &dyn UserMemory,
    ops: &uapi::ObjArray,
) -> Result<env::Vec<uapi::VmBindOp, A>> {
    let mut out = env::Vec::new();
    if ops.count == 0 {
        return Ok(out);
    }
    if (ops.stride as usize) < uapi::VmBindOp::MIN_SIZE {
        return Err(Error::Invalid);
    }
    // The kernel copy is at most what `kvmalloc_array` gives panthor (`INT_MAX` bytes), so a
    // bogus count cannot set aside hundreds of GB before anything is read.
    let bytes = (ops.count as usize).saturating_mul(core::mem::size_of::<uapi::VmBindOp>());
    if bytes > i32::MAX as usize {
        return Err(Error::NoMemory);
    }
    out.try_reserve(ops.count as usize)
        .map_err(|_| Error::NoMemory)?;
    for i in 0..u64::from(ops.count) {
        let at = i
            .checked_mul(u64::from(ops.stride))
            .and_then(|o| o.checked_add(ops.array))
            .ok_or(Error::Fault)?;
        out.try_push(get_uobj(user, at, ops.stride)?)?;
    }
    Ok(out)
}

/// A decoded bind op: address, size, and what it does.
pub(crate) type Decoded<B> = (u64, u64, BindOp<B>);

/// Turns one user op into a request; `None` for an op that does nothing.
pub(crate) fn decode_op<B: Backend>(
    op: &uapi::VmBindOp,
    file: &File<B>,
) -> Result<Option<Decoded<B>>> {
    use uapi::*;
    if op.size == 0 {
        return Ok(None);
    }
    let extra = op.flags & !DRM_PANTHOR_VM_BIND_OP_TYPE_MASK;
    match op.flags & DRM_PANTHOR_VM_BIND_OP_TYPE_MASK {
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP if extra & DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE != 0 => {
            // No object (the VM's sparse backing stands in), and never executable.
            if extra & !vm::MAP_SPARSE_FLAGS != 0
                || extra & DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC == 0
                || op.bo_handle != 0
                || op.bo_offset != 0
            {
                return Err(Error::Invalid);
            }
            Ok(Some((op.va, op.size, BindOp::MapSparse { flags: extra })))
        }
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP => {
            if extra & !vm::MAP_FLAGS != 0 {
                return Err(Error::Invalid);
            }
            let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, op.bo_handle)
                .map_err(|_| Error::Invalid)?;
            Ok(Some((
                op.va,
                op.size,
                BindOp::Map {
                    obj: BoRef(bo),
                    offset: op.bo_offset,
                    flags: extra,
                },
            )))
        }
        DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP => {
            if extra != 0 || op.bo_handle != 0 || op.bo_offset != 0 {
                return Err(Error::Invalid);
            }
            Ok(Some((op.va, op.size, BindOp::Unmap)))
        }
        // A synchronous SYNC_ONLY op must have a size of zero, handled above.
        _ => Err(Error::Invalid),
    }
}

pub(crate) fn vm_bind<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::VmBind,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.flags & !uapi::DRM_PANTHOR_VM_BIND_ASYNC != 0 {
        return Err(DrmError::Invalid);
    }
    let vm = file.inner().vm(args.vm_id)?;
    let ops = read_bind_ops::<B::Alloc>(file.user(), &args.ops)?;
    if args.flags & uapi::DRM_PANTHOR_VM_BIND_ASYNC != 0 {
        return vm_bind_async(dev, args, file, &ops);
    }
    let mut decoded = env::Vec::<_, B::Alloc>::new();
    decoded
        .try_reserve(ops.len())
        .map_err(|_| DrmError::NoMemory)?;
    for (i, op) in ops.iter().enumerate() {
        // Synchronous binds take no sync operations.
        let one = if op.syncs.count != 0 {
            Err(Error::Invalid)
        } else {
            decode_op(op, file)
        };
        match one {
            Ok(d) => decoded.try_push(d)?,
            Err(e) => {
                args.ops.count = i as u32;
                return Err(e.into());
            }
        }
    }
    let mut reqs = env::Vec::<_, B::Alloc>::try_with_capacity(decoded.len())?;
    for (va, size, op) in decoded.iter().flatten() {
        reqs.try_push(op.req(*va, *size))?;
    }
    // Indices of requests back to indices of user ops (size-0 ops have no request).
    let index_of = |req: usize| {
        decoded
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_some())
            .nth(req)
            .map_or(ops.len(), |(i, _)| i)
    };
    let mut vm = vm.guard();
    // A sparse map needs the file's sparse backing, made once every request is known to be
    // good (a malformed bind leaves no memory behind).
    let sparse = reqs
        .iter()
        .position(|r| matches!(r, BindReq::MapSparse { size: 1.., .. }));
    if let Some(first) = sparse {
        let ready = vm.check_requests(&reqs).and_then(|()| {
            file.inner()
                .give_sparse_backing(dev, &mut *vm)
                .map_err(|e| (first, e))
        });
        if let Err((i, e)) = ready {
            args.ops.count = index_of(i) as u32;
            return Err(e.into());
        }
    }
    // The address-space lock is taken for each bounded step of the update, not across it.
    let mut upd = AsStepUpdate::new(&dev.backend, &dev.slots, vm.key());
    let res = vm.bind(&reqs, &mut upd);
    if let Err((i, e)) = res {
        args.ops.count = index_of(i) as u32;
        return Err(e.into());
    }
    Ok(0)
}

pub(crate) fn vm_get_state<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::VmGetState,
    file: &File<B>,
) -> DrmResult<u32> {
    let vm = file.inner().vm(args.vm_id)?;
    args.state = if vm.guard().is_unusable() {
        uapi::DRM_PANTHOR_VM_STATE_UNUSABLE
    } else {
        uapi::DRM_PANTHOR_VM_STATE_USABLE
    };
    Ok(0)
}

pub(crate) fn bo_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::BoCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    use uapi::*;
    let known = DRM_PANTHOR_BO_NO_MMAP | DRM_PANTHOR_BO_WB_MMAP;
    if args.size == 0 || args.pad != 0 || args.flags & !known != 0 || args.flags & known == known {
        return Err(DrmError::Invalid);
    }
    let exclusive_vm = match args.exclusive_vm_id {
        0 => 0,
        id => (*file.inner().vm(id)?).guard().key(),
    };
    let size = usize::try_from(args.size).map_err(|_| DrmError::NoMemory)?;
    let bo = gem::Object::<TyrBo<B>>::new(
        dev,
        size,
        BoArgs::new(
            dev.backend.dma().clone(),
            dev.key(),
            args.flags,
            exclusive_vm,
        ),
    )?;
    args.handle = bo.create_handle(file)?;
    args.size = bo.size() as u64;
    Ok(0)
}

pub(crate) fn bo_mmap_offset<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::BoMmapOffset,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, args.handle)?;
    if bo.flags() & uapi::DRM_PANTHOR_BO_NO_MMAP != 0 {
        return Err(DrmError::Permission);
    }
    args.offset = bo.create_mmap_offset()?;
    Ok(0)
}

/// Whether the GPU snoops CPU caches (panthor's `ptdev->coherent`); the driver selects no
/// coherency protocol, so CPU caches need maintenance.
fn io_coherent<B: Backend>(dev: &TyrDevice<B>) -> bool {
    dev.gpu_info.raw.selected_coherency != uapi::DRM_PANTHOR_GPU_COHERENCY_NONE
}

/// Reads a NUL-terminated string of at most `max` bytes (its NUL included) at user address
/// `ptr`, as `strndup_user` does: [`Error::Fault`] if a byte before the NUL cannot be read,
/// [`Error::TooBig`] if no NUL comes within `max` bytes. Returns the bytes before the NUL.
fn read_user_cstr<A: drm_ctx::mem::Allocator>(
    user: &dyn UserMemory,
    ptr: u64,
    max: usize,
) -> Result<env::Vec<u8, A>> {
    let mut out = env::Vec::new();
    for i in 0..max as u64 {
        let at = ptr.checked_add(i).ok_or(Error::Fault)?;
        let mut b = [0u8; 1];
        user.read(at, &mut b)?;
        if b[0] == 0 {
            return Ok(out);
        }
        out.try_push(b[0])?;
    }
    Err(Error::TooBig)
}

pub(crate) fn bo_set_label<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::BoSetLabel,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, args.handle)?;
    // A null pointer removes the label; an empty string is a label of its own.
    let label = match args.label {
        0 => None,
        ptr => Some(read_user_cstr(
            file.user(),
            ptr,
            uapi::PANTHOR_BO_LABEL_MAXLEN,
        )?),
    };
    bo.set_label(label);
    Ok(0)
}

pub(crate) fn set_user_mmio_offset<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::SetUserMmioOffset,
    file: &File<B>,
) -> DrmResult<u32> {
    match args.offset {
        uapi::DRM_PANTHOR_USER_MMIO_OFFSET_32BIT | uapi::DRM_PANTHOR_USER_MMIO_OFFSET_64BIT => {
            file.inner().set_user_mmio_offset(args.offset);
            Ok(0)
        }
        _ => Err(DrmError::Invalid),
    }
}

pub(crate) fn bo_sync<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::BoSync,
    file: &File<B>,
) -> DrmResult<u32> {
    use uapi::*;
    if args.ops.count == 0 {
        return Ok(0);
    }
    // Panthor's copy of the array is at most `INT_MAX` bytes (`kvmalloc_array`).
    let bytes = (args.ops.count as usize).saturating_mul(size_of::<BoSyncOp>());
    if (args.ops.stride as usize) >= BoSyncOp::MIN_SIZE && bytes > i32::MAX as usize {
        return Err(DrmError::NoMemory);
    }
    let ops: env::Vec<BoSyncOp, B::Alloc> = read_array(file.user(), &args.ops, u32::MAX)?;
    // Every op is checked before any is applied: a bad one leaves every range untouched.
    let mut checked = env::Vec::<_, B::Alloc>::new();
    checked
        .try_reserve(ops.len())
        .map_err(|_| DrmError::NoMemory)?;
    for op in &ops {
        let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, op.handle)?;
        bo.check_range(op.offset, op.size)?;
        let invalidate = match op.type_ {
            DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH => false,
            DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE => true,
            _ => return Err(DrmError::Invalid),
        };
        checked.try_push((bo, invalidate))?;
    }
    let coherent = io_coherent(dev);
    for ((bo, invalidate), op) in checked.iter().zip(&ops) {
        bo.cpu_sync(op.offset, op.size, *invalidate, coherent)?;
    }
    Ok(0)
}

pub(crate) fn bo_query_info<B: Backend>(
    _dev: &TyrDevice<B>,
    args: &mut uapi::BoQueryInfo,
    file: &File<B>,
) -> DrmResult<u32> {
    let bo = gem::Object::<TyrBo<B>>::lookup_handle(file, args.handle)?;
    args.pad = 0;
    args.create_flags = bo.flags();
    // The host DRM core imports no dma-buf, so no object comes from another driver.
    args.extra_flags = 0;
    Ok(0)
}

/// `TILER_HEAP_CREATE`: a tiler heap in VM `vm_id` ([`crate::heap`]), as panthor makes one:
/// `EINVAL` for an unknown VM or bad arguments (no initial chunk, more than `max_chunks`, a
/// chunk size that is not page aligned or outside 128 KiB..=8 MiB), `EBUSY` when the VM has
/// 128 heaps, `ENOMEM` when memory or the file's heap budget runs out. The handle is
/// `vm_id << 16 | index`; on failure nothing changes and the arguments are not written.
pub(crate) fn tiler_heap_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::TilerHeapCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    let vm = file.inner().vm(args.vm_id)?;
    let heap_args = heap::HeapArgs {
        initial_chunks: args.initial_chunk_count,
        chunk_size: args.chunk_size,
        max_chunks: args.max_chunks,
        target_in_flight: args.target_in_flight,
    };
    let stride = heap::context_stride(dev.gpu_info.raw.l2_features);
    // A VM destroyed while the heap is made gets no heap pool.
    let live = || {
        file.inner()
            .vm(args.vm_id)
            .is_ok_and(|v| env::Arc::ptr_eq(&v, &vm))
    };
    let made = dev.heaps.create(
        &dev.backend,
        &dev.slots,
        &vm,
        &file.inner().heap_budget,
        stride,
        heap_args,
        live,
    )?;
    args.handle = args.vm_id << 16 | made.index;
    args.tiler_heap_ctx_gpu_va = made.context_va;
    args.first_heap_chunk_gpu_va = made.first_chunk_va;
    Ok(0)
}

/// `TILER_HEAP_DESTROY`: destroys heap `handle` as panthor does: `EINVAL` for a non-zero
/// `pad`, an unknown VM (`handle >> 16`) or heap; `ENOENT` for a VM that never had a heap.
/// A job still tiling into the heap faults on its unmapped chunks.
pub(crate) fn tiler_heap_destroy<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::TilerHeapDestroy,
    file: &File<B>,
) -> DrmResult<u32> {
    if args.pad != 0 {
        return Err(DrmError::Invalid);
    }
    let vm = file.inner().vm(args.handle >> 16)?;
    let key = vm.guard().key();
    dev.heaps
        .destroy(&dev.backend, &dev.slots, key, args.handle & 0xffff)?;
    Ok(0)
}

// ---------------------------------------------------------------- mmap

/// Protection and sharing of an `mmap()` request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmapProt {
    /// `PROT_WRITE`.
    pub write: bool,
    /// `PROT_EXEC`.
    pub exec: bool,
    /// `MAP_SHARED` (otherwise private).
    pub shared: bool,
}

/// What an `mmap()` of the file maps.
pub enum Mapping<'a, B: Backend> {
    /// A buffer object (below the file's user MMIO offset).
    Bo(ARef<gem::Object<TyrBo<B>>>),
    /// The page holding `LATEST_FLUSH_ID`.
    FlushId(FlushIdPage<'a, B>),
}

/// A mapping of the user MMIO page that holds `LATEST_FLUSH_ID`: each read is a read of the
/// register, as a load through the mapping would be.
pub struct FlushIdPage<'a, B: Backend> {
    dev: &'a TyrDevice<B>,
}

impl<B: Backend> FlushIdPage<'_, B> {
    /// The first word of the page, `LATEST_FLUSH_ID`; [`Error::NoDevice`] once the device is
    /// unplugged (where a real mapping would take a bus error).
    pub fn latest_flush_id(&self) -> Result<u32> {
        let _entry = self.dev.enter()?;
        Ok(self.dev.backend.io().read(LATEST_FLUSH_ID).into_raw())
    }
}

/// What an `mmap()` of a file maps at a file offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmapTarget {
    /// A buffer object: the offset is below the file's user MMIO offset, GEM's to resolve.
    Bo,
    /// The user MMIO page holding `LATEST_FLUSH_ID`.
    FlushId,
}

/// Resolves an `mmap()` of `len` bytes at file offset `offset` of `file` as panthor does:
/// offsets from the file's user MMIO offset on
/// ([`TyrFile::user_mmio_offset`](crate::file::TyrFile)) are the user MMIO pages, translated
/// to `DRM_PANTHOR_USER_MMIO_OFFSET`; of those only the flush-ID page exists, mapped shared,
/// read-only, one page long ([`Error::Invalid`] otherwise). Lower offsets are buffer objects.
pub(crate) fn mmap_target<B: Backend>(
    file: &File<B>,
    offset: u64,
    len: usize,
    prot: MmapProt,
) -> Result<MmapTarget> {
    let start = file.inner().user_mmio_offset();
    if offset < start {
        return Ok(MmapTarget::Bo);
    }
    let offset = (offset - start)
        .checked_add(uapi::DRM_PANTHOR_USER_MMIO_OFFSET)
        .ok_or(Error::Invalid)?;
    if !prot.shared {
        return Err(Error::Invalid);
    }
    match offset {
        uapi::DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET
            if len as u64 == PAGE_SIZE && !prot.write && !prot.exec =>
        {
            Ok(MmapTarget::FlushId)
        }
        _ => Err(Error::Invalid),
    }
}

/// `mmap()` of `len` bytes at file offset `offset` of `fd`, as panthor resolves it: offsets
/// from the file's user MMIO offset on ([`TyrFile::user_mmio_offset`](crate::file::TyrFile))
/// are the user MMIO pages, translated to `DRM_PANTHOR_USER_MMIO_OFFSET`; of those only the
/// flush-ID page exists, mapped shared, read-only, one page long ([`Error::Invalid`]
/// otherwise), as a [`FlushIdPage`]. Lower offsets are buffer objects, which the DRM core
/// maps (`Fd::mmap`).
///
/// The host DRM core's own `Fd::mmap` knows only GEM offsets, so this is the driver's mmap
/// entry point for tests and the Mesa-like client. In the kernel the DRM core asks the driver
/// first ([`drm_ctx::drm::Driver::mmap_own`]), which resolves the offset the same way.
#[cfg(feature = "host")]
pub fn mmap<'a, B: Backend>(
    fd: &'a drm_ctx::host::Fd<crate::gem::TyrDriver<B>>,
    offset: u64,
    len: usize,
    prot: MmapProt,
) -> Result<Mapping<'a, B>> {
    let file = fd.file();
    let dev = file.device();
    let _entry = dev.enter()?;
    match mmap_target(file, offset, len, prot)? {
        MmapTarget::Bo => Ok(Mapping::Bo(fd.mmap(offset, len)?)),
        MmapTarget::FlushId => Ok(Mapping::FlushId(FlushIdPage { dev })),
    }
}

// ---------------------------------------------------------------- GROUP_*

pub(crate) fn group_create<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::GroupCreate,
    file: &File<B>,
) -> DrmResult<u32> {
    let info = &dev.gpu_info.raw;
    // Panthor's order: the queue count, the queue array, then the priority.
    if args.queues.count == 0 || args.queues.count > dev.csif_info.cs_slot_count {
        return Err(DrmError::Invalid);
    }
    let qargs: env::Vec<uapi::QueueCreate, B::Alloc> =
        read_array(file.user(), &args.queues, dev.csif_info.cs_slot_count)?;
    group_priority_permit(file, args.priority)?;
    if args.pad != 0
        || args.compute_core_mask & !info.shader_present != 0
        || args.fragment_core_mask & !info.shader_present != 0
        || args.tiler_core_mask & !info.tiler_present != 0
        || args.compute_core_mask.count_ones() < u32::from(args.max_compute_cores)
        || args.fragment_core_mask.count_ones() < u32::from(args.max_fragment_cores)
        || args.tiler_core_mask.count_ones() < u32::from(args.max_tiler_cores)
    {
        return Err(DrmError::Invalid);
    }
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
    let handle = sched::DevInner::create_group(dev.shared(), dev, file, vm, &qargs, args.priority)?;
    args.group_handle = handle;
    Ok(0)
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

/// A job of a submission being prepared.
struct Prep<B: Backend> {
    queue: usize,
    job: PreparedJob<B::Fence, B::JobAlloc, JobPayload<B::Fence>>,
}

pub(crate) fn group_submit<B: Backend>(
    dev: &TyrDevice<B>,
    args: &mut uapi::GroupSubmit,
    file: &File<B>,
) -> DrmResult<u32> {
    let t0 = sched::now_ns(&dev.backend);
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
    let subs: env::Vec<uapi::QueueSubmit, B::Alloc> =
        read_array(file.user(), &args.queue_submits, JOB_SLOTS as u32)?;
    // Panthor's order: every job checked and its sync ops read, then the signal ops of all
    // jobs collected, then each job's waits resolved (an earlier job of the call signalling
    // what it waits on is its dependency) before its own signals are set.
    let mut syncs: env::Vec<env::Vec<uapi::SyncOp, B::Alloc>, B::Alloc> = env::Vec::new();
    syncs
        .try_reserve(subs.len())
        .map_err(|_| DrmError::NoMemory)?;
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
        syncs.try_push(read_array(file.user(), &qs.syncs, MAX_SYNCS)?)?;
    }
    let t1 = sched::now_ns(&dev.backend);
    let mut ctx = SyncCtx::<B>::new(file);
    for s in &syncs {
        ctx.collect_signals(s)?;
    }
    let mut preps: env::Vec<Prep<B>, B::Alloc> = env::Vec::new();
    preps
        .try_reserve(subs.len())
        .map_err(|_| DrmError::NoMemory)?;
    // Prepare every job; nothing is visible until all are prepared.
    for (qs, s) in subs.iter().zip(&syncs) {
        let waits = ctx.waits(s)?;
        let q = &g.queues[qs.queue_index as usize];
        let payload = JobPayload {
            stream_addr: qs.stream_addr,
            stream_size: qs.stream_size,
            latest_flush: qs.latest_flush,
            hw: dev.backend.new_hw_fence(&q.alloc)?,
            queued_at: 0,
        };
        let mut job = PreparedJob::new(
            &q.alloc,
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
        ctx.set_signaller(s, job.done_fence())?;
        preps.try_push(Prep {
            queue: qs.queue_index as usize,
            job,
        })?;
    }
    let t2 = sched::now_ns(&dev.backend);
    // Lock the queues involved (in index order) and check there is room for every job.
    type Locked<'a, B> = (
        usize,
        LockGuard<'a, B, env::Box<sched::JobQueue<B>, <B as Backend>::Alloc>>,
    );
    let mut locks: env::Vec<Locked<'_, B>, B::Alloc> = env::Vec::try_with_capacity(g.queues.len())?;
    for (i, q) in g.queues.iter().enumerate() {
        let n = preps.iter().filter(|p| p.queue == i).count();
        if n == 0 {
            continue;
        }
        let jq = q.jq.guard();
        if jq.is_killed() || g.state.dead.load(Ordering::Acquire) {
            return Err(DrmError::Invalid);
        }
        if jq.pending_jobs() + n > JOB_SLOTS {
            return Err(DrmError::Busy);
        }
        // Room for every queue was made above.
        let _ = locks.push_within_capacity((i, jq));
    }
    // Commit: nothing fails from here on.
    for mut p in preps {
        p.job.payload_mut().queued_at = t2;
        let Some((_, jq)) = locks.iter_mut().find(|(i, _)| *i == p.queue) else {
            continue;
        };
        let Ok(r) = jq.reserve() else {
            // Ruled out above (room checked, queue not killed, under its lock); should it
            // happen anyway, the job's done fence (and so later jobs of this submission and
            // its syncobjs) signals with an error.
            p.job.done_fence().signal(Err(FenceError::CANCELED));
            continue;
        };
        r.commit(p.job);
    }
    drop(locks);
    ctx.push();
    dev.backend.executor().waker().wake_by_ref();
    let t3 = sched::now_ns(&dev.backend);
    dev.sched.shared.profile.add_call(
        t1.saturating_sub(t0),
        t2.saturating_sub(t1),
        t3.saturating_sub(t2),
    );
    Ok(0)
}

// ---------------------------------------------------------------- asynchronous VM_BIND

/// An op of an asynchronous bind, checked and with its VM change reserved.
struct BindJob<B: Backend> {
    payload: BindPayload<B>,
    syncs: env::Vec<uapi::SyncOp, B::Alloc>,
    /// Whether the op maps sparsely (and so needs the VM's sparse backing).
    sparse: bool,
}

/// `VM_BIND` with `DRM_PANTHOR_VM_BIND_ASYNC`.
pub(crate) fn vm_bind_async<B: Backend>(
    dev: &TyrDevice<B>,
    args: &uapi::VmBind,
    file: &File<B>,
    ops: &[uapi::VmBindOp],
) -> DrmResult<u32> {
    let vm = file.inner().vm(args.vm_id)?;
    let key = vm.guard().key();
    let queue = dev.sched.binds.get(dev.shared(), key, || {
        file.inner()
            .vms
            .guard()
            .get(args.vm_id)
            .is_some_and(|v| env::Arc::ptr_eq(v, &vm))
    })?;
    // Refuse what cannot fit before setting any memory aside (checked again at commit).
    {
        let q = queue.queue.guard();
        if q.is_killed() {
            return Err(DrmError::Invalid);
        }
        if q.pending_jobs() + ops.len() > JOB_SLOTS {
            return Err(DrmError::Busy);
        }
    }
    // Unlike a synchronous bind, a failing asynchronous one leaves `ops.count` alone (as
    // panthor does); nothing of the call is queued. Panthor's order: every op checked (and
    // its change reserved) and its sync ops read, the signal ops of all collected, then each
    // op's waits resolved before its own signals are set.
    let mut jobs = env::Vec::<BindJob<B>, B::Alloc>::try_with_capacity(ops.len())?;
    for op in ops {
        let hw = dev.backend.new_hw_fence(&queue.alloc)?;
        jobs.try_push(prepare_op(op, file, &vm, hw)?)?;
    }
    let mut ctx = SyncCtx::<B>::new(file);
    for j in &jobs {
        ctx.collect_signals(&j.syncs)?;
    }
    let sparse = jobs.iter().any(|j| j.sparse);
    type BindPrep<B> = PreparedJob<<B as Backend>::Fence, <B as Backend>::JobAlloc, BindPayload<B>>;
    let mut preps: env::Vec<BindPrep<B>, B::Alloc> = env::Vec::new();
    preps
        .try_reserve(jobs.len())
        .map_err(|_| DrmError::NoMemory)?;
    for j in jobs {
        let waits = ctx.waits(&j.syncs)?;
        let mut job = PreparedJob::new(
            &queue.alloc,
            &BIND_CONFIG,
            Cost(1),
            MaxDeps(waits.len()),
            j.payload,
        )
        .map_err(|r| Error::from_errno(r.error.to_errno()))?;
        for f in &waits {
            job.add_dependency(f)
                .map_err(|e| Error::from_errno(e.to_errno()))?;
        }
        ctx.set_signaller(&j.syncs, job.done_fence())?;
        preps.try_push(job)?;
    }
    // A sparse map needs the file's sparse backing by the time it applies: made once every
    // op is known to be good (a malformed call leaves no memory behind).
    if sparse {
        file.inner().give_sparse_backing(dev, &mut vm.guard())?;
    }
    let mut q = queue.queue.guard();
    if q.is_killed() {
        return Err(DrmError::Invalid);
    }
    if q.pending_jobs() + preps.len() > JOB_SLOTS {
        return Err(DrmError::Busy);
    }
    for job in preps {
        let Ok(r) = q.reserve() else {
            // Ruled out above (room checked under the queue's lock); should it happen anyway,
            // the bind's done fence (and so later binds of this call and its syncobjs)
            // signals with an error.
            job.done_fence().signal(Err(FenceError::CANCELED));
            continue;
        };
        r.commit(job);
    }
    drop(q);
    ctx.push();
    queue.exec.waker().wake_by_ref();
    Ok(0)
}

/// Checks one op of an asynchronous bind, reserves its change of the VM and reads its sync
/// ops (panthor's `panthor_vm_bind_job_create`, then the job's sync array).
fn prepare_op<B: Backend>(
    op: &uapi::VmBindOp,
    file: &File<B>,
    vm: &SharedVm<B>,
    hw: B::Fence,
) -> Result<BindJob<B>> {
    use uapi::*;
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
            decode_op(op, file)?
        };
    let (va, size, op_kind) = decoded.unwrap_or((0, 0, BindOp::Unmap));
    let res = {
        let mut v = vm.guard();
        if v.is_unusable() {
            return Err(Error::Invalid);
        }
        v.reserve_bind(&[op_kind.req(va, size)])
            .map_err(|(_, e)| e)?
    };
    let sparse = matches!(op_kind, BindOp::MapSparse { .. }) && size != 0;
    let payload = BindPayload::new(vm.clone(), va, size, op_kind, res, hw);
    let syncs: env::Vec<SyncOp, B::Alloc> = read_array(file.user(), &op.syncs, MAX_SYNCS)?;
    Ok(BindJob {
        payload,
        syncs,
        sparse,
    })
}
