// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Groups, queues, group slots, interrupts, timeouts and reset: the road of a job from
//! `GROUP_SUBMIT` to the hardware and back, and the device state it runs on.
//!
//! # How work reaches a CSF GPU
//!
//! Userspace builds *command streams* (sequences of 64-bit CSF instructions) in GPU memory and
//! submits jobs that name them. The kernel never parses them: each queue of a group owns a
//! *ring buffer* in GPU memory, and a job is a handful of instructions the driver writes into
//! the ring — call the user's stream, then add one to the queue's *sync object* (a 64-bit
//! counter in GPU memory) — followed by a store of the new insert pointer and a ring of the
//! queue's doorbell. The firmware runs the group's streams once the group occupies one of the
//! GPU's few *group slots*; when a stream updates a sync object it raises an interrupt, the
//! driver reads the counters and signals the hardware fences of the jobs that are done.
//!
//! # The pieces
//!
//! - Each queue is a [`jobqueue::Queue`] whose backend ([`RingHw`]) writes jobs into the ring
//!   (`run_job`), so that a job enters the ring only once its dependencies (other jobs, binds,
//!   syncobjs) have signalled, in order, and within the ring's credits: a ring of `S` bytes
//!   holds `S / 8` instructions and every job costs [`JOB_INSTRS`] of them.
//! - Everything a job needs on the way to its fence is allocated when it is submitted: the
//!   jobqueue job (done fence, callback nodes, dependency table) and its hardware fence.
//!   `run_job` and the interrupt handler only write memory that exists already.
//! - Groups get a slot when they have work (the work item schedules them); a group whose streams are
//!   all idle gives its slot up when another group needs one. The group's VM gets an address
//!   space for as long as the group holds a slot (pinned: it cannot be evicted meanwhile).
//!
//! # Sharing the slots: priorities and time-slicing
//!
//! The firmware can *suspend* a group: stop its streams between two instructions and save
//! what they need to go on (where each stands in its ring and in the user streams it called,
//! its registers, what it waits for) into the group's *suspend buffer*, memory the driver
//! gives each group in the MCU's address space; *resuming* reloads that state on any slot.
//! That is what lets more groups share the slots than there are slots. Following panthor's
//! tick (`tick_ctx_init`, `tick_ctx_pick_groups_from_list`, `tick_ctx_apply`):
//!
//! - While groups with work wait for a slot, the scheduler ticks every [`TICK_PERIOD`], and at
//!   once when a waiting group has a higher priority than a resident one. A tick orders the
//!   groups with work by priority, then waiting before resident, then by when they last got a
//!   slot (round robin among equals), suspends the resident groups outside the first
//!   eight (waiting for the firmware's acknowledgement; after [`SUSPEND_TIMEOUT`] the GPU is
//!   reset) and starts or resumes the chosen ones on the free slots.
//! - The CSG priority field of `ENDPOINT_REQ` carries the group's priority
//!   ([`csg_priority`]): the firmware runs higher-priority resident groups first. Inside a
//!   group, each queue's priority (`drm_panthor_queue_create::priority`) goes into its
//!   stream's `CS_CONFIG`, as panthor's `CS_CONFIG_PRIORITY`.
//! - A suspended group keeps its jobs; their fences stay pending until it runs again.
//! - Every group gets a suspend buffer when it is created, from a window of them in the MCU's
//!   address space (a block of 1 MiB made at probe) that grows by a block when all are taken,
//!   up to one per queue interface ([`MAX_SUSPEND_BUFS`]): a client holds at most its share of
//!   the queue interfaces, so it cannot take the places other clients' groups need. A group
//!   that cannot get one is not created (`ENOMEM`); only a firmware that asks for no suspend
//!   buffer gives groups that are never suspended (they leave their slot only when idle).
//!
//! # When things go wrong
//!
//! - A job times out after [`JOB_TIMEOUT`] of its group's slot time in which its queue made no
//!   progress ([`GroupState::timeout_clock`]); waiting for a slot never counts, except for a
//!   group suspended while blocked on a sync wait with nothing else to do (panthor's
//!   `queue_suspend_timeout` keeps that timer running: only something outside the group can
//!   unblock it). Its group is marked `TIMEDOUT`, its queues are killed (the guilty job
//!   fails with `ETIMEDOUT`, the rest with `ECANCELED`), and, if the group held a slot, the
//!   GPU is reset (retrying a reset that does not complete). After the reset the firmware is
//!   booted again and every other group, resident or suspended (suspend buffers do not
//!   survive it), is replayed from the first job it had not finished: its ring still holds
//!   those jobs, so they run again and complete.
//! - A stream that faults (an access to an unmapped address) stops; the driver fails the job
//!   that was running with `EFAULT`, marks the group `FATAL_FAULT` (the queue in
//!   `fatal_queues`) and the VM unusable, and kills the group's queues. Other groups and VMs
//!   are untouched.
//! - A group that is dead refuses new submissions with `EINVAL` (as panthor does for a group
//!   that cannot run). Its slot is terminated (`CSG_STATE_TERMINATE`) and its memory (suspend
//!   buffer, rings, interface words) goes only once the firmware has acknowledged that: the
//!   firmware answers late and runs the group's streams until then. A termination not
//!   acknowledged within [`SUSPEND_TIMEOUT`] resets the GPU, and the memory goes after the
//!   reset.
//! - A stream whose tiler runs out of heap memory raises `TILER_OOM`: the interrupt handler
//!   notes it, the work item grows the heap ([`crate::heap`]) and hands the new chunk to the
//!   stream, or 0 when the heap may not grow (the stream then faults with `OUT_OF_MEMORY` and
//!   the job fails as on any fault); a `TILER_OOM` the driver cannot make sense of (no heap
//!   context at that address, inconsistent counters) kills the group, as panthor does.
//!
//! Every done fence signals: completed, failed, or cancelled when its queue is killed.
//!
//! # The device state
//!
//! [`DevInner`] is the device as everything above the scheduler sees it (panthor's
//! `panthor_device`): the environment, what the probe found, the MCU's VM, the address-space
//! slots, the firmware's interface blocks and the scheduler state ([`Sched`]). [`TyrData`] is
//! the handle the DRM device holds; dropping it (unplug) stops the events, cancels the bind
//! queues, tears every group down and stops the MCU. The device's interrupt handler and work
//! item ([`Events`]) are here, and so is reset. The ring backends hold the device weakly; the
//! bind queues reach it through [`BindDevice`], which it implements.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use drm_ctx::drm::{gem, AnyCtx};
use drm_ctx::types::ARef;
use jobqueue::{
    Backend as JqBackend, Executor, FenceError, QueueConfig, RunJob, SignalCtx, SignalFence,
    TimedOutJob, TimeoutAction,
};
use register::io::poll::{read_poll_timeout, PollClock};
use register::io::Io;

use crate::backend::{Backend, DmaMemory, DmaRegion, Events, Lock, LockOf, Words, PAGE_SIZE};
use crate::bindq::{BindDevice, BindQueues};
use crate::csf::{cs, csg, glb};
use crate::fw::FwIface;
use crate::gem::{BoRef, McuVm, SharedVm, TyrBo, TyrVm};
use crate::heap::HeapPools;
use crate::mmu::{self, AsSlots, AsUpdate};
use crate::regs::{
    mcu, AS_FAULTADDRESS, AS_FAULTSTATUS, DOORBELL, GPU_FAULTADDRESS, GPU_FAULTSTATUS,
    GPU_IRQ_MASK, GPU_IRQ_STATUS, JOB_IRQ_CLEAR, JOB_IRQ_MASK, JOB_IRQ_STATUS, MCU_CONTROL,
    MMU_IRQ_CLEAR, MMU_IRQ_MASK, MMU_IRQ_STATUS,
};
use crate::{dev_err, dev_info, env, gpu, uapi, Error, Result};

pub use crate::job::{SchedClock, SubmitProfile, JOB_SLOTS, JOB_TIMEOUT};

/// Instructions the driver writes into the ring per job (its cost in credits).
pub const JOB_INSTRS: u32 = 16;
/// Largest user command stream one job may call.
pub const MAX_STREAM_SIZE: u32 = 1 << 20;
/// Smallest and largest ring buffer.
pub const RINGBUF_SIZES: core::ops::RangeInclusive<u32> = 0x1000..=0x1_0000;
/// First register the driver's ring instructions use (the top four of the 96, which userspace
/// streams may not rely on across calls).
pub const KREG: u8 = 92;
/// Offset of the per-queue interface words in the firmware region.
pub const QUEUE_IFACE_BASE: u64 = 0xa000;
/// Bytes of interface words per queue (input `{insert, extract}`, output `{extract, active}`).
pub const QUEUE_IFACE_SIZE: u64 = 0x20;
/// Queues whose interface words fit in the firmware region.
pub const MAX_QUEUES: usize =
    ((crate::fw::FW_INTERFACE_SIZE as u64 - QUEUE_IFACE_BASE) / QUEUE_IFACE_SIZE) as usize;
/// Bytes of sync objects per queue (`{seqno, status, pad}` as panthor lays them out).
pub(crate) const SYNCOBJ_SIZE: u64 = 16;

/// A job queue of the driver.
pub type JobQueue<B> = jobqueue::Queue<
    RingHw<B>,
    <B as Backend>::Exec,
    SchedClock<<B as Backend>::TimerClock>,
    JOB_SLOTS,
>;

/// What a job carries from submission to the ring (`F`: the backend's fence).
pub struct JobPayload<F> {
    /// GPU address of the user stream (0 for a job that only synchronises).
    pub stream_addr: u64,
    /// Size of the user stream in bytes.
    pub stream_size: u32,
    /// The flush ID userspace sampled when it wrote the stream (`LATEST_FLUSH_ID`, from the
    /// flush-ID page): the job's cache flush is skipped if one happened since.
    pub latest_flush: u32,
    /// The hardware fence, allocated at submission so that `run_job` allocates nothing.
    pub hw: F,
    /// When the job was put on its queue (the clock of the driver's deadlines, ns), for the
    /// [`SubmitProfile`].
    pub queued_at: u64,
}

/// State a group shares with its queues' ring backends and the interrupt handler.
#[derive(Debug, Default)]
pub struct GroupState {
    /// `DRM_PANTHOR_GROUP_STATE_*`.
    pub state: AtomicU32,
    /// Queues that hit a fatal fault.
    pub fatal_queues: AtomicU32,
    /// The group accepts no more work and is being (or has been) torn down.
    pub dead: AtomicBool,
    /// The group has been torn down.
    pub torn_down: AtomicBool,
    /// The group slot it occupies ([`NO_SLOT`] if none).
    pub slot: AtomicUsize,
    /// Jobs were written to a ring while the group had no slot.
    pub wants_slot: AtomicBool,
    /// Queues with a `TILER_OOM` the work item has to answer.
    pub tiler_oom: AtomicU32,
    /// `PANTHOR_GROUP_PRIORITY_*` the group was created with.
    pub priority: AtomicU32,
    /// The firmware saved the group's streams in its suspend buffer: its next slot resumes it.
    pub suspended: AtomicBool,
    /// Scheduler tick at which the group last got a slot (round robin among equals).
    pub stamp: AtomicU64,
    /// Nanoseconds of job-timeout time spent in the past (see [`GroupState::timeout_clock`]).
    pub run_ns: AtomicU64,
    /// Since when (ns) job-timeout time runs ([`NOT_RUNNING`] if it does not).
    pub run_since: AtomicU64,
    /// The slot the group was last suspended from.
    pub suspended_from: AtomicUsize,
    /// The group was torn down but the firmware did not acknowledge its termination: its
    /// memory (suspend buffer, rings, interface words) stays until the reset takes the slot
    /// back from the firmware.
    pub mem_held: AtomicBool,
}

/// Value of [`GroupState::run_since`] while the group's job-timeout time stands still.
pub const NOT_RUNNING: u64 = u64::MAX;

impl GroupState {
    /// A fresh group of priority `priority`, without a slot.
    pub fn new(priority: u8) -> Self {
        GroupState {
            slot: AtomicUsize::new(NO_SLOT),
            priority: AtomicU32::new(u32::from(priority)),
            run_since: AtomicU64::new(NOT_RUNNING),
            ..GroupState::default()
        }
    }

