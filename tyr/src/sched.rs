// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Groups, queues and the road of a job from `GROUP_SUBMIT` to the hardware and back.
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
//! # When things go wrong
//!
//! - A job still on the ring after [`JOB_TIMEOUT`] times out: its group is marked
//!   `TIMEDOUT`, its queues are killed (the guilty job fails with `ETIMEDOUT`, the rest with
//!   `ECANCELED`), and the GPU is reset (retrying a reset that does not complete). After the
//!   reset the firmware is booted again and every other group is replayed from the first job
//!   it had not finished: its ring still holds those jobs, so they run again and complete.
//! - A stream that faults (an access to an unmapped address) stops; the driver fails the job
//!   that was running with `EFAULT`, marks the group `FATAL_FAULT` (the queue in
//!   `fatal_queues`) and the VM unusable, and kills the group's queues. Other groups and VMs
//!   are untouched.
//! - A group that is dead refuses new submissions with `EINVAL` (as panthor does for a group
//!   that cannot run).
//!
//! Every done fence signals: completed, failed, or cancelled when its queue is killed.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use core::time::Duration;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::vec::Vec;

use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{
    Backend as JqBackend, FenceError, QueueConfig, RunJob, SignalCtx, SignalFence, TimedOutJob,
    TimeoutAction,
};
use register::io::poll::PollClock;
use register::io::Io;

use crate::backend::{Backend, DmaMemory};
use crate::csf::{cs, csg, glb, instr};
use crate::regs::{DOORBELL, JOB_IRQ_MASK, MMU_IRQ_MASK};
use crate::{dev_err, uapi, Error, Result};

/// Job slots of one queue (jobs committed and not yet retired).
pub const JOB_SLOTS: usize = 64;
/// How long a job may stay on the ring before it times out (GPU time).
pub const JOB_TIMEOUT: Duration = Duration::from_millis(500);
/// Instructions the driver writes into the ring per job (its cost in credits).
pub const JOB_INSTRS: u32 = 8;
/// Largest user command stream one job may call.
pub const MAX_STREAM_SIZE: u32 = 1 << 20;
/// Smallest and largest ring buffer.
pub const RINGBUF_SIZES: core::ops::RangeInclusive<u32> = 0x1000..=0x1_0000;
/// First register the driver's ring instructions use (the top four of the 96, which userspace
/// streams may not rely on across calls).
const KREG: u8 = 92;
/// Offset of the per-queue interface words in the firmware region.
pub const QUEUE_IFACE_BASE: u64 = 0xa000;
/// Bytes of interface words per queue (input `{insert, extract}`, output `{extract, active}`).
pub const QUEUE_IFACE_SIZE: u64 = 0x20;
/// Queues whose interface words fit in the firmware region.
pub const MAX_QUEUES: usize =
    ((crate::driver::FW_INTERFACE_SIZE as u64 - QUEUE_IFACE_BASE) / QUEUE_IFACE_SIZE) as usize;
/// Bytes of sync objects per queue (`{seqno, status, pad}` as panthor lays them out).
pub(crate) const SYNCOBJ_SIZE: u64 = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The fence type of the driver's queues (host fences: the DRM glue is host-only for now).
pub type Fence = HostFence;

/// The scheduler's clock: the backend's, in nanoseconds.
#[derive(Clone, Debug)]
pub struct SchedClock<C>(pub C);

impl<C: PollClock> jobqueue::Clock for SchedClock<C> {
    fn now(&self) -> jobqueue::Instant {
        jobqueue::Instant::from_duration(self.0.now())
    }
}

/// A job queue of the driver.
pub type JobQueue<B> =
    jobqueue::Queue<RingHw<B>, <B as Backend>::Exec, SchedClock<<B as Backend>::Clock>, JOB_SLOTS>;

/// 32- and 64-bit CPU accesses to DMA memory by device address (little-endian words).
///
/// Crate-internal: an access is only sound while the memory it touches stays allocated, which
/// the driver guarantees for the memory it owns (the firmware region, a live group's rings and
/// sync objects) but which a safe public API could not promise (another thread may free a block
/// between the look-up of its CPU view and the access).
///
/// ```compile_fail
/// # // Not reachable from outside the crate (issue 20).
/// use tyr::sched::Words;
/// ```
pub(crate) struct Words<'a, D: DmaMemory>(pub(crate) &'a D);