    /// The group's job-timeout clock at `now` (ns): it runs while the group holds a slot, and
    /// while it waits for one after losing it with every queue idle or blocked on a sync
    /// wait (nothing inside the group can unblock it then; panthor times that wait too). It
    /// stands still while the group waits for a slot with work to do.
    pub fn timeout_clock(&self, now: u64) -> u64 {
        let past = self.run_ns.load(Ordering::Acquire);
        match self.run_since.load(Ordering::Acquire) {
            NOT_RUNNING => past,
            since => past.saturating_add(now.saturating_sub(since)),
        }
    }

    fn start_timeout_clock(&self, now: u64) {
        let _ =
            self.run_since
                .compare_exchange(NOT_RUNNING, now, Ordering::AcqRel, Ordering::Acquire);
    }

    fn stop_timeout_clock(&self, now: u64) {
        let since = self.run_since.swap(NOT_RUNNING, Ordering::AcqRel);
        if since != NOT_RUNNING {
            self.run_ns
                .fetch_add(now.saturating_sub(since), Ordering::AcqRel);
        }
    }
}

/// The time of the driver's deadlines ([`Backend::timer_clock`]) in nanoseconds.
pub(crate) fn now_ns<B: Backend>(b: &B) -> u64 {
    u64::try_from(b.timer_clock().now().as_nanos()).unwrap_or(u64::MAX)
}

/// Value of [`GroupState::slot`] for a group without a slot.
pub const NO_SLOT: usize = usize::MAX;

/// What the device's scheduler shares with the ring backends.
pub struct SchedShared {
    /// A job timed out: the GPU must be reset.
    pub reset_needed: AtomicBool,
    /// Number of GPU resets done.
    pub resets: AtomicU32,
    /// Where submitted jobs' time goes.
    pub profile: SubmitProfile,
}

/// A ring in flight: one job written to the ring and not yet seen complete.
struct Inflight<F> {
    /// Sync-object value at which the job is complete.
    target: u64,
    /// Ring position (bytes, monotonic) of the job's first instruction.
    pos: u64,
    fence: F,
    /// When its doorbell was rung (ns, the clock of the driver's deadlines).
    rung_at: u64,
}

/// Jobs [`RingHw::complete`] found complete.
#[derive(Clone, Copy, Debug, Default)]
pub struct Completed {
    /// How many.
    pub jobs: u64,
    /// The sum of their [`Inflight::rung_at`].
    rung_sum: u64,
}

/// The ring backend of one queue (what `jobqueue` calls to put jobs on the hardware).
pub struct RingHw<B: Backend> {
    backend: env::Weak<DevInner<B>, B::Alloc>,
    group: env::Arc<GroupState, B::Alloc>,
    /// Queue index in the group (the stream of the group's slot).
    pub index: usize,
    /// GPU address and device address of the ring buffer, and its size.
    pub ring_va: u64,
    ring_dma: u64,
    /// Ring size in bytes.
    pub ring_size: u64,
    /// GPU address and device address of the queue's sync object.
    pub sync_va: u64,
    sync_dma: u64,
    /// Offset of the queue's interface words in the firmware region.
    pub iface: u64,
    insert: u64,
    emitted: u64,
    /// Sync-object value seen at the last timeout check.
    progress_mark: u64,
    /// The group's [timeout clock](GroupState::timeout_clock) when the queue last made
    /// progress (or got work on an empty ring).
    progress_at: u64,
    /// The jobs on the ring, oldest at `head`: `JOB_SLOTS` entries, always. A block of its own
    /// (made with the ring), not inline: the queue is made in place, but the ring is passed to
    /// it by value, and inline these entries would cross two stack frames on the way.
    inflight: env::Vec<Option<Inflight<B::Fence>>, B::Alloc>,
    head: usize,
    len: usize,
}

/// Addresses of one queue's memory.
pub(crate) struct QueueMem {
    pub(crate) ring_va: u64,
    pub(crate) ring_dma: u64,
    pub(crate) ring_size: u64,
    pub(crate) sync_va: u64,
    pub(crate) sync_dma: u64,
    pub(crate) iface: u64,
}

impl<B: Backend> RingHw<B> {
    pub(crate) fn new(
        backend: env::Weak<DevInner<B>, B::Alloc>,
        group: env::Arc<GroupState, B::Alloc>,
        index: usize,
        m: QueueMem,
    ) -> Result<Self> {
        let mut inflight = env::Vec::try_with_capacity(JOB_SLOTS)?;
        for _ in 0..JOB_SLOTS {
            // Room for every entry was made above.
            let _ = inflight.push_within_capacity(None);
        }
        Ok(RingHw {
            backend,
            group,
            index,
            ring_va: m.ring_va,
            ring_dma: m.ring_dma,
            ring_size: m.ring_size,
            sync_va: m.sync_va,
            sync_dma: m.sync_dma,
            iface: m.iface,
            insert: 0,
            emitted: 0,
            progress_mark: 0,
            progress_at: 0,
            inflight,
            head: 0,
            len: 0,
        })
    }

    /// The sync object's value.
    pub fn completed(&self, dma: &B::Dma) -> u64 {
        Words(dma).rd64(self.sync_dma)
    }

    /// Signals the hardware fences of every job the sync object says is done.
    pub fn complete(&mut self, dma: &B::Dma) -> Completed {
        let value = self.completed(dma);
        let mut done = Completed::default();
        while self.len > 0 {
            match &self.inflight[self.head] {
                Some(j) if j.target <= value => {}
                _ => break,
            }
            if let Some(j) = self.inflight[self.head].take() {
                j.fence.signal(Ok(()));
                done.jobs += 1;
                done.rung_sum = done.rung_sum.wrapping_add(j.rung_at);
            }
            self.head = (self.head + 1) % JOB_SLOTS;
            self.len -= 1;
        }
        done
    }

    /// Fails every job still on the ring: the first with `first`, the others with `ECANCELED`.
    pub fn fail_inflight(&mut self, first: FenceError) {
        let mut err = first;
        while self.len > 0 {
            if let Some(j) = self.inflight[self.head].take() {
                j.fence.signal(Err(err));
            }
            err = FenceError::CANCELED;
            self.head = (self.head + 1) % JOB_SLOTS;
            self.len -= 1;
        }
    }

    /// Whether every job written to the ring is complete.
    pub fn is_idle(&self) -> bool {
        self.len == 0
    }

    /// Ring position from which the jobs not yet complete start (the insert pointer if none).
    pub fn replay_from(&self) -> u64 {
        match &self.inflight[self.head] {
            Some(j) if self.len > 0 => j.pos,
            _ => self.insert,
        }
    }

    /// The insert pointer.
    pub fn insert(&self) -> u64 {
        self.insert
    }

    fn write_job(&mut self, dma: &B::Dma, p: &JobPayload<B::Fence>, scoreboards: u32) {
        let words = job_instrs(
            p.stream_addr,
            p.stream_size,
            p.latest_flush,
            self.sync_va,
            scoreboards,
        );
        let w = Words(dma);
        for (i, word) in words.iter().enumerate() {
            let at = (self.insert + 8 * i as u64) & (self.ring_size - 1);
            w.wr64(self.ring_dma + at, *word);
        }
        dma.sync_for_device(self.ring_dma, self.ring_size as usize);
    }
}

/// The instructions of one job in its queue's ring, panthor's (`prepare_job_instrs`, without
/// profiling): flush the GPU's caches unless a flush happened since userspace sampled the flush
/// ID (`latest_flush`), and wait for that; call the user's stream; wait for *everything* the
/// stream issued (its scoreboard entries, the first `scoreboards` of them); only then add one
/// to the queue's sync object, propagating the stream's error state into it; and clear the
/// error state, so that the next job starts clean. Without the wait the sync object (and the
/// job's fence) would signal while the job's work is still running; without the flush the job
/// could read stale cached data the CPU or an earlier job has overwritten. Registers
/// [`KREG`]`..KREG + 4` are the driver's (userspace streams must not rely on them). A job
/// without a stream (`stream_size` 0, a job that only synchronises) has `NOP`s for the call.
pub fn job_instrs(
    stream_addr: u64,
    stream_size: u32,
    latest_flush: u32,
    sync_va: u64,
    scoreboards: u32,
) -> [u64; JOB_INSTRS as usize] {
    use ::csf::{
        FlushMode, Imm48, Instr, OtherFlushMode, Reg, Reg64, Slot, SlotMask, SyncOp, WaitMask,
    };
    let (addr, val, val64) = (Reg64(KREG), Reg(KREG + 2), Reg64(KREG + 2));
    let flush_slot = Slot::ZERO;
    // Every entry the stream has, as panthor's `GENMASK(sb_slot_count - 1, 0)`; WAIT names 8.
    let all = WaitMask::from_bits(SlotMask::first(scoreboards.min(8) as u8).bits() as u8);
    let call = if stream_size == 0 {
        [Instr::nop(); 3]
    } else {
        [
            Instr::move48(addr, Imm48::from_low_bits(stream_addr)),
            Instr::move32(val, stream_size),
            Instr::call(addr, val),
        ]
    };
    let seq = [
        Instr::move32(val, latest_flush),
        Instr::flush_cache2(
            FlushMode::CleanInvalidate,
            FlushMode::CleanInvalidate,
            OtherFlushMode::Invalidate,
            val,
            SlotMask::NONE,
            flush_slot,
        ),
        call[0],
        call[1],
        Instr::wait(WaitMask::from_bits(1 << flush_slot.get())),
        call[2],
        Instr::move48(addr, Imm48::from_low_bits(sync_va)),
        Instr::move48(val64, Imm48::of::<1>()),
        Instr::wait(all),
        Instr::sync_add64(SyncOp::new(addr, val64).propagate_error()),
        Instr::error_barrier(),
    ];
    let mut words = [Instr::nop().encode(); JOB_INSTRS as usize];
    for (w, i) in words.iter_mut().zip(seq) {
        *w = i.encode();
    }
    words
}

impl<B: Backend> JqBackend for RingHw<B> {
    type Fence = B::Fence;
    type Alloc = B::JobAlloc;
    type Payload = JobPayload<B::Fence>;

    fn run_job(
        &mut self,
        job: RunJob<'_, JobPayload<B::Fence>>,
        _ctx: &SignalCtx<'_>,
    ) -> core::result::Result<B::Fence, FenceError> {
        let Some(dev) = self.backend.upgrade() else {
            return Err(FenceError::CANCELED);
        };
        if self.group.dead.load(Ordering::Acquire) {
            return Err(FenceError::CANCELED);
        }
        if self.len >= JOB_SLOTS {
            return Err(FenceError::INVALID);
        }
        let started = now_ns(&dev.backend);
        let handoff = started.saturating_sub(job.payload().queued_at);
        // The GPU does not power down while this job reaches its ring (see `crate::pm`).
        let ran = dev.pm.hold(|| {
            let dma = dev.backend.dma();
            if self.len == 0 {
                // The queue had nothing to do: its job-timeout window starts now.
                self.progress_mark = self.emitted;
                self.progress_at = self.group.timeout_clock(now_ns(&dev.backend));
            }
            let target = self.emitted + 1;
            let p = job.payload();
            self.write_job(dma, p, dev.csif_info.scoreboard_slot_count);
            let fence = p.hw.clone();
            let pos = self.insert;
            self.insert += u64::from(JOB_INSTRS) * 8;
            self.emitted = target;
            let tail = (self.head + self.len) % JOB_SLOTS;
            self.inflight[tail] = Some(Inflight {
                target,
                pos,
                fence: fence.clone(),
                rung_at: started,
            });
            self.len += 1;
            if dev.pm.is_holding() {
                // The device is suspending or suspended: the job waits in the ring, unpublished,
                // until the resume (see `crate::pm`).
                self.group.wants_slot.store(true, Ordering::Release);
                return Ok(fence);
            }
            // Publish the new insert pointer, then tell the firmware.
            let fw = dev.fw.base;
            Words(dma).wr64(fw + self.iface, self.insert);
            match self.group.slot.load(Ordering::Acquire) {
                NO_SLOT => {
                    self.group.wants_slot.store(true, Ordering::Release);
                    // The scheduler looks for a slot (and preempts for a higher priority) now.
                    dev.backend.executor().waker().wake_by_ref();
                }
                slot => ring_doorbell(&dev.backend, slot),
            }
            Ok(fence)
        });
        if ran.is_ok() {
            let rung = now_ns(&dev.backend);
            // The job just written is the ring's last; its GPU stage starts at the doorbell.
            let last = (self.head + self.len + JOB_SLOTS - 1) % JOB_SLOTS;
            if let Some(j) = self.inflight[last].as_mut() {
                j.rung_at = rung;
            }
            dev.sched
                .shared
                .profile
                .add_run(handoff, rung.saturating_sub(started));
        }
        ran
    }

    fn timed_out(
        &mut self,
        job: TimedOutJob<'_, JobPayload<B::Fence>>,
        _ctx: &SignalCtx<'_>,
    ) -> TimeoutAction {
        let dead = self.group.dead.load(Ordering::Acquire);
        if dead {
            // Already being torn down (a fault, a destroy): no reset needed for it. Jobs the
            // GPU finished keep their success; only the rest is cancelled.
            if let Some(dev) = self.backend.upgrade() {
                self.complete(dev.backend.dma());
            }
            self.fail_inflight(FenceError::CANCELED);
            return TimeoutAction::Kill;
        }
        // A job only runs while its group holds a slot and the jobs before it are done: its
        // timeout counts the group's timeout clock (slot time, see `GroupState::timeout_clock`)
        // since the queue last made progress, never the time spent waiting for a slot.
        if let Some(dev) = self.backend.upgrade() {
            let done = self.completed(dev.backend.dma());
            let clock = self.group.timeout_clock(now_ns(&dev.backend));
            if done > self.progress_mark {
                self.progress_mark = done;
                self.progress_at = clock;
            }
            let limit = JOB_TIMEOUT.as_nanos() as u64;
            let spent = clock.saturating_sub(self.progress_at);
            if spent < limit {
                let left = core::time::Duration::from_nanos(limit - spent);
                return TimeoutAction::Extend(left.max(TIMEOUT_RECHECK));
            }
        }
        if let Some(dev) = self.backend.upgrade() {
            // A group the firmware holds may be stuck in it: reset. One that waits for a slot
            // (suspended) runs nowhere; the teardown of the dead group is enough.
            let resident = self.group.slot.load(Ordering::Acquire) != NO_SLOT;
            dev_err!(
                &dev.backend,
                "Job {} of queue {} timed out{}",
                job.seqno(),
                self.index,
                if resident { "; resetting the GPU" } else { "" }
            );
            if resident {
                dev.sched.shared.reset_needed.store(true, Ordering::Release);
            }
            // Jobs that finished before the hang keep their success.
            self.complete(dev.backend.dma());
        }
        self.group
            .state
            .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_TIMEDOUT, Ordering::AcqRel);
        self.group.dead.store(true, Ordering::Release);
        // The guilty job fails with ETIMEDOUT, the rest of the queue is cancelled; the reset
        // (or the teardown) that follows stops the hardware.
        self.fail_inflight(FenceError::TIMED_OUT);
        TimeoutAction::Kill
    }
}

/// Rings the user doorbell of group slot `slot`.
pub(crate) fn ring_doorbell<B: Backend>(b: &B, slot: usize) {
    if let Some(db) = DOORBELL::try_at(1 + slot) {
        b.io().write(db, DOORBELL::zeroed().with_ring(true));
    }
}

/// The configuration of a queue with a ring of `ring_size` bytes. The queue's timeout is only
/// a check-point: `RingHw::timed_out` decides, and may push the deadline back as often as the
/// job waits for a slot (see [`GroupState::timeout_clock`]).
pub fn queue_config(ring_size: u32) -> QueueConfig {
    QueueConfig::new(ring_size / 8)
        .with_timeout(JOB_TIMEOUT)
        .with_max_extensions(u32::MAX)
}

/// Shortest delay before a job's timeout is looked at again.
const TIMEOUT_RECHECK: core::time::Duration = core::time::Duration::from_millis(1);

/// How often the scheduler rotates the resident groups while more groups have work than there
/// are slots (panthor's tick period).
pub const TICK_PERIOD: core::time::Duration = core::time::Duration::from_millis(10);

/// How long the firmware may take to acknowledge a group's start, resume or suspend before the
/// GPU is reset.
pub const SUSPEND_TIMEOUT: core::time::Duration = core::time::Duration::from_millis(100);

/// The CSG priority (`ENDPOINT_REQ` bits 31:28) of a group of uAPI priority `prio`: the four
/// levels spread over the sixteen, equal groups equal.
pub const fn csg_priority(prio: u32) -> u32 {
    if prio > 3 {
        15
    } else {
        prio * 4 + 3
    }
}

/// One queue of a group.
pub struct GroupQueue<B: Backend> {
    /// The job queue (its backend is the ring).
    pub jq: LockOf<B, env::Box<JobQueue<B>, B::Alloc>>,
    /// Its configuration.
    pub config: QueueConfig,
    /// Its fences and job memory.
    pub alloc: B::JobAlloc,
    /// Its priority among the group's queues (`drm_panthor_queue_create::priority`, 0..=15,
    /// 15 highest): the firmware runs a higher one first.
    pub priority: u8,
}

/// A group: queues sharing a VM, scheduled onto a group slot together.
pub struct Group<B: Backend> {
    /// Device-unique key.
    pub key: u64,
    /// The VM.
    pub vm: SharedVm<B>,
    /// The VM's key.
    pub vm_key: u64,
    /// State shared with the rings.
    pub state: env::Arc<GroupState, B::Alloc>,
    /// The queues.
    pub queues: env::Vec<GroupQueue<B>, B::Alloc>,
    /// The object holding rings and sync objects, and where it is mapped in the VM's kernel
    /// region.
    pub(crate) mem: BoRef<B>,
    pub(crate) mem_va: u64,
    /// MCU address of the group's suspend buffer (0: none; the group is then never
    /// suspended, only evicted when idle).
    pub(crate) suspend_va: u64,
    /// Interface-word slots of the queues.
    pub(crate) iface_slots: env::Vec<usize, B::Alloc>,
    /// Held while the group is torn down, so that a second teardown waits for the first.
    pub(crate) teardown: LockOf<B, ()>,
}

impl<B: Backend> Group<B> {
    /// MCU address of the group's suspend buffer (0: none).
    pub fn suspend_va(&self) -> u64 {
        self.suspend_va
    }

    /// `DRM_PANTHOR_GROUP_STATE_*` and the fatal-queue mask.
    pub fn get_state(&self) -> (u32, u32) {
        (
            self.state.state.load(Ordering::Acquire),
            self.state.fatal_queues.load(Ordering::Acquire),
        )
    }
}

/// Bytes of group memory for queues of the given ring sizes: the rings, then a page of sync
/// objects.
pub fn group_mem_size(rings: impl IntoIterator<Item = u32>) -> u64 {
    rings.into_iter().map(u64::from).sum::<u64>() + crate::backend::PAGE_SIZE
}

/// Most suspend buffers a device hands out: one per queue interface, as every group has at
/// least one queue, so there is a place for every group the device can hold, and a client holds
/// at most as many as its share of the queue interfaces
/// ([`crate::file::MAX_QUEUES_PER_FILE`]).
pub const MAX_SUSPEND_BUFS: usize = MAX_QUEUES;

/// Most [`KERNEL_CHUNK`](crate::vm::KERNEL_CHUNK)s of the MCU's address space the suspend
/// buffers take (8 MiB of its 256 MiB kernel region; 1,024 places of the simulated firmware's
/// 8 KiB, more than [`MAX_SUSPEND_BUFS`]).
const SUSPEND_CHUNKS: usize = 8;

/// The groups' suspend buffers (panthor gives each group one in the firmware's VM too): blocks
/// of DMA memory mapped in the MCU VM's kernel region, cut into equal places, one per group:
/// the first block (one [`KERNEL_CHUNK`]) made at probe, the next ones when a group is created
/// and every place of the blocks made so far is taken.
///
/// A block stays mapped until the device goes, so that handing a place out or back touches no
/// page table and no MMU: it cannot fail or wait on a powered-down GPU, and a group's teardown
/// cannot be stopped by the MMU. The window grows only while the device has fewer places than
/// it can have groups, to at most [`SUSPEND_CHUNKS`] blocks.
///
/// # Invariants
///
/// - `chunks[..made]` are mapped at `base[c]` in the MCU VM for `per_chunk * size` bytes, at
///   addresses of its kernel region never mapped before (so mapping them needed no TLB
///   maintenance); `chunks[made..]` are `None`.
/// - A set bit `i` of `used` stands for the place `i % per_chunk` of block `i / per_chunk`,
///   held by exactly one live group; `i < capacity()`.
///
/// [`KERNEL_CHUNK`]: crate::vm::KERNEL_CHUNK
pub(crate) struct SuspendWindow<D: DmaMemory> {
    dma: D,
    /// Bytes per place: the firmware's `SUSPEND_SIZE` in whole pages (0: the firmware wants no
    /// suspend buffer, or one larger than a kernel chunk; groups then get none and are never
    /// suspended).
    size: u64,
    /// Places per block.
    per_chunk: usize,
    /// The blocks made so far, with their MCU addresses.
    chunks: [Option<DmaRegion>; SUSPEND_CHUNKS],
    base: [u64; SUSPEND_CHUNKS],
    made: usize,
    /// Places in use.
    used: [u64; MAX_SUSPEND_BUFS.div_ceil(64)],
}

impl<D: DmaMemory + Clone> SuspendWindow<D> {
    /// The window of a device whose firmware interface is at `fw_base`, with its first block
    /// made if there is memory for it (the next group to be created tries again otherwise).
    fn new<B: Backend<Dma = D>>(b: &B, fw_base: u64, mcu_vm: &LockOf<B, McuVm<B>>) -> Self {
        let ctrl = fw_base + crate::fw::CSF_GROUP_CONTROL_OFFSET + csg::SUSPEND_SIZE;
        let size = u64::from(Words(b.dma()).rd32(ctrl)).next_multiple_of(PAGE_SIZE);
        let size = if size > crate::vm::KERNEL_CHUNK {
            0
        } else {
            size
        };
        let mut w = SuspendWindow {
            dma: b.dma().clone(),
            size,
            per_chunk: crate::vm::KERNEL_CHUNK.checked_div(size).unwrap_or(0) as usize,
            chunks: [const { None }; SUSPEND_CHUNKS],
            base: [0; SUSPEND_CHUNKS],
            made: 0,
            used: [0; MAX_SUSPEND_BUFS.div_ceil(64)],
        };
        if w.size != 0 {
            let _ = w.grow::<B>(mcu_vm);
        }
        w
    }

    /// Places the window can ever have.
    fn capacity(&self) -> usize {
        (self.per_chunk * SUSPEND_CHUNKS).min(MAX_SUSPEND_BUFS)
    }

    /// Takes a place: its MCU address; 0 if the firmware wants no suspend buffer.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if every place is taken and no block can be added (the window is
    /// at its size, or there is no memory or MCU address space for another block). Nothing
    /// changes then.
    fn take<B: Backend<Dma = D>>(&mut self, mcu_vm: &LockOf<B, McuVm<B>>) -> Result<u64> {
        if self.size == 0 {
            return Ok(0);
        }
        let cap = self.capacity();
        let made = (self.made * self.per_chunk).min(cap);
        let free = (0..made).find(|&i| self.used[i / 64] & (1 << (i % 64)) == 0);
        let i = match free {
            Some(i) => i,
            None if made < cap => {
                self.grow::<B>(mcu_vm)?;
                made
            }
            None => return Err(Error::NoMemory),
        };
        self.used[i / 64] |= 1 << (i % 64);
        Ok(self.base[i / self.per_chunk] + (i % self.per_chunk) as u64 * self.size)
    }

    /// Makes the next block and maps it for the MCU.
    fn grow<B: Backend<Dma = D>>(&mut self, mcu_vm: &LockOf<B, McuVm<B>>) -> Result<()> {
        let bytes = self.size * self.per_chunk as u64;
        let region = self
            .dma
            .alloc((bytes / PAGE_SIZE) as usize, PAGE_SIZE)
            .map_err(|_| Error::NoMemory)?;
        let mut vm = mcu_vm.guard();
        let mapped = vm.alloc_kernel_va().and_then(|va| {
            // A range of the kernel region never mapped before (the window's blocks are the
            // only mappings made there after probe, and they stay): no TLB entry of AS 0 can
            // describe it, so no flush, and no MMU command on a GPU that may be powered down.
            // (`NoMmu` cannot fail to unlock: an error maps nothing.)
            match vm.map_kernel(va, region.addr, bytes, &mut crate::vm::NoMmu) {
                Ok(()) => Ok(va),
                Err(e) => {
                    vm.free_kernel_va(va);
                    Err(e.error())
                }
            }
        });
        drop(vm);
        match mapped {
            Ok(va) => {
                self.chunks[self.made] = Some(region);
                self.base[self.made] = va;
                self.made += 1;
                Ok(())
            }
            Err(_) => {
                // SAFETY: the block was just allocated and the mapping failed (and was
                // undone): nothing reaches it.
                unsafe { self.dma.free(region) };
                Err(Error::NoMemory)
            }
        }
    }
}