impl<D: DmaMemory> Words<'_, D> {
    fn word(&self, addr: u64) -> Option<&AtomicU64> {
        let p = self.0.cpu_u64(addr & !7)?;
        // SAFETY: `cpu_u64` returned a pointer into a live block, valid for atomic accesses
        // (`DmaMemory` contract); the caller keeps the block alive while it uses the words.
        Some(unsafe { p.as_ref() })
    }

    /// The 32-bit word at `addr` (0 if the address is not in live memory).
    pub(crate) fn rd32(&self, addr: u64) -> u32 {
        self.word(addr).map_or(0, |w| {
            (w.load(Ordering::Acquire) >> ((addr & 4) * 8)) as u32
        })
    }

    /// Writes the 32-bit word at `addr` (nothing if the address is not in live memory).
    pub(crate) fn wr32(&self, addr: u64, v: u32) {
        if let Some(w) = self.word(addr) {
            let shift = (addr & 4) * 8;
            let mask = 0xffff_ffffu64 << shift;
            let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some((old & !mask) | (u64::from(v) << shift))
            });
        }
    }

    /// The 64-bit word at `addr` (0 if the address is not in live memory).
    pub(crate) fn rd64(&self, addr: u64) -> u64 {
        self.word(addr).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Writes the 64-bit word at `addr` (nothing if the address is not in live memory).
    pub(crate) fn wr64(&self, addr: u64, v: u64) {
        if let Some(w) = self.word(addr) {
            w.store(v, Ordering::Release);
        }
    }
}

use crate::fw::{MAX_CSGS, MAX_CS_PER_CSG};

/// Where the firmware's interface blocks are, as offsets in the firmware region.
#[derive(Clone, Debug, Default)]
pub struct FwIface {
    /// Device address of the firmware region.
    pub base: u64,
    /// Global input and output blocks.
    pub glb: (u64, u64),
    /// Per group slot: input and output blocks.
    pub csg: Vec<(u64, u64)>,
    /// Per group slot and stream: input and output blocks.
    pub cs: Vec<Vec<(u64, u64)>>,
}

impl FwIface {
    /// Reads the block addresses the firmware published in the region at device address
    /// `base` (`size` bytes), for `groups` slots of `streams` streams.
    pub fn read<D: DmaMemory>(
        dma: &D,
        base: u64,
        size: u64,
        groups: usize,
        streams: usize,
    ) -> Result<Self> {
        // Faulty firmware must not make the probe loop or allocate without bound: the counts
        // are those panthor accepts, and every control block lies inside the region.
        if groups == 0 || groups > MAX_CSGS || streams == 0 || streams > MAX_CS_PER_CSG {
            return Err(Error::Invalid);
        }
        let w = Words(dma);
        let rd = |o: u64| {
            if o.checked_add(4).is_none_or(|end| end > size) {
                return Err(Error::Invalid);
            }
            Ok(w.rd32(base + o))
        };
        let start = crate::fw::MCU_SHARED_REGION_START;
        let off = |va: u32| {
            let o = u64::from(va).checked_sub(start).ok_or(Error::Invalid)?;
            if o + 0x100 > size {
                return Err(Error::Invalid);
            }
            Ok(o)
        };
        let glb = (off(rd(glb::INPUT_VA)?)?, off(rd(glb::OUTPUT_VA)?)?);
        let stride = u64::from(rd(crate::fw::GLB_GROUP_STRIDE)?);
        let mut csgs = Vec::new();
        let mut css = Vec::new();
        csgs.try_reserve_exact(groups)
            .map_err(|_| Error::NoMemory)?;
        css.try_reserve_exact(groups).map_err(|_| Error::NoMemory)?;
        for n in 0..groups as u64 {
            let c = crate::fw::CSF_GROUP_CONTROL_OFFSET + n * stride;
            csgs.push((off(rd(c + csg::INPUT_VA)?)?, off(rd(c + csg::OUTPUT_VA)?)?));
            let s_stride = u64::from(rd(c + csg::STREAM_STRIDE)?);
            let mut streams_of = Vec::new();
            streams_of
                .try_reserve_exact(streams)
                .map_err(|_| Error::NoMemory)?;
            for s in 0..streams as u64 {
                let sc = c + crate::fw::CSF_STREAM_CONTROL_OFFSET + s * s_stride;
                streams_of.push((off(rd(sc + cs::INPUT_VA)?)?, off(rd(sc + cs::OUTPUT_VA)?)?));
            }
            css.push(streams_of);
        }
        Ok(FwIface {
            base,
            glb,
            csg: csgs,
            cs: css,
        })
    }
}

/// What a job carries from submission to the ring.
pub struct JobPayload {
    /// GPU address of the user stream (0 for a job that only synchronises).
    pub stream_addr: u64,
    /// Size of the user stream in bytes.
    pub stream_size: u32,
    /// The hardware fence, allocated at submission so that `run_job` allocates nothing.
    pub hw: Fence,
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
}

/// Value of [`GroupState::slot`] for a group without a slot.
pub const NO_SLOT: usize = usize::MAX;

/// What the device's scheduler shares with the ring backends.
pub struct SchedShared {
    /// A job timed out: the GPU must be reset.
    pub reset_needed: AtomicBool,
    /// Number of GPU resets done.
    pub resets: AtomicU32,
}

/// A ring in flight: one job written to the ring and not yet seen complete.
struct Inflight {
    /// Sync-object value at which the job is complete.
    target: u64,
    /// Ring position (bytes, monotonic) of the job's first instruction.
    pos: u64,
    fence: Fence,
}

/// The ring backend of one queue (what `jobqueue` calls to put jobs on the hardware).
pub struct RingHw<B: Backend> {
    backend: Weak<crate::driver::DevInner<B>>,
    group: Arc<GroupState>,
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
    inflight: [Option<Inflight>; JOB_SLOTS],
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
        backend: Weak<crate::driver::DevInner<B>>,
        group: Arc<GroupState>,
        index: usize,
        m: QueueMem,
    ) -> Self {
        RingHw {
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
            inflight: core::array::from_fn(|_| None),
            head: 0,
            len: 0,
        }
    }

    /// The sync object's value.
    pub fn completed(&self, dma: &B::Dma) -> u64 {
        Words(dma).rd64(self.sync_dma)
    }

    /// Signals the hardware fences of every job the sync object says is done.
    pub fn complete(&mut self, dma: &B::Dma) {
        let value = self.completed(dma);
        while self.len > 0 {
            match &self.inflight[self.head] {
                Some(j) if j.target <= value => {}
                _ => break,
            }
            if let Some(j) = self.inflight[self.head].take() {
                j.fence.signal(Ok(()));
            }
            self.head = (self.head + 1) % JOB_SLOTS;
            self.len -= 1;
        }
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

    fn write_job(&mut self, dma: &B::Dma, p: &JobPayload) {
        let call: [u64; 3] = if p.stream_size == 0 {
            [instr::nop(); 3]
        } else {
            [
                instr::move48(KREG, p.stream_addr),
                instr::move32(KREG + 2, p.stream_size),
                instr::call(KREG, KREG + 2),
            ]
        };
        let words = [
            call[0],
            call[1],
            call[2],
            instr::move48(KREG, self.sync_va),
            instr::move48(KREG + 2, 1),
            instr::sync_add64(KREG, KREG + 2),
            instr::nop(),
            instr::nop(),
        ];
        let w = Words(dma);
        for (i, word) in words.iter().enumerate() {
            let at = (self.insert + 8 * i as u64) & (self.ring_size - 1);
            w.wr64(self.ring_dma + at, *word);
        }
        dma.sync_for_device(self.ring_dma, self.ring_size as usize);
    }
}

impl<B: Backend> JqBackend for RingHw<B> {
    type Fence = Fence;
    type Alloc = HostAlloc;
    type Payload = JobPayload;

    fn run_job(
        &mut self,
        job: RunJob<'_, JobPayload>,
        _ctx: &SignalCtx<'_>,
    ) -> core::result::Result<Fence, FenceError> {
        let Some(dev) = self.backend.upgrade() else {
            return Err(FenceError::CANCELED);
        };
        if self.group.dead.load(Ordering::Acquire) {
            return Err(FenceError::CANCELED);
        }
        if self.len >= JOB_SLOTS {
            return Err(FenceError::INVALID);
        }
        let dma = dev.backend.dma();
        let target = self.emitted + 1;
        let p = job.payload();
        self.write_job(dma, p);
        let fence = p.hw.clone();
        let pos = self.insert;
        self.insert += u64::from(JOB_INSTRS) * 8;
        self.emitted = target;
        let tail = (self.head + self.len) % JOB_SLOTS;
        self.inflight[tail] = Some(Inflight {
            target,
            pos,
            fence: fence.clone(),
        });
        self.len += 1;
        // Publish the new insert pointer, then tell the firmware.
        let fw = dev.fw.base;
        Words(dma).wr64(fw + self.iface, self.insert);
        match self.group.slot.load(Ordering::Acquire) {
            NO_SLOT => self.group.wants_slot.store(true, Ordering::Release),
            slot => ring_doorbell(&dev.backend, slot),
        }
        Ok(fence)
    }