impl<D: DmaMemory> SuspendWindow<D> {
    /// Gives a place back (0 and foreign addresses are ignored).
    fn put(&mut self, va: u64) {
        if va == 0 || self.size == 0 {
            return;
        }
        for c in 0..self.made {
            let Some(off) = va.checked_sub(self.base[c]) else {
                continue;
            };
            let j = (off / self.size) as usize;
            if off % self.size == 0 && j < self.per_chunk {
                let i = c * self.per_chunk + j;
                self.used[i / 64] &= !(1 << (i % 64));
                return;
            }
        }
    }

    /// Places in use.
    pub(crate) fn in_use(&self) -> usize {
        self.used.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Blocks made so far.
    pub(crate) fn blocks(&self) -> usize {
        self.made
    }
}

impl<D: DmaMemory> Drop for SuspendWindow<D> {
    fn drop(&mut self) {
        for region in self.chunks.iter_mut().filter_map(Option::take) {
            // SAFETY: the window goes with the device state, after `TyrData::drop` stopped the
            // MCU and disabled its address space: nothing reaches the block any more.
            unsafe { self.dma.free(region) };
        }
    }
}

/// The device's scheduler state.
pub struct Sched<B: Backend> {
    /// Shared with the rings.
    pub shared: SchedShared,
    /// Every live group by key.
    pub groups: LockOf<B, GroupMap<B>>,
    /// Groups registered in `groups` (or being registered): the ordering scratch has room
    /// for at least this many.
    registered: AtomicUsize,
    /// The scheduler's candidates in the order they deserve a slot, rebuilt by every
    /// scheduling pass (only the work item uses it) in memory reserved at group creation.
    order: LockOf<B, env::Vec<GroupRef<B>, B::Alloc>>,
    /// The group in each group slot.
    pub slots: LockOf<B, env::Vec<Option<u64>, B::Alloc>>,
    /// Free interface-word slots.
    iface_free: LockOf<B, env::Vec<bool, B::Alloc>>,
    /// The bind queue of each VM (by key) that has had an asynchronous bind.
    pub(crate) binds: BindQueues<B, DevInner<B>>,
    /// The device could not be brought back after a reset.
    pub broken: AtomicBool,
    /// Scheduler ticks done (a rotation of the resident groups each).
    pub ticks: AtomicU64,
    /// When (ns) the next tick is due ([`NOT_RUNNING`]: none is).
    next_tick: AtomicU64,
    /// Groups suspended so far (statistics for tests).
    pub suspends: AtomicU64,
    /// Groups a system suspend saved through the firmware so far (a subset of `suspends`,
    /// counted only by the system suspend, so that a test can tell its saves from the
    /// time-slicing going on around it).
    pub sleep_saves: AtomicU64,
    /// Groups resumed so far, and how many of them on another slot than they left.
    pub resumes: AtomicU64,
    /// See [`Sched::resumes`].
    pub moves: AtomicU64,
    /// Where a system suspend stands (`SLEEP_*`).
    sleep: AtomicU32,
    /// The errno of a system suspend that failed on the work item.
    sleep_err: core::sync::atomic::AtomicI32,
}

/// No system suspend under way.
const SLEEP_NONE: u32 = 0;
/// `suspend` claimed the device and holds jobs back; the work item must not start yet.
const SLEEP_PREPARING: u32 = 1;
/// The work item is asked to suspend.
const SLEEP_ASKED: u32 = 2;
/// The work item is suspending.
const SLEEP_RUNNING: u32 = 3;
/// The device is suspended.
const SLEEP_DONE: u32 = 4;
/// The work item's suspend failed (`sleep_err`).
const SLEEP_FAILED: u32 = 5;

/// The device's groups by key.
pub type GroupMap<B> = env::IdMap<GroupRef<B>, <B as Backend>::Alloc, u64>;

impl<B: Backend> Sched<B> {
    /// Scheduler state for `slots` group slots.
    pub fn new(slots: usize) -> Result<Self> {
        let mut slot_groups = env::Vec::new();
        slot_groups.try_resize(slots, None)?;
        let mut iface_free = env::Vec::new();
        iface_free.try_resize(MAX_QUEUES, true)?;
        Ok(Sched {
            shared: SchedShared {
                reset_needed: AtomicBool::new(false),
                resets: AtomicU32::new(0),
                profile: SubmitProfile::default(),
            },
            groups: Lock::new(env::IdMap::new(), crate::lock_class!(c"tyr_groups"))?,
            registered: AtomicUsize::new(0),
            order: Lock::new(env::Vec::new(), crate::lock_class!(c"tyr_sched_order"))?,
            slots: Lock::new(slot_groups, crate::lock_class!(c"tyr_group_slots"))?,
            iface_free: Lock::new(iface_free, crate::lock_class!(c"tyr_iface_free"))?,
            binds: BindQueues::new()?,
            broken: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            next_tick: AtomicU64::new(NOT_RUNNING),
            suspends: AtomicU64::new(0),
            sleep_saves: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            sleep: AtomicU32::new(SLEEP_NONE),
            sleep_err: core::sync::atomic::AtomicI32::new(0),
        })
    }

    /// Takes `n` interface-word slots; [`Error::NoSpace`] if there are not enough.
    pub(crate) fn alloc_iface(&self, n: usize) -> Result<env::Vec<usize, B::Alloc>> {
        let mut picked = env::Vec::try_with_capacity(n)?;
        let mut free = self.iface_free.guard();
        for i in free
            .iter()
            .enumerate()
            .filter(|(_, f)| **f)
            .map(|(i, _)| i)
            .take(n)
        {
            // Room for `n` was made above.
            let _ = picked.push_within_capacity(i);
        }
        if picked.len() < n {
            return Err(Error::NoSpace);
        }
        for i in &picked {
            free[*i] = false;
        }
        Ok(picked)
    }

    /// Returns interface-word slots.
    pub(crate) fn free_iface(&self, slots: &[usize]) {
        let mut free = self.iface_free.guard();
        for i in slots {
            if let Some(f) = free.get_mut(*i) {
                *f = true;
            }
        }
    }

    /// The live groups, one at a time by key, the table's lock let go between them (so the
    /// caller may lock anything, the table included); allocates nothing. A group created
    /// during the walk may or may not be seen, one destroyed is not seen after it went.
    pub fn live_groups(&self) -> impl Iterator<Item = GroupRef<B>> + '_ {
        let mut at = None;
        core::iter::from_fn(move || {
            let (key, g) = self
                .groups
                .guard()
                .next_after(at)
                .map(|(k, g)| (k, g.clone()))?;
            at = Some(key);
            Some(g)
        })
    }

    /// Number of live groups.
    pub fn group_count(&self) -> usize {
        self.groups.guard().len()
    }

    /// Groups registered or being registered (the ordering scratch has room for as many).
    pub fn registered_groups(&self) -> usize {
        self.registered.load(Ordering::Acquire)
    }

    /// Registers group `g` under its key, with room for it in the scheduler's ordering
    /// scratch first, so that a tick never allocates; [`Error::NoMemory`] (nothing
    /// registered) if either cannot grow.
    pub(crate) fn insert_group(&self, g: GroupRef<B>) -> Result {
        let n = self.registered.fetch_add(1, Ordering::AcqRel) + 1;
        let room = {
            let mut order = self.order.guard();
            let len = order.len();
            order.try_reserve(n.saturating_sub(len))
        };
        let inserted = room.and_then(|()| self.groups.guard().try_insert(g.key, g).map(drop));
        if inserted.is_err() {
            self.registered.fetch_sub(1, Ordering::AcqRel);
        }
        inserted
    }