    fn timed_out(
        &mut self,
        job: TimedOutJob<'_, JobPayload>,
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
        // A job is on the ring from the moment it is written there, but it only runs once its
        // group holds a slot and the jobs before it are done: waiting for either is not a hang.
        let progress = self
            .backend
            .upgrade()
            .map(|dev| self.completed(dev.backend.dma()));
        let moved = progress.is_some_and(|p| p > self.progress_mark);
        if let Some(p) = progress {
            self.progress_mark = p;
        }
        let waiting = moved || self.group.slot.load(Ordering::Acquire) == NO_SLOT;
        if waiting && job.extensions() < MAX_EXTENSIONS {
            return TimeoutAction::Extend(JOB_TIMEOUT);
        }
        if let Some(dev) = self.backend.upgrade() {
            dev_err!(
                &dev.backend,
                "Job {} of queue {} timed out; resetting the GPU",
                job.seqno(),
                self.index
            );
            dev.sched.shared.reset_needed.store(true, Ordering::Release);
            // Jobs that finished before the hang keep their success.
            self.complete(dev.backend.dma());
        }
        self.group
            .state
            .fetch_or(uapi::DRM_PANTHOR_GROUP_STATE_TIMEDOUT, Ordering::AcqRel);
        self.group.dead.store(true, Ordering::Release);
        // The guilty job fails with ETIMEDOUT, the rest of the queue is cancelled; the reset
        // that follows stops the hardware.
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

/// The configuration of a queue with a ring of `ring_size` bytes.
pub fn queue_config(ring_size: u32) -> QueueConfig {
    QueueConfig::new(ring_size / 8)
        .with_timeout(JOB_TIMEOUT)
        .with_max_extensions(MAX_EXTENSIONS)
}

/// How often a job's deadline is pushed back while its group waits for a slot or the jobs
/// before it make progress (a job waiting longer than this many timeouts fails anyway).
pub const MAX_EXTENSIONS: u32 = 120;

/// One queue of a group.
pub struct GroupQueue<B: Backend> {
    /// The job queue (its backend is the ring).
    pub jq: Mutex<JobQueue<B>>,
    /// Its configuration.
    pub config: QueueConfig,
}

/// A group: queues sharing a VM, scheduled onto a group slot together.
pub struct Group<B: Backend> {
    /// Device-unique key.
    pub key: u64,
    /// The VM.
    pub vm: Arc<Mutex<crate::driver::TyrVm<B>>>,
    /// The VM's key.
    pub vm_key: u64,
    /// State shared with the rings.
    pub state: Arc<GroupState>,
    /// The queues.
    pub queues: Vec<GroupQueue<B>>,
    /// The object holding rings and sync objects, and where it is mapped in the VM's kernel
    /// region.
    pub(crate) mem: crate::driver::BoRef<B>,
    pub(crate) mem_va: u64,
    /// Interface-word slots of the queues.
    pub(crate) iface_slots: Vec<usize>,
    /// Held while the group is torn down, so that a second teardown waits for the first.
    pub(crate) teardown: Mutex<()>,
}

impl<B: Backend> Group<B> {
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
pub fn group_mem_size(rings: &[u32]) -> u64 {
    rings.iter().map(|r| u64::from(*r)).sum::<u64>() + crate::backend::PAGE_SIZE
}

/// The device's scheduler state.
pub struct Sched<B: Backend> {
    /// Shared with the rings.
    pub shared: SchedShared,
    /// Every live group by key.
    pub groups: Mutex<BTreeMap<u64, Arc<Group<B>>>>,
    /// The group in each group slot.
    pub slots: Mutex<Vec<Option<u64>>>,
    /// Free interface-word slots.
    iface_free: Mutex<Vec<bool>>,
    /// The bind queue of each VM (by key) that has had an asynchronous bind.
    pub(crate) binds: Mutex<BTreeMap<u64, Arc<Mutex<crate::bindq::BindQueue<B>>>>>,
    /// The device could not be brought back after a reset.
    pub broken: AtomicBool,
}

impl<B: Backend> Sched<B> {
    /// Scheduler state for `slots` group slots.
    pub fn new(slots: usize) -> Self {
        Sched {
            shared: SchedShared {
                reset_needed: AtomicBool::new(false),
                resets: AtomicU32::new(0),
            },
            groups: Mutex::new(BTreeMap::new()),
            slots: Mutex::new(std::vec![None; slots]),
            iface_free: Mutex::new(std::vec![true; MAX_QUEUES]),
            binds: Mutex::new(BTreeMap::new()),
            broken: AtomicBool::new(false),
        }
    }

    /// Takes `n` interface-word slots; [`Error::NoSpace`] if there are not enough.
    pub(crate) fn alloc_iface(&self, n: usize) -> Result<Vec<usize>> {
        let mut free = lock(&self.iface_free);
        let picked: Vec<usize> = free
            .iter()
            .enumerate()
            .filter(|(_, f)| **f)
            .map(|(i, _)| i)
            .take(n)
            .collect();
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
        let mut free = lock(&self.iface_free);
        for i in slots {
            if let Some(f) = free.get_mut(*i) {
                *f = true;
            }
        }
    }

    /// A snapshot of the live groups.
    pub fn group_list(&self) -> Vec<Arc<Group<B>>> {
        lock(&self.groups).values().cloned().collect()
    }

    /// Number of queue-interface slots in use (by live groups).
    pub fn ifaces_in_use(&self) -> usize {
        lock(&self.iface_free).iter().filter(|f| !**f).count()
    }

    /// Number of bind queues (one per VM that has had an asynchronous bind and still exists).
    pub fn bind_queue_count(&self) -> usize {
        lock(&self.binds).len()
    }
}

/// Interrupt masks the driver runs with: every job interrupt, MMU page faults.
pub(crate) fn enable_irqs<B: Backend>(b: &B) {
    b.io().write_reg(JOB_IRQ_MASK::from(u32::MAX));
    b.io().write_reg(MMU_IRQ_MASK::from(0xffff_u32));
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use super::*;
    use crate::host::SimDma;
    use mali_sim::{MemConfig, SimMemory};

    /// Issue 20, suspected item: firmware publishing absurd counts or strides (here a stream
    /// stride of 0 with 2^32 - 1 streams, every block valid) makes the probe fail at once
    /// instead of looping over billions of streams while allocating.
    #[test]
    fn faulty_firmware_interface_is_refused_quickly() {
        let mem = std::sync::Arc::new(SimMemory::new(MemConfig::default()));
        let dma = SimDma(mem);
        let size = 0x1_0000u64;
        let region = dma.alloc((size / 0x1000) as usize, 0x1000).unwrap();
        let base = region.addr;
        let w = Words(&dma);
        let va = (crate::fw::MCU_SHARED_REGION_START + 0x8000) as u32;
        w.wr32(base + glb::INPUT_VA, va);
        w.wr32(base + glb::OUTPUT_VA, va);
        w.wr32(base + crate::fw::GLB_GROUP_STRIDE, 0x100);
        for n in 0..31 {
            let c = base + crate::fw::CSF_GROUP_CONTROL_OFFSET + n * 0x100;
            w.wr32(c + csg::INPUT_VA, va);
            w.wr32(c + csg::OUTPUT_VA, va);
            w.wr32(c + csg::STREAM_STRIDE, 0);
            let sc = c + crate::fw::CSF_STREAM_CONTROL_OFFSET;
            w.wr32(sc + cs::INPUT_VA, va);
            w.wr32(sc + cs::OUTPUT_VA, va);
        }
        // A sane interface reads.
        let ok = FwIface::read(&dma, base, size, 2, 8).unwrap();
        assert_eq!((ok.csg.len(), ok.cs[1].len()), (2, 8));
        let (tx, rx) = std::sync::mpsc::channel();
        let dma2 = dma.clone();
        std::thread::spawn(move || {
            let _ = tx.send(FwIface::read(&dma2, base, size, 31, u32::MAX as usize).err());
        });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Some(Error::Invalid)),
            "the probe did not refuse 2^32 - 1 streams"
        );
        // Control blocks past the region are refused too.
        w.wr32(base + crate::fw::GLB_GROUP_STRIDE, 0x1000_0000);
        assert_eq!(
            FwIface::read(&dma, base, size, 2, 8).err(),
            Some(Error::Invalid)
        );
    }
}