    /// Unregisters group `key`.
    pub(crate) fn remove_group(&self, key: u64) {
        if self.groups.guard().remove(key).is_some() {
            self.registered.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Number of queue-interface slots in use (by live groups).
    pub fn ifaces_in_use(&self) -> usize {
        self.iface_free.guard().iter().filter(|f| !**f).count()
    }

    /// Number of bind queues (one per VM that has had an asynchronous bind and still exists).
    pub fn bind_queue_count(&self) -> usize {
        self.binds.len()
    }
}

/// Interrupt masks the driver runs with: every job interrupt, MMU page faults.
pub(crate) fn enable_irqs<B: Backend>(b: &B) {
    b.io().write_reg(GPU_IRQ_MASK::from(gpu::GPU_IRQS));
    b.io().write_reg(JOB_IRQ_MASK::from(u32::MAX));
    b.io().write_reg(MMU_IRQ_MASK::from(0xffff_u32));
}

// ---------------------------------------------------------------- the device state

/// Per-device data: the device state, shared with the environment's event thread (which holds
/// it weakly).
pub struct TyrData<B: Backend> {
    inner: SharedDev<B>,
}

/// The device state as the device, its rings and bind queues and the event source share it.
pub type SharedDev<B> = env::Arc<DevInner<B>, <B as Backend>::Alloc>;

/// A group as the device's and the file's tables share it.
pub type GroupRef<B> = env::Arc<Group<B>, <B as Backend>::Alloc>;

impl<B: Backend> core::ops::Deref for TyrData<B> {
    type Target = DevInner<B>;

    fn deref(&self) -> &DevInner<B> {
        &self.inner
    }
}

impl<B: Backend> TyrData<B> {
    /// The handle of a device state.
    pub(crate) fn new(inner: DevInner<B>) -> Result<Self> {
        Ok(TyrData {
            inner: env::Arc::try_new(inner)?,
        })
    }

    /// The shared device state.
    pub fn shared(&self) -> &SharedDev<B> {
        &self.inner
    }
}

/// The device state.
pub struct DevInner<B: Backend> {
    /// The environment.
    pub backend: B,
    /// What the probe found.
    pub gpu_info: gpu::GpuInfo,
    /// Command-stream interface information, as the firmware published it.
    pub csif_info: uapi::CsifInfo,
    /// Objects created before registration (the firmware interface region).
    pub fw_objects: env::Vec<ARef<gem::Object<TyrBo<B>, AnyCtx>>, B::Alloc>,
    /// The MCU's VM (address space 0), mapping the firmware's sections.
    pub mcu_vm: LockOf<B, McuVm<B>>,
    /// The firmware image and its sections (reloaded before cold boots).
    pub firmware: crate::fw::Firmware<B>,
    pub(crate) slots: LockOf<B, AsSlots>,
    next_key: AtomicU64,
    /// Where the firmware's interface blocks are.
    pub fw: FwIface<B::Alloc>,
    /// Groups, group slots and recovery state.
    pub sched: Sched<B>,
    /// Every VM of the device's files by key, with whether it is a "zombie": destroyed while a
    /// running group still pins its address space (released at unpin). An entry is made when
    /// the VM is (fallibly), so that marking it a zombie at destruction cannot fail.
    pub(crate) vm_zombie: LockOf<B, env::IdMap<bool, B::Alloc, u64>>,
    /// The tiler heap pools of every VM.
    pub heaps: HeapPools<B>,
    /// Power state: idle power-down and wake (see `crate::pm`).
    pub pm: crate::pm::Pm<B::Locks>,
    /// Where groups' suspend buffers are mapped for the MCU.
    pub(crate) suspend_window: LockOf<B, SuspendWindow<B::Dma>>,
    /// Held while a request word of the firmware's interface is read, changed and written back
    /// ([`update_word`](Self::update_word)), so that updates from the interrupt handler, the work
    /// item and `GROUP_DESTROY` do not undo one another (panthor's interface locks in
    /// `panthor_fw_update_reqs`/`panthor_fw_toggle_reqs`). A leaf: nothing is taken under it.
    fw_req: LockOf<B, ()>,
    /// The hardware was stopped for good ([`quiesce`](Self::quiesce)): nothing touches it
    /// any more.
    quiesced: AtomicBool,
}

impl<B: Backend> DevInner<B> {
    /// The state of a device the probe found (`gpu_info`) whose firmware published
    /// `csif_info` and its interface blocks `fw`, with the objects created before registration
    /// and the MCU's VM (address space 0, reserved).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        backend: B,
        gpu_info: gpu::GpuInfo,
        csif_info: uapi::CsifInfo,
        fw_objects: env::Vec<ARef<gem::Object<TyrBo<B>, AnyCtx>>, B::Alloc>,
        mcu_vm: McuVm<B>,
        fw: FwIface<B::Alloc>,
        pm: crate::pm::Pm<B::Locks>,
        firmware: crate::fw::Firmware<B>,
    ) -> Result<Self> {
        let mcu_vm = Lock::new(mcu_vm, crate::lock_class!(c"tyr_mcu_vm"))?;
        let window = SuspendWindow::new(&backend, fw.base, &mcu_vm);
        Ok(DevInner {
            suspend_window: Lock::new(window, crate::lock_class!(c"tyr_suspend_window"))?,
            fw_req: Lock::new((), crate::lock_class!(c"tyr_fw_req"))?,
            slots: Lock::new(
                AsSlots::with_reserved(gpu_info.num_as(), 1),
                crate::lock_class!(c"tyr_as_slots"),
            )?,
            sched: Sched::new(csif_info.csg_slot_count as usize)?,
            fw,
            vm_zombie: Lock::new(env::IdMap::new(), crate::lock_class!(c"tyr_vm_states"))?,
            heaps: HeapPools::new()?,
            gpu_info,
            csif_info,
            fw_objects,
            mcu_vm,
            firmware,
            next_key: AtomicU64::new(2),
            pm,
            backend,
            quiesced: AtomicBool::new(false),
        })
    }
}

impl<B: Backend> Drop for TyrData<B> {
    fn drop(&mut self) {
        // A device that was never unplugged (it was never registered, or its data goes first)
        // stops its hardware now; after an unplug this does nothing.
        self.inner.quiesce();
    }
}

impl<B: Backend> DevInner<B> {
    /// Stops the hardware for good, as a driver's remove does after `drm_dev_unplug`: no more
    /// interrupts or deferred work; bind jobs and every group's jobs still pending cancelled
    /// (their fences signal with `ECANCELED`) and the groups torn down; every address space
    /// disabled and forgotten, so that the VMs' own teardown, when their files close, finds
    /// none to disable; the MCU disabled and its address space off. Runs once: at unplug
    /// ([`drm::Driver::unplugged`](drm_ctx::drm::Driver::unplugged)) or, for a device never
    /// unplugged, when the driver data goes. Afterwards nothing touches the registers (a bus
    /// driver's MMIO mapping is gone once the device is unbound); files, VMs, BOs and their
    /// memory stay until their last reference goes.
    pub fn quiesce(&self) {
        if self.quiesced.swap(true, Ordering::AcqRel) {
            return;
        }
        self.backend.stop_events();
        self.sched.binds.remove_all();
        for g in self.sched.live_groups() {
            g.state.dead.store(true, Ordering::Release);
            self.teardown_group(&g, jobqueue::FenceError::CANCELED);
        }
        if self
            .sched
            .live_groups()
            .any(|g| g.state.mem_held.load(Ordering::Acquire))
        {
            // The firmware did not let go of some groups: a disabled MCU runs none of them,
            // and their memory can go.
            self.backend
                .io()
                .write_reg(MCU_CONTROL::zeroed().with_const_request::<{ mcu::DISABLED }>());
            self.free_held_groups();
        }
        self.sched.groups.guard().clear();
        {
            let mut slots = self.slots.guard();
            for slot in 0..crate::regs::MAX_AS {
                if slots.vm_in(slot).is_some() {
                    // A failure leaves the address space faulting, which is as good as off.
                    let _ = mmu::disable(&self.backend, slot, false);
                }
            }
            slots.clear();
        }
        // Stop the MCU and unmap its address space before its page tables are freed.
        self.backend
            .io()
            .write_reg(MCU_CONTROL::zeroed().with_const_request::<{ mcu::DISABLED }>());
        let _ = mmu::disable(&self.backend, mmu::MCU_AS, false);
    }

    /// Whether [`quiesce`](Self::quiesce) has stopped the hardware.
    pub fn is_quiesced(&self) -> bool {
        self.quiesced.load(Ordering::Acquire)
    }

    /// Number of VMs the device knows of (live in a file, or zombies): each has the entry made
    /// with it, so this counts what VM creation and destruction leave behind.
    pub fn vm_count(&self) -> usize {
        self.vm_zombie.guard().len()
    }

    /// Forgets VM `key` if it is a zombie; whether it was.
    fn take_zombie(&self, key: u64) -> bool {
        let mut vms = self.vm_zombie.guard();
        let zombie = vms.get(key).copied().unwrap_or(false);
        if zombie {
            vms.remove(key);
        }
        zombie
    }

    /// Number of VMs destroyed while a group of theirs held a slot, whose address space is
    /// still to be released.
    pub fn zombie_vm_count(&self) -> usize {
        self.vm_zombie.guard().values().filter(|z| **z).count()
    }
}

impl<B: Backend> DevInner<B> {
    /// Gives `vm` an address space; see `file::vm_activate`.
    pub(crate) fn activate(&self, vm: &TyrVm<B>) -> Result<usize> {
        let mut slots = self.slots.guard();
        if slots.count() == 0 {
            return Err(Error::NoDevice);
        }
        let had = slots.slot_of(vm.key());
        let (slot, evicted) = slots.try_acquire(vm.key()).ok_or(Error::Busy)?;
        if had.is_none() {
            // The VM losing the slot may still have data in the GPU caches.
            let flushed = match evicted {
                Some(_) => mmu::flush_caches(&self.backend),
                None => Ok(()),
            };
            let regs = vm.as_regs()?;
            if let Err(e) = flushed.and_then(|()| mmu::enable(&self.backend, slot, &regs)) {
                slots.release(vm.key());
                return Err(e);
            }
        }
        Ok(slot)
    }
}

impl<B: Backend> DevInner<B> {
    pub(crate) fn key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }
}

impl<B: Backend> BindDevice<B> for DevInner<B> {
    fn backend(&self) -> &B {
        &self.backend
    }

    fn as_slots(&self) -> &LockOf<B, AsSlots> {
        &self.slots
    }
}

// ---------------------------------------------------------------- groups on the device

impl<B: Backend> DevInner<B> {
    /// Unmaps group memory `mem` from the kernel region of `vm` at `va` and gives its VA back.
    /// Should the MMU not confirm the unmap, the GPU may still reach the memory: the object is
    /// then kept (a reference that is never dropped, counted by [`crate::vm::keep_pages`]) and
    /// the VA stays taken, so that dropping the caller's reference frees nothing.
    pub(crate) fn unmap_group_mem(&self, vm: &LockOf<B, TyrVm<B>>, va: u64, mem: &BoRef<B>) {
        let size = mem.0.size() as u64;
        let mut vmg = vm.guard();
        let slots = self.slots.guard();
        let mut upd = AsUpdate {
            backend: &self.backend,
            slot: slots.slot_of(vmg.key()),
        };
        let unmapped = vmg.unmap_kernel(va, size, &mut upd);
        drop(slots);
        if unmapped.is_err() {
            crate::vm::keep_pages(size);
            core::mem::forget(mem.0.clone());
            return;
        }
        vmg.free_kernel_va(va);
    }

    /// A suspend buffer for a new group: its MCU address (0 if the firmware wants none: its
    /// groups are then never suspended, only evicted when idle).
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if none is left and the window cannot grow.
    pub(crate) fn take_suspend_buf(&self) -> Result<u64> {
        self.suspend_window.guard().take::<B>(&self.mcu_vm)
    }

    /// Gives back a suspend buffer of [`take_suspend_buf`](Self::take_suspend_buf) that no
    /// slot uses.
    pub(crate) fn put_suspend_buf(&self, va: u64) {
        self.suspend_window.guard().put(va);
    }

    /// Blocks of suspend buffers mapped for the MCU so far.
    pub fn suspend_blocks(&self) -> usize {
        self.suspend_window.guard().blocks()
    }

    /// Suspend buffers handed out to live groups.
    pub fn suspend_bufs_in_use(&self) -> usize {
        self.suspend_window.guard().in_use()
    }

    /// Stops a dead group for good: fails what is on its rings, cancels what is queued, takes
    /// its slot away and frees its memory. Idempotent.
    ///
    /// The memory goes only once the firmware has acknowledged the group's termination: until
    /// then its streams may still run, reading the rings and writing the interface words and
    /// the suspend buffer. If the acknowledgement does not come (see
    /// [`unbind_group`](Self::unbind_group)), the group keeps its memory
    /// ([`GroupState::mem_held`]) until the GPU reset that follows, or the device's
    /// [`quiesce`](Self::quiesce), has stopped the firmware.
    pub(crate) fn teardown_group(&self, g: &Group<B>, first: FenceError) {
        // A concurrent teardown (work item and GROUP_DESTROY) finishes before this returns.
        let _serial = g.teardown.guard();
        if g.state.torn_down.swap(true, Ordering::AcqRel) {
            return;
        }
        let terminated = self.unbind_group(g);
        let fatal = g.state.fatal_queues.load(Ordering::Acquire);
        for (i, q) in g.queues.iter().enumerate() {
            let mut jq = q.jq.guard();
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
        if terminated.is_err() {
            g.state.mem_held.store(true, Ordering::Release);
            return;
        }
        self.free_group_mem(g);
    }

    /// Gives back what a torn-down group holds (suspend buffer, group memory, interface words,
    /// its place among the device's groups), once the firmware no longer runs it.
    fn free_group_mem(&self, g: &Group<B>) {
        // The group holds no slot: the firmware no longer writes its suspend buffer.
        self.put_suspend_buf(g.suspend_va);
        self.unmap_group_mem(&g.vm, g.mem_va, &g.mem);
        self.sched.free_iface(&g.iface_slots);
        // The last group of a VM its file already destroyed: its address space goes too.
        if env::Arc::strong_count(&g.vm) == 1 {
            self.vm_zombie.guard().remove(g.vm_key);
            self.release_unpinned_as(&mut self.slots.guard(), g.vm_key);
        }
        self.sched.remove_group(g.key);
    }

    /// Frees the memory of the groups torn down while the firmware did not acknowledge their
    /// termination ([`GroupState::mem_held`]), once the firmware is stopped (reset or
    /// disabled).
    fn free_held_groups(&self) {
        for g in self.sched.live_groups() {
            if g.state.mem_held.swap(false, Ordering::AcqRel) {
                self.free_group_mem(&g);
            }
        }
    }

    /// Destroys a group (`GROUP_DESTROY`, file close).
    pub(crate) fn destroy_group(&self, g: &Group<B>) {
        g.state.dead.store(true, Ordering::Release);
        self.teardown_group(g, FenceError::CANCELED);
    }
}

// ---------------------------------------------------------------- interrupts and work

impl<B: Backend> Events for DevInner<B> {
    fn irq(&self) {
        let io = self.backend.io();
        let gpu = io.read(GPU_IRQ_STATUS).into_raw();
        if gpu != 0 {
            gpu::take_command_acks(&self.backend, gpu);
            if gpu & (gpu::GPU_IRQS & !gpu::GPU_COMMAND_ACKS) != 0 {
                let status = io.read(GPU_FAULTSTATUS).into_raw();
                let address = io.read(GPU_FAULTADDRESS).into_raw();
                dev_err!(
                    &self.backend,
                    "GPU fault {status:#010x} at {address:#018x} (GPU_IRQ {gpu:#x})"
                );
            }
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
        for g in self.sched.live_groups() {
            self.answer_tiler_oom(&g);
        }
        for g in self.sched.live_groups() {
            for q in &g.queues {
                q.jq.guard().run();
            }
        }
        for g in self.sched.live_groups() {
            if g.state.dead.load(Ordering::Acquire) {
                self.teardown_group(&g, FenceError::CANCELED);
            }
        }
        if self.sched.shared.reset_needed.swap(false, Ordering::AcqRel) {
            self.reset();
        }
        self.sleep_if_asked();
        self.schedule();
        self.pm_tick();
    }

    fn bind_work(&self, vm: u64) {
        self.sched.binds.run(vm);
    }
}

impl<B: Backend> DevInner<B> {
    fn fw_words(&self) -> Words<'_, B::Dma> {
        Words(self.backend.dma())
    }

    /// Replaces the interface word at DMA address `addr` (a request word the driver shares
    /// with other contexts) with `f` of its value, whole: under [`DevInner::fw_req`].
    fn update_word(&self, addr: u64, f: impl FnOnce(u32) -> u32) {
        let _whole = self.fw_req.guard();
        let w = self.fw_words();
        w.wr32(addr, f(w.rd32(addr)));
    }

    /// The group in slot `n`.
    fn group_in(&self, n: usize) -> Option<GroupRef<B>> {
        let key = (*self.sched.slots.guard().get(n)?)?;
        self.sched.groups.guard().get(key).cloned()
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
            self.update_word(base + cin + csg::REQ, |r| r ^ events);
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
            // Answered (and acknowledged) by the work item, which may allocate.
            if (sreq ^ sack) & cs::TILER_OOM != 0 {
                if let Some(g) = &group {
                    g.state.tiler_oom.fetch_or(1 << s, Ordering::AcqRel);
                }
            }
            let ev = (sreq ^ sack) & (cs::FAULT_EVENT | cs::FATAL_EVENT);
            if ev == 0 {
                continue;
            }
            self.update_word(base + sin + cs::REQ, |r| r ^ ev);
            let (code, info) = if ev & cs::FAULT_EVENT != 0 {
                (
                    w.rd32(base + sout + cs::FAULT) & 0xff,
                    w.rd64(base + sout + cs::FAULT_INFO),
                )
            } else {
                (
                    w.rd32(base + sout + cs::FATAL) & 0xff,
                    w.rd64(base + sout + cs::FATAL_INFO),
                )
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

    /// Answers the `TILER_OOM` events of `g`'s streams (panthor's `group_process_tiler_oom`):
    /// grows the heap the stream names and hands it the new chunk, or 0 if the heap may not
    /// grow, then acknowledges the event and rings the stream's doorbell. The chunk's memory
    /// comes from the backend's DMA allocation, which fails rather than waits (see
    /// [`crate::heap`]). A group that lost its slot meanwhile has nothing to answer: its streams
    /// were stopped with it.
    fn answer_tiler_oom(&self, g: &Group<B>) {
        if g.state.tiler_oom.load(Ordering::Acquire) == 0 {
            return;
        }
        // Binding and unbinding take this too: the slot stays the group's while we answer.
        let _serial = g.teardown.guard();
        let pending = g.state.tiler_oom.swap(0, Ordering::AcqRel);
        let n = g.state.slot.load(Ordering::Acquire);
        let (Some(&(cin, cout)), Some(streams)) = (self.fw.csg.get(n), self.fw.cs.get(n)) else {
            return;
        };
        let w = self.fw_words();
        let base = self.fw.base;
        let mut answered = 0u32;
        for (s, &(sin, sout)) in streams.iter().enumerate() {
            let sreq = w.rd32(base + sin + cs::REQ);
            let sack = w.rd32(base + sout + cs::REQ);
            if pending & (1 << s) == 0 || (sreq ^ sack) & cs::TILER_OOM == 0 {
                continue;
            }
            let ctx = w.rd64(base + sout + cs::HEAP_ADDRESS);
            let vt_start = w.rd32(base + sout + cs::HEAP_VT_START);
            let vt_end = w.rd32(base + sout + cs::HEAP_VT_END);
            let frag_end = w.rd32(base + sout + cs::HEAP_FRAG_END);
            let grown = if frag_end > vt_end || vt_end >= vt_start {
                Err(Error::Invalid)
            } else {
                let in_flight = vt_start - frag_end;
                (self.heaps).grow(&self.backend, &self.slots, g.vm_key, ctx, in_flight)
            };
            let link = match grown {
                Ok(link) => link,
                // No memory for the heap: the firmware fails the job with OUT_OF_MEMORY.
                Err(Error::NoMemory) => 0,
                Err(e) => {
                    dev_err!(
                        &self.backend,
                        "CSG slot {n} CS {s}: cannot grow the tiler heap at {ctx:#x}: {e}"
                    );
                    g.state.fatal_queues.fetch_or(1 << s, Ordering::AcqRel);
                    g.state
                        .state
                        .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, Ordering::AcqRel);
                    g.state.dead.store(true, Ordering::Release);
                    continue;
                }
            };
            w.wr64(base + sin + cs::HEAP_START, link);
            w.wr64(base + sin + cs::HEAP_END, link);
            self.update_word(base + sin + cs::REQ, |r| {
                (r & !cs::TILER_OOM) | (sack & cs::TILER_OOM)
            });
            answered |= 1 << s;
        }
        if answered != 0 {
            // The streams' doorbell bits end up opposite to their acknowledgements.
            let db_ack = w.rd32(base + cout + csg::DOORBELL_ACK);
            self.update_word(base + cin + csg::DOORBELL_REQ, |db| {
                (db & !answered) | (!db_ack & answered)
            });
            self.glb_doorbell(1 << n);
        }
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
            let Some(key) = self.slots.guard().vm_in(a) else {
                continue;
            };
            // The table's lock is not held while a group's locks are taken.
            for g in self.sched.live_groups() {
                if g.vm_key == key {
                    g.vm.guard().set_unusable();
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
        // The table's lock is not held while a queue's lock is taken (lockdep: the queue lock
        // is taken before the power gate, which is held when the table is looked at).
        for g in self.sched.live_groups() {
            if g.state.slot.load(Ordering::Acquire) == NO_SLOT {
                continue;
            }
            for q in &g.queues {
                let done = q.jq.guard().backend_mut().complete(dma);
                if done.jobs > 0 {
                    let now = now_ns(&self.backend);
                    let gpu = now.wrapping_mul(done.jobs).wrapping_sub(done.rung_sum);
                    self.sched.shared.profile.add_done(done.jobs, gpu);
                }
            }
        }
    }

    fn glb_doorbell(&self, slot_bits: u32) {
        let base = self.fw.base;
        let (gin, _) = self.fw.glb;
        self.update_word(base + gin + glb::DOORBELL_REQ, |db| db ^ slot_bits);
        if let Some(r) = DOORBELL::try_at(0) {
            self.backend
                .io()
                .write(r, DOORBELL::zeroed().with_ring(true));
        }
    }

    /// Puts `g` into group slot `n`: address space, stream configuration, start.
    fn bind_group(&self, n: usize, g: &Group<B>) -> Result {
        // A concurrent GROUP_DESTROY must see either no slot or the whole binding.
        let _serial = g.teardown.guard();
        if g.state.dead.load(Ordering::Acquire) || g.state.torn_down.load(Ordering::Acquire) {
            return Ok(());
        }
        let as_slot = {
            let vm = g.vm.guard();
            if vm.is_unusable() {
                return Err(Error::Invalid);
            }
            let s = self.activate(&vm)?;
            self.slots.guard().pin(g.vm_key);
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
            let jq = q.jq.guard();
            let r = jq.backend();
            let mcu = crate::fw::MCU_SHARED_REGION_START;
            w.wr64(base + sin + cs::RINGBUF_BASE, r.ring_va);
            w.wr32(base + sin + cs::RINGBUF_SIZE, r.ring_size as u32);
            w.wr64(base + sin + cs::RINGBUF_INPUT, mcu + r.iface);
            w.wr64(base + sin + cs::RINGBUF_OUTPUT, mcu + r.iface + 0x10);
            w.wr32(
                base + sin + cs::CONFIG,
                u32::from(q.priority) | (1 + n as u32) << cs::CONFIG_DOORBELL_SHIFT,
            );
            w.wr32(base + sin + cs::ACK_IRQ_MASK, 0);
            self.update_word(base + sin + cs::REQ, |req| {
                (req & !cs::STATE_MASK) | cs::STATE_START
            });
            streams |= 1 << s;
        }
        w.wr32(base + cin + csg::CONFIG, as_slot as u32);
        w.wr32(base + cin + csg::ACK_IRQ_MASK, csg::SYNC_UPDATE | csg::IDLE);
        let prio = csg_priority(g.state.priority.load(Ordering::Acquire));
        w.wr32(
            base + cin + csg::ENDPOINT_REQ,
            prio << csg::EP_PRIORITY_SHIFT,
        );
        w.wr64(base + cin + csg::SUSPEND_BUF, g.suspend_va);
        // A group the firmware saved goes on from its suspend buffer, on whichever slot.
        let state = if g.state.suspended.swap(false, Ordering::AcqRel) {
            self.sched.resumes.fetch_add(1, Ordering::AcqRel);
            if g.state.suspended_from.load(Ordering::Acquire) != n {
                self.sched.moves.fetch_add(1, Ordering::AcqRel);
            }
            csg::STATE_RESUME
        } else {
            csg::STATE_START
        };
        // The state request, and a toggle of ENDPOINT_CONFIG for the new priority.
        self.update_word(base + cin + csg::REQ, |req| {
            ((req & !csg::STATE_MASK) | state) ^ csg::ENDPOINT_CONFIG
        });
        self.update_word(base + cin + csg::DOORBELL_REQ, |db| db ^ streams);
        g.state.slot.store(n, Ordering::Release);
        g.state
            .stamp
            .store(self.sched.ticks.load(Ordering::Acquire), Ordering::Release);
        g.state.start_timeout_clock(now_ns(&self.backend));
        self.sched.slots.guard()[n] = Some(g.key);
        self.glb_doorbell(1 << n);
        ring_doorbell(&self.backend, n);
        // The firmware takes the group before the slot counts as running (panthor waits for
        // its CSG updates too: the state and the priority). One that does not within
        // `SUSPEND_TIMEOUT` gets the GPU reset, which takes the slot back and restarts the
        // group from its first unfinished job.
        let what = if state == csg::STATE_RESUME {
            "resume"
        } else {
            "start"
        };
        self.wait_csg_acks(n, csg::STATE_MASK | csg::ENDPOINT_CONFIG, what)
    }

    /// Waits up to [`SUSPEND_TIMEOUT`] (panthor's 100 ms for CSG requests) for the firmware to
    /// acknowledge the requests `mask` of group slot `n`: the bits of its output `ACK` equal
    /// those of the input `REQ` (for the state field: the requested state is acknowledged).
    /// One that does not gets the GPU reset, which takes every slot back.
    ///
    /// The wait polls on the backend's clock ([`Backend::clock`]): on the simulated GPU its
    /// sleeps advance simulated time, so the firmware gets to the request meanwhile.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] if the acknowledgement did not come (the reset is asked for).
    fn wait_csg_acks(&self, n: usize, mask: u32, what: &str) -> Result {
        let (w, base) = (self.fw_words(), self.fw.base);
        let Some(&(cin, cout)) = self.fw.csg.get(n) else {
            return Err(Error::Invalid);
        };
        let acked = read_poll_timeout(
            self.backend.clock(),
            || {
                let (req, ack) = (
                    w.rd32(base + cin + csg::REQ),
                    w.rd32(base + cout + csg::REQ),
                );
                Ok::<_, Error>((req ^ ack) & mask)
            },
            |&pending| pending == 0,
            core::time::Duration::from_micros(10),
            SUSPEND_TIMEOUT,
        );
        if acked.is_err() {
            dev_err!(
                &self.backend,
                "CSG slot {n}: the firmware did not acknowledge a {what}; resetting the GPU"
            );
            self.request_reset();
            return Err(Error::TimedOut);
        }
        Ok(())
    }

    /// Asks the work item for a GPU reset and wakes it.
    fn request_reset(&self) {
        self.sched
            .shared
            .reset_needed
            .store(true, Ordering::Release);
        self.backend.executor().waker().wake_by_ref();
    }

    /// Takes `g`'s slot away (terminating its streams), if it has one, and waits for the
    /// firmware to acknowledge the termination (panthor's `CSG_STATE_TERMINATE` through
    /// `csgs_upd_ctx_apply_locked`): until then the group's streams may still run and the
    /// firmware may still write the group's memory. The slot is free once it has.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] if the firmware did not acknowledge within [`SUSPEND_TIMEOUT`]: the
    /// GPU reset is asked for, and the slot (with the address space the group pinned) stays
    /// taken until it comes.
    fn unbind_group(&self, g: &Group<B>) -> Result {
        let n = g.state.slot.swap(NO_SLOT, Ordering::AcqRel);
        if n == NO_SLOT {
            return Ok(());
        }
        g.state.stop_timeout_clock(now_ns(&self.backend));
        g.state.suspended.store(false, Ordering::Release);
        if let Some(&(cin, _)) = self.fw.csg.get(n) {
            let base = self.fw.base;
            self.update_word(base + cin + csg::REQ, |req| {
                (req & !csg::STATE_MASK) | csg::STATE_TERMINATE
            });
            // The streams stop with the group; their requests say so too.
            for &(sin, _) in &self.fw.cs[n] {
                self.update_word(base + sin + cs::REQ, |r| r & !cs::STATE_MASK);
            }
            self.glb_doorbell(1 << n);
            self.wait_csg_acks(n, csg::STATE_MASK, "termination")?;
        }
        self.release_slot(g, n);
        Ok(())
    }

    /// Frees group slot `n`, which `g` held, and `g`'s pin on its address space.
    fn release_slot(&self, g: &Group<B>, n: usize) {
        if let Some(s) = self.sched.slots.guard().get_mut(n) {
            *s = None;
        }
        let mut slots = self.slots.guard();
        slots.unpin(g.vm_key);
        // A VM destroyed while its group ran keeps its address space until now.
        if !slots.is_pinned(g.vm_key) && self.take_zombie(g.vm_key) {
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

    /// Suspends `g`, which holds slot `n` (panthor's `CSG_STATE_SUSPEND` on eviction): the
    /// firmware saves its streams into the group's suspend buffer and acknowledges; the group
    /// then waits for a slot, keeping its jobs and their fences. A firmware that does not
    /// acknowledge within [`SUSPEND_TIMEOUT`] gets the GPU reset.
    fn suspend_group(&self, n: usize, g: &Group<B>) -> Result {
        let _serial = g.teardown.guard();
        if g.state.slot.load(Ordering::Acquire) != n || g.state.torn_down.load(Ordering::Acquire) {
            return Ok(());
        }
        let (Some(&(cin, _)), Some(streams)) = (self.fw.csg.get(n), self.fw.cs.get(n)) else {
            return Err(Error::Invalid);
        };
        let w = self.fw_words();
        let base = self.fw.base;
        let dma = self.backend.dma();
        // Whether only something outside the group can make it go on: every queue is idle or
        // blocked on a sync wait, and one is blocked (panthor keeps timing such a queue).
        let mut blocked = false;
        let mut stuck = true;
        for (s, q) in g.queues.iter().enumerate() {
            let mut jq = q.jq.guard();
            jq.backend_mut().complete(dma);
            if jq.backend().is_idle() {
                continue;
            }
            // As panthor: blocked on a sync wait with no operation of its own still in flight
            // (deferred work would go on, and may be what releases the wait).
            let status = streams.get(s).map(|&(_, sout)| {
                let reason = w.rd32(base + sout + cs::STATUS_BLOCKED_REASON);
                (reason, w.rd32(base + sout + cs::STATUS_SCOREBOARDS))
            });
            if status == Some((cs::BLOCKED_SYNC_WAIT, 0)) {
                blocked = true;
            } else {
                stuck = false;
            }
        }
        self.update_word(base + cin + csg::REQ, |req| {
            (req & !csg::STATE_MASK) | csg::STATE_SUSPEND
        });
        for &(sin, _) in streams {
            self.update_word(base + sin + cs::REQ, |r| r & !cs::STATE_MASK);
        }
        self.glb_doorbell(1 << n);
        self.wait_csg_acks(n, csg::STATE_MASK, "suspend")?;
        // Jobs that finished before the suspend signal now; the rest wait for the resume.
        for q in &g.queues {
            q.jq.guard().backend_mut().complete(dma);
        }
        g.state.slot.store(NO_SLOT, Ordering::Release);
        if !(blocked && stuck) {
            g.state.stop_timeout_clock(now_ns(&self.backend));
        }
        g.state.suspended_from.store(n, Ordering::Release);
        g.state.suspended.store(true, Ordering::Release);
        g.state.wants_slot.store(true, Ordering::Release);
        self.sched.suspends.fetch_add(1, Ordering::AcqRel);
        self.release_slot(g, n);
        Ok(())
    }

    /// The scheduler (panthor's tick, simplified). Resident groups with nothing left to do give
    /// their slots up; free slots go to the waiting groups, highest priority first and, among
    /// equals, the one that last had a slot longest ago. While more groups have work than there
    /// are slots, a tick every [`TICK_PERIOD`] (or at once when a waiting group outranks a
    /// resident one) picks the groups that should be resident in that order — at equal
    /// priority, waiting groups before resident ones, which rotates them — suspends the
    /// resident groups not picked and resumes the picked ones on the slots they free.
    fn schedule(&self) {
        if self.sched.broken.load(Ordering::Acquire) {
            return;
        }
        let waiting = |g: &Group<B>| {
            !g.state.dead.load(Ordering::Acquire)
                && g.state.slot.load(Ordering::Acquire) == NO_SLOT
                && g.state.wants_slot.load(Ordering::Acquire)
        };
        if !self.sched.live_groups().any(|g| waiting(&g)) {
            self.sched.next_tick.store(NOT_RUNNING, Ordering::Release);
            return;
        }
        // Groups are about to run: the GPU must be powered (see `crate::pm`).
        let reload = || self.firmware.reload(&self.backend, false, false);
        match self
            .pm
            .wake(&self.backend, &self.gpu_info, self.fw.base, reload)
        {
            Ok(true) => {}
            // Suspended: the groups wait for the resume.
            Ok(false) => return,
            Err(e) => {
                dev_err!(&self.backend, "Cannot power the GPU up: {e}");
                return;
            }
        }
        self.evict_idle();
        let now = now_ns(&self.backend);
        let prio = |g: &Group<B>| g.state.priority.load(Ordering::Acquire);
        let lowest_resident = self
            .sched
            .live_groups()
            .filter(|g| g.state.slot.load(Ordering::Acquire) != NO_SLOT)
            .map(|g| prio(&g))
            .min();
        let outranked = self
            .sched
            .live_groups()
            .filter(|g| waiting(g))
            .any(|g| lowest_resident.is_some_and(|low| prio(&g) > low));
        let next = self.sched.next_tick.load(Ordering::Acquire);
        let due = outranked || (next != NOT_RUNNING && now >= next);
        // Candidates in the order they deserve a slot, in the scratch reserved for them (room
        // for every registered group: pushing cannot fail, and would only leave a group out
        // of this pass if it did).
        let mut order = self.sched.order.guard();
        order.clear();
        for g in self.sched.live_groups() {
            let candidate = waiting(&g) || g.state.slot.load(Ordering::Acquire) != NO_SLOT;
            if candidate && !g.state.dead.load(Ordering::Acquire) {
                let _ = order.push_within_capacity(g);
            }
        }
        // Keys are unique, so the unstable sort gives the one order there is.
        order.sort_unstable_by_key(|g| {
            let is_resident = g.state.slot.load(Ordering::Acquire) != NO_SLOT;
            (
                core::cmp::Reverse(prio(g)),
                is_resident,
                g.state.stamp.load(Ordering::Acquire),
                g.key,
            )
        });
        let nslots = self.sched.slots.guard().len();
        if due {
            self.sched.ticks.fetch_add(1, Ordering::AcqRel);
            // Residents that are not among the first `nslots` lose their slot. Groups without a
            // suspend buffer cannot be preempted.
            for g in order.iter().skip(nslots) {
                let n = g.state.slot.load(Ordering::Acquire);
                if n == NO_SLOT || g.suspend_va == 0 {
                    continue;
                }
                if self.suspend_group(n, g).is_err() {
                    // A reset is coming; it brings every group back.
                    return;
                }
            }
        }
        for g in order.iter().filter(|g| waiting(g)) {
            let free = self.sched.slots.guard().iter().position(Option::is_none);
            let Some(n) = free else {
                break;
            };
            match self.bind_group(n, g) {
                Ok(()) => g.state.wants_slot.store(false, Ordering::Release),
                // No address space right now: try again at the next wake-up.
                Err(Error::Busy) => {}
                // A reset is coming; it brings every group back.
                Err(Error::TimedOut) => return,
                Err(e) => {
                    dev_err!(&self.backend, "Cannot start group: {e}");
                    g.state.dead.store(true, Ordering::Release);
                }
            }
        }
        // The candidates' references go before anything below may tear a group down.
        order.clear();
        drop(order);
        // Groups still waiting: the next tick rotates them in.
        if self.sched.live_groups().any(|g| waiting(&g)) {
            let next = self.sched.next_tick.load(Ordering::Acquire);
            let next = if due || next == NOT_RUNNING {
                now.saturating_add(TICK_PERIOD.as_nanos() as u64)
            } else {
                next
            };
            self.sched.next_tick.store(next, Ordering::Release);
            self.backend
                .executor()
                .wake_at(jobqueue::Instant::from_nanos(next));
        } else {
            self.sched.next_tick.store(NOT_RUNNING, Ordering::Release);
        }
    }

    /// Takes the slots of the groups whose queues have nothing on their rings.
    fn evict_idle(&self) {
        for n in 0..self.fw.csg.len() {
            let Some(g) = self.group_in(n) else {
                continue;
            };
            if !g.state.dead.load(Ordering::Acquire) && g.state.slot.load(Ordering::Acquire) == n {
                self.evict_if_idle(&g, &g.queues);
            }
        }
    }

    /// Unbinds `g` if every queue of `queues` has nothing on its ring, deciding and unbinding
    /// with all of them locked.
    ///
    /// `run_job` writes a job into a ring under that ring's queue lock and then reads the
    /// group's slot: it either comes before this check (which then sees the job and keeps the
    /// group) or after the unbind (and finds no slot, so it asks for one). Checking queue by
    /// queue and unbinding afterwards would let a job in between, rung on a slot the group is
    /// about to lose, and left on the ring of a group that asks for no slot.
    fn evict_if_idle(&self, g: &Group<B>, queues: &[GroupQueue<B>]) {
        match queues.split_first() {
            // A termination not acknowledged asks for the reset, which takes the slot back.
            None => {
                let _ = self.unbind_group(g);
            }
            Some((q, rest)) => {
                let mut jq = q.jq.guard();
                jq.backend_mut().complete(self.backend.dma());
                if jq.backend().is_idle() {
                    self.evict_if_idle(g, rest);
                }
            }
        }
    }

    /// Resets the GPU after a timeout and brings every surviving group back.
    pub(crate) fn reset(&self) {
        let b = &self.backend;
        self.sched.shared.resets.fetch_add(1, Ordering::AcqRel);
        // The reset takes every slot away from the hardware.
        for n in 0..self.fw.csg.len() {
            if let Some(g) = self.group_in(n) {
                g.state.slot.store(NO_SLOT, Ordering::Release);
            }
            if let Some(s) = self.sched.slots.guard().get_mut(n) {
                *s = None;
            }
        }
        // Suspend buffers do not survive the reset: every group, resident or suspended, is
        // replayed from its first unfinished job below, and waits for a slot meanwhile.
        let now = now_ns(b);
        for g in self.sched.live_groups() {
            g.state.suspended.store(false, Ordering::Release);
            g.state.stop_timeout_clock(now);
        }
        self.sched.next_tick.store(NOT_RUNNING, Ordering::Release);
        self.slots.guard().clear();
        // No address space is left, so none is waiting to be released: a zombie VM is now
        // only a VM its groups keep alive, with nothing to give back.
        self.vm_zombie.guard().retain(|_, zombie| !*zombie);
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
            // The firmware is gone: the memory of groups whose termination it did not
            // acknowledge can go now.
            self.free_held_groups();
        }
        if ok {
            // The firmware's memory may be what went wrong: every section again.
            self.firmware.reload(b, true, false);
        }
        let booted = ok
            && gpu::power_on(b, &self.gpu_info.raw).is_ok()
            && {
                let regs = self.mcu_vm.guard().as_regs();
                regs.and_then(|r| mmu::enable(b, mmu::MCU_AS, &r)).is_ok()
            }
            && crate::fw::boot(b, self.fw.base, crate::fw::FW_INTERFACE_SIZE as u64).is_ok();
        if !booted {
            dev_err!(b, "GPU did not come back after a reset; failing all work");
            self.sched.broken.store(true, Ordering::Release);
            for g in self.sched.live_groups() {
                g.state
                    .state
                    .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_TIMEDOUT, Ordering::AcqRel);
                g.state.dead.store(true, Ordering::Release);
                self.teardown_group(&g, FenceError::CANCELED);
            }
            return;
        }
        enable_irqs(b);
        dev_info!(b, "GPU reset done; replaying unfinished jobs");
        // Every surviving group restarts from its first unfinished job.
        let w = self.fw_words();
        for g in self.sched.live_groups() {
            if g.state.dead.load(Ordering::Acquire) {
                self.teardown_group(&g, FenceError::CANCELED);
                continue;
            }
            let mut pending = false;
            for q in &g.queues {
                let mut jq = q.jq.guard();
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

// ---------------------------------------------------------------- power (see `crate::pm`)

impl<B: Backend> DevInner<B> {
    /// Whether the GPU has work: a job on a ring not complete yet, or a group waiting for a
    /// slot. Dead groups do not count (their teardown needs no GPU).
    fn gpu_has_work(&self) -> bool {
        let dma = self.backend.dma();
        self.sched.live_groups().any(|g| {
            if g.state.dead.load(Ordering::Acquire) {
                return false;
            }
            g.state.wants_slot.load(Ordering::Acquire)
                || g.queues.iter().any(|q| {
                    let mut jq = q.jq.guard();
                    jq.backend_mut().complete(dma);
                    !jq.backend().is_idle()
                })
        })
    }

    /// After a turn of the work item: powers the GPU down once it has had no work for the idle
    /// timeout (every group off its slot, the MCU halted, the domains off), or asks to be woken
    /// when the timeout would expire.
    fn pm_tick(&self) {
        if self.sched.broken.load(Ordering::Acquire) {
            return;
        }
        let seen = self.pm.activity();
        let idle = !self.gpu_has_work();
        let now = register::io::poll::PollClock::now(self.backend.timer_clock());
        let (down, recheck) = self.pm.note_idle(now, idle);
        // The governor's utilisation report, and when it wants the next one.
        let governor = self.pm.sample(&self.backend, !idle);
        for t in [recheck, governor].into_iter().flatten() {
            self.backend
                .executor()
                .wake_at(jobqueue::Instant::from_nanos(t));
        }
        if !down {
            return;
        }
        let (b, info, fw) = (&self.backend, &self.gpu_info, self.fw.base);
        let down = self.pm.power_down(b, info, fw, || {
            // A job that reached a ring since the look above keeps the GPU up.
            if self.pm.activity() != seen {
                return false;
            }
            // A termination not acknowledged keeps the GPU up; the reset it asked for follows.
            let mut terminated = true;
            for n in 0..self.fw.csg.len() {
                if let Some(g) = self.group_in(n) {
                    terminated &= self.unbind_group(&g).is_ok();
                }
            }
            terminated
        });
        if let Err(e) = down {
            dev_err!(&self.backend, "GPU power-down failed: {e}; resetting");
            self.request_reset();
        }
    }

    /// Whether a job published on one of `g`'s rings has not run to its end (the firmware's
    /// extract pointer is behind the published insert pointer).
    fn published_pending(&self, g: &Group<B>) -> bool {
        let w = self.fw_words();
        let base = self.fw.base;
        g.queues.iter().any(|q| {
            let iface = q.jq.guard().backend().iface;
            w.rd64(base + iface + 0x10) < w.rd64(base + iface)
        })
    }

    /// Takes `g` (which holds a slot) off the GPU without saving its state: its slot is
    /// terminated and every queue restarts, at its next start, from the first job it had not
    /// finished (as after a reset; the ring still holds those jobs).
    fn unbind_for_replay(&self, g: &Group<B>) -> Result {
        self.unbind_group(g)?;
        self.replay_marks(g);
        Ok(())
    }

    /// Makes every queue of `g`, which holds no slot, restart from the first job it had not
    /// finished at its next start, and the group ask for a slot if it has work.
    fn replay_marks(&self, g: &Group<B>) {
        let w = self.fw_words();
        let dma = self.backend.dma();
        let mut pending = false;
        for q in &g.queues {
            let mut jq = q.jq.guard();
            let r = jq.backend_mut();
            r.complete(dma);
            // Output words: extract, active.
            w.wr64(self.fw.base + r.iface + 0x10, r.replay_from());
            w.wr64(self.fw.base + r.iface + 0x18, 0);
            pending |= !r.is_idle();
        }
        if pending {
            g.state.wants_slot.store(true, Ordering::Release);
        }
    }

    /// The work item's half of a system suspend ([`suspend`](Self::suspend) asked for it, with
    /// new jobs held back): every resident group with published work not done is suspended
    /// through the firmware (its state saved in its suspend buffer, as time-slicing does), the
    /// other resident groups give their slots up, then the MCU halts and the GPU powers down.
    ///
    /// A group whose suspend the firmware does not acknowledge within [`SUSPEND_TIMEOUT`]
    /// escalates to a GPU reset (panthor terminates such groups and resets too): every group
    /// then restarts, after the resume, from the first job it had not finished. A group
    /// without a suspend buffer (a firmware that asks for none) is terminated and restarts the
    /// same way.
    fn sleep(&self) -> Result {
        // Room for the groups the power-down may still find resident, before anything changes.
        let mut left = env::Vec::<GroupRef<B>, B::Alloc>::try_with_capacity(self.fw.csg.len())?;
        for n in 0..self.fw.csg.len() {
            let Some(g) = self.group_in(n) else {
                continue;
            };
            let off = if g.state.dead.load(Ordering::Acquire) || !self.published_pending(&g) {
                self.unbind_group(&g)
            } else if g.suspend_va == 0 {
                self.unbind_for_replay(&g)
            } else {
                let r = self.suspend_group(n, &g);
                if r.is_ok() {
                    self.sched.sleep_saves.fetch_add(1, Ordering::AcqRel);
                }
                r
            };
            if off.is_err() {
                // The reset brings every group back, none of them resident.
                self.sched
                    .shared
                    .reset_needed
                    .store(false, Ordering::Release);
                self.reset();
                if self.sched.broken.load(Ordering::Acquire) {
                    return Err(Error::NoDevice);
                }
                break;
            }
        }
        // A group the loop above did not see (none should be left: the work item is the only
        // one to give slots, and it gives none while jobs are held) gives its slot up too,
        // under the gate, where no queue lock may be taken; it restarts from its first
        // unfinished job.
        let (b, info, fw) = (&self.backend, &self.gpu_info, self.fw.base);
        let mut terminated = Ok(());
        let down = self.pm.power_down(b, info, fw, || {
            for n in 0..self.fw.csg.len() {
                if let Some(g) = self.group_in(n) {
                    if let Err(e) = self.unbind_group(&g) {
                        terminated = Err(e);
                    }
                    // Room for one group a slot was made above.
                    let _ = left.push_within_capacity(g);
                }
            }
            terminated.is_ok()
        });
        for g in &left {
            self.replay_marks(g);
        }
        // A termination the firmware did not acknowledge fails the suspend (and resets).
        terminated?;
        down?;
        self.pm.set_suspended(true);
        Ok(())
    }

    /// Runs a system suspend the work item was asked for (see [`sleep`](Self::sleep)).
    fn sleep_if_asked(&self) {
        let s = &self.sched;
        if s.sleep
            .compare_exchange(
                SLEEP_ASKED,
                SLEEP_RUNNING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return;
        }
        let r = self.sleep();
        if let Err(e) = r {
            dev_err!(&self.backend, "Suspend failed: {e}; resetting the GPU");
            s.sleep_err.store(e.to_errno(), Ordering::Release);
            self.request_reset();
        }
        s.sleep.store(
            if r.is_ok() { SLEEP_DONE } else { SLEEP_FAILED },
            Ordering::Release,
        );
    }

    /// Suspends the device (system suspend; see `crate::pm`): holds new jobs back, has the
    /// work item suspend every group running on the GPU (saving its state through the
    /// firmware), halt the MCU and power the GPU down, and waits for it. Jobs not run yet stay
    /// in their rings and queues, and suspended groups keep their state, for
    /// [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if the device is suspended or suspending already; [`Error::TimedOut`] if
    /// the work item does not take the request up within
    /// [`crate::pm::SUSPEND_START_TIMEOUT`] of the system's clock ([`Backend::sys_clock`]; its
    /// executor is stopped); [`Error::NoDevice`] once the hardware is stopped for good
    /// ([`quiesce`](Self::quiesce)); the power-down's errors (the GPU is then reset). The
    /// device runs on after an error.
    pub fn suspend(&self) -> Result {
        if self.is_quiesced() {
            return Err(Error::NoDevice);
        }
        let s = &self.sched;
        let claim = s.sleep.compare_exchange(
            SLEEP_NONE,
            SLEEP_PREPARING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if claim.is_err() {
            return Err(Error::Busy);
        }
        self.pm.set_holding(true);
        s.sleep.store(SLEEP_ASKED, Ordering::Release);
        self.backend.executor().waker().wake_by_ref();
        // Waiting for the work item is waiting for the CPU, not the GPU: measured and slept on
        // the system's clock. The GPU's clock would not do over a simulated GPU: sleeping on it
        // runs the simulation ahead instead of giving the work item's thread a turn, and a
        // second of simulated time can pass in a few milliseconds.
        let clock = self.backend.sys_clock();
        let start = clock.now();
        loop {
            match s.sleep.load(Ordering::Acquire) {
                SLEEP_DONE => break,
                SLEEP_FAILED => {
                    let e = Error::from_errno(s.sleep_err.load(Ordering::Acquire));
                    self.resume_rings();
                    s.sleep.store(SLEEP_NONE, Ordering::Release);
                    return Err(e);
                }
                SLEEP_ASKED => {
                    let late = clock.now().saturating_sub(start) > crate::pm::SUSPEND_START_TIMEOUT;
                    if late
                        && s.sleep
                            .compare_exchange(
                                SLEEP_ASKED,
                                SLEEP_PREPARING,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                    {
                        dev_err!(
                            &self.backend,
                            "Suspend: the work item did not run; running on"
                        );
                        self.resume_rings();
                        s.sleep.store(SLEEP_NONE, Ordering::Release);
                        return Err(Error::TimedOut);
                    }
                }
                _ => {}
            }
            clock.sleep(crate::pm::SUSPEND_POLL_INTERVAL);
        }
        // The system sleeps: the driver's timers (job timeouts, the idle timer) stand still.
        self.backend.system_sleep(true);
        Ok(())
    }

    /// Resumes a suspended device: publishes every ring's held jobs and lets the scheduler
    /// start (or resume, from their suspend buffers) the groups with work, which powers the GPU
    /// up.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] if the device is not suspended, [`Error::NoDevice`] once the hardware
    /// is stopped for good ([`quiesce`](Self::quiesce)).
    pub fn resume(&self) -> Result {
        if self.is_quiesced() {
            return Err(Error::NoDevice);
        }
        if self.sched.sleep.load(Ordering::Acquire) != SLEEP_DONE {
            return Err(Error::Invalid);
        }
        // The held jobs are published before the scheduler may start a group again, so that
        // no stream starts with an insert pointer that is about to move.
        self.resume_rings();
        self.pm.set_suspended(false);
        self.sched.sleep.store(SLEEP_NONE, Ordering::Release);
        self.backend.executor().waker().wake_by_ref();
        // Time moves again for the driver's timers once the work is back on its way.
        self.backend.system_sleep(false);
        Ok(())
    }

    /// Ends holding jobs back: publishes every ring's insert pointer and makes the groups with
    /// work ask for a slot.
    fn resume_rings(&self) {
        self.pm.set_holding(false);
        let w = self.fw_words();
        let base = self.fw.base;
        let dma = self.backend.dma();
        for g in self.sched.live_groups() {
            let mut pending = false;
            for q in &g.queues {
                let mut jq = q.jq.guard();
                let r = jq.backend_mut();
                r.complete(dma);
                w.wr64(base + r.iface, r.insert());
                pending |= !r.is_idle();
            }
            match g.state.slot.load(Ordering::Acquire) {
                NO_SLOT if pending => g.state.wants_slot.store(true, Ordering::Release),
                NO_SLOT => {}
                // A resident group (a suspend that did not drain) sees its new work now.
                slot => ring_doorbell(&self.backend, slot),
            }
        }
        self.backend.executor().waker().wake_by_ref();
    }
}
