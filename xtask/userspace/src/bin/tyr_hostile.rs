// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `/init` of the test VM that attacks the Tyr driver (`gpukit_tyr`, booted with
//! `gpukit.boot=tyr`) through `/dev/dri/renderD128` as a hostile client would, one check per
//! attack on the errno the driver gives, each followed by a check that the device still works
//! (a small job stores a word that reads back through the mapping, or a bind succeeds). The
//! stage boots with `panic_on_warn=1`: a WARN on any path ends the VM before the summary.
//!
//! 1. **Tiler heap**: `TILER_HEAP_CREATE` with `initial_chunk_count = max_chunks =
//!    0xFFFF_FFFF` chunks of 128 KiB: `ENOMEM` (the file's heap budget).
//! 2. **Huge and empty BOs**: `BO_CREATE` of 1 TiB: `ENOMEM`; of 0 bytes: `EINVAL`.
//! 3. **Too many jobs in one call**: 65 jobs (more than `JOB_SLOTS`, 64) in one
//!    `GROUP_SUBMIT`: `EINVAL`, and the syncobj the jobs would signal has no fence.
//! 4. **Many waits on one timeline point among many pending points**: a gate job holds the
//!    queues back until the CPU releases it (a `SYNC_WAIT32` on a data word the program sets
//!    once its attacks are in; the simulated firmware sees the CPU's write within its poll
//!    interval, see `tyr_time`); behind it
//!    504 jobs on 8 queues (4 groups of 2), each waiting on the gate and signalling its own
//!    point of one timeline syncobj, are pending; a job with 63 wait ops on the last point
//!    (and a signal: 64 sync ops, the most a job may have) is accepted while the last point
//!    has not signalled; a call with one job for a queue with room and one for the queue now
//!    holding 64 jobs gives `EBUSY` and its first job's syncobj gets no fence; then
//!    everything completes with status 1.
//! 5. **Closing mid-wait**: a second file of the client submits a job that will not finish
//!    soon (the gate's stream: seconds under TCG); a thread waits on its syncobj while the main
//!    thread unmaps and closes the file: the wait returns (the ioctl holds the file, so when the
//!    job is done), nothing hangs, and the render node still opens.
//! 6. **A 128 TiB sparse map**, last (a bind that does not return would hold up what comes
//!    after it): `VM_BIND` `MAP_SPARSE` of 128 TiB on a VM of the client's own: 0 or `ENOMEM`,
//!    within 10 s; a bind on another VM succeeds afterwards, within 10 s too.
//!
//! Unplugging mid-call is not attempted (the stage cannot time an unbind against an ioctl in
//! flight); `tyr_demo` unplugs with a file open.

use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use gpukit_userspace_tests::drm::{self, Drm};
use gpukit_userspace_tests::init;
use gpukit_userspace_tests::panthor::{self, Job, JobOps};
use gpukit_userspace_tests::report::Report;
use gpukit_userspace_tests::sync_file::{self, FenceStatus};
use gpukit_userspace_tests::sys::{self, Errno, Mapping};
use tyr::csf::instr;
use tyr::uapi::*;

/// The name in the check lines.
const PROGRAM: &str = "tyr_hostile";

/// Where each client set-up binds its code and data BOs, and their sizes.
const CODE_VA: u64 = 0x100_0000;
const DATA_VA: u64 = 0x4000_0000;
const BO_SIZE: u64 = 0x1_0000;
const CODE_SIZE: u64 = 0x4_0000;
/// Code offsets: one 64-byte stream per probe job, the gate's block of `NOP`s and the gate's
/// stream of `CALL`s of it.
const PROBE_STREAMS: u64 = 0x1000;
const NOP_BLOCK: u64 = 0x1_0000;
const NOP_BYTES: u32 = 0x1_0000;
const GATE_STREAM: u64 = 0x2_0000;
const GATE_CALLS: usize = 128;
/// Data offsets: the word the CPU sets to release part 4's gate, and the probe jobs' words.
const GATE_WORD: u64 = 0x800;
const PROBE_WORDS: u64 = 0x1000;
/// Code offset of part 4's gate stream.
const CPU_GATE_STREAM: u64 = 0x3_0000;
const _: () = assert!(GATE_WORD + 8 <= PROBE_WORDS);
/// Probe jobs (one per check that the device still works).
const MAX_PROBES: u64 = 32;
/// Jobs a queue holds pending (`tyr::job::JOB_SLOTS`), also the most per `GROUP_SUBMIT`.
const JOB_SLOTS: u32 = 64;
/// Sync operations a job may have (`tyr::ioctl::MAX_SYNCS`).
const MAX_SYNCS: usize = 64;
/// The timeline attack: groups of two queues, each queue holding `POINTS_PER_QUEUE` jobs.
const TIMELINE_GROUPS: u32 = 4;
const POINTS_PER_QUEUE: u32 = JOB_SLOTS - 1;
/// The heap attack's chunk size.
const CHUNK_128K: u32 = 128 << 10;
/// The huge BO, and the sparse map's size.
const HUGE_BO: u64 = 1 << 40;
const SPARSE_SIZE: u64 = 1 << 47;
/// How long a sparse bind may take.
const SPARSE_LIMIT: Duration = Duration::from_secs(10);
/// How long the CPU waits for a job (the kernel runs under QEMU's TCG, with lockdep).
const WAIT_NS: i64 = 30_000_000_000;
/// How long the waiting thread of part 6 waits, and how long the main thread waits for it.
const CLOSE_WAIT_NS: i64 = 20_000_000_000;
const CLOSE_JOIN: Duration = Duration::from_secs(30);

const _: () = {
    assert!(PROBE_STREAMS + 64 * MAX_PROBES <= NOP_BLOCK);
    assert!(NOP_BLOCK + NOP_BYTES as u64 <= GATE_STREAM);
    assert!(GATE_STREAM + 8 * (GATE_CALLS as u64 + 2) <= CODE_SIZE);
    assert!(PROBE_WORDS + 8 * MAX_PROBES <= BO_SIZE);
    assert!((POINTS_PER_QUEUE as usize) < MAX_SYNCS);
};

fn main() {
    init::run(PROGRAM, checks)
}

/// A buffer object and its CPU mapping.
struct Bo {
    handle: u32,
    map: Mapping,
}

/// What one client set up: a VM with a code and a data BO bound, a group of two queues.
struct Client {
    vm: u32,
    code: Bo,
    data: Bo,
    group: u32,
    /// Probe jobs run so far.
    probes: u64,
}

fn checks<W: Write>(r: &mut Report<W>) {
    let dev = match Drm::open(drm::RENDER_NODE) {
        Ok(dev) => {
            r.ok("open /dev/dri/renderD128");
            Arc::new(dev)
        }
        Err(e) => {
            return r.fail(
                "open /dev/dri/renderD128",
                format!("{e}; {}", drm::list_dev_dri()),
            )
        }
    };
    match dev.version() {
        Ok(v) if v.name == "panthor" => {}
        Ok(v) => return r.note(format!("driver {}, not panthor: no attack", v.name)),
        Err(e) => return r.fail("VERSION", e),
    }
    let mut c = match Client::new(&dev) {
        Ok(c) => {
            r.ok("set-up: VM, code and data BOs bound, a group of two queues");
            c
        }
        Err(e) => {
            return r.fail(
                "set-up: VM, code and data BOs bound, a group of two queues",
                e,
            )
        }
    };
    r.check("set-up: a probe job stores its word", c.probe(&dev));
    heap(r, &dev, &mut c);
    huge_bo(r, &dev, &mut c);
    too_many_jobs(r, &dev, &mut c);
    timeline(r, &dev, &mut c);
    close_mid_wait(r, &dev, &mut c);
    sparse(r, &dev, &mut c);
}

/// An errno as a failure message.
fn errno<T>(what: &'static str) -> impl Fn(Errno) -> Result<T, String> {
    move |e| Err(format!("{what}: {e}"))
}

/// `Ok` if `got` is a success (when `0` is in `want`) or an error with an errno in `want`.
fn expect_errnos<T: std::fmt::Debug>(got: Result<T, Errno>, want: &[i32]) -> Result<(), String> {
    let names = || {
        want.iter()
            .map(|&e| {
                if e == 0 {
                    "0".to_string()
                } else {
                    Errno(e).to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" or ")
    };
    match got {
        Ok(_) if want.contains(&0) => Ok(()),
        Err(e) if want.contains(&e.0) => Ok(()),
        Ok(v) => Err(format!("expected {}, got success ({v:?})", names())),
        Err(e) => Err(format!("expected {}, got {e}", names())),
    }
}

/// `BO_CREATE` of `size`, mapped.
fn bo_mapped(dev: &Drm, size: u64) -> Result<Bo, String> {
    let (handle, _) = panthor::bo_create(dev, size).or_else(errno("BO_CREATE"))?;
    let offset = panthor::bo_mmap_offset(dev, handle).or_else(errno("BO_MMAP_OFFSET"))?;
    let map = Mapping::shared(dev.file(), size as usize, offset).or_else(errno("mmap"))?;
    Ok(Bo { handle, map })
}

/// Writes `prog` into `bo` at byte `offset`.
fn write_stream(bo: &Bo, offset: u64, prog: &[u64]) {
    for (i, word) in prog.iter().enumerate() {
        bo.map.write_u64(offset as usize / 8 + i, *word);
    }
}

/// A stream that stores `value` at `DATA_VA + out`.
fn store_stream(out: u64, value: u32) -> [u64; 3] {
    [
        instr::move48(0, DATA_VA + out),
        instr::move32(2, value),
        instr::store_multiple(2, 0, 0, 1),
    ]
}

/// The gate's stream: [`GATE_CALLS`] calls of the block of `NOP`s.
fn gate_stream() -> Vec<u64> {
    let mut prog = vec![
        instr::move48(4, CODE_VA + NOP_BLOCK),
        instr::move32(6, NOP_BYTES),
    ];
    prog.resize(2 + GATE_CALLS, instr::call(4, 6));
    prog
}

/// Part 4's gate: waits until the word at [`GATE_WORD`] exceeds 0 (the CPU sets it).
fn cpu_gate_stream() -> [u64; 3] {
    [
        instr::move48(0, DATA_VA + GATE_WORD),
        instr::move32(2, 0),
        instr::sync_wait32(instr::Condition::Greater, 0, 2),
    ]
}

/// The word probe job `k` stores.
fn probe_value(k: u64) -> u32 {
    0x600d_0000 | k as u32
}

/// The jobs of the timeline attack: for group `g` and queue `q`, the points its jobs signal.
fn timeline_points(g: u32, q: u32) -> std::ops::RangeInclusive<u64> {
    let first = u64::from((g * 2 + q) * POINTS_PER_QUEUE) + 1;
    first..=first + u64::from(POINTS_PER_QUEUE) - 1
}

/// The last point of the timeline attack.
fn last_point() -> u64 {
    u64::from(TIMELINE_GROUPS * 2 * POINTS_PER_QUEUE)
}

/// Waits up to [`WAIT_NS`] for `syncobj`.
fn wait(dev: &Drm, syncobj: u32) -> Result<Duration, String> {
    let t = Instant::now();
    match dev.syncobj_wait(&[syncobj], drm::SYNCOBJ_WAIT_ALL, WAIT_NS) {
        Ok(_) => Ok(t.elapsed()),
        Err(e) => Err(format!(
            "SYNCOBJ_WAIT: {e} after {:.1} s",
            t.elapsed().as_secs_f64()
        )),
    }
}

/// `Ok` if `syncobj` holds no fence (a submission that failed installed none): a poll gives
/// `EINVAL`.
fn no_fence(dev: &Drm, syncobj: u32) -> Result<(), String> {
    match dev.syncobj_wait(&[syncobj], drm::SYNCOBJ_WAIT_ALL, 0) {
        Err(Errno(libc::EINVAL)) => Ok(()),
        Err(e) => Err(format!(
            "a poll of its syncobj gave {e}, not EINVAL (no fence)"
        )),
        Ok(_) => Err("its syncobj has a fence: something was submitted".into()),
    }
}

/// The status of `syncobj`'s fence, through a sync file.
fn fence_status(dev: &Drm, syncobj: u32) -> Result<FenceStatus, String> {
    let file = dev
        .syncobj_export_sync_file(syncobj)
        .or_else(errno("SYNCOBJ_HANDLE_TO_FD (EXPORT_SYNC_FILE)"))?;
    let status = sync_file::status(&file);
    sys::close(file).or_else(errno("close of the sync file"))?;
    status
}

impl Client {
    fn new(dev: &Drm) -> Result<Self, String> {
        let vm = panthor::vm_create(dev).or_else(errno("VM_CREATE"))?;
        let code = bo_mapped(dev, CODE_SIZE)?;
        let data = bo_mapped(dev, BO_SIZE)?;
        let ops = [
            panthor::map_op(code.handle, CODE_VA, CODE_SIZE),
            panthor::map_op(data.handle, DATA_VA, BO_SIZE),
        ];
        panthor::vm_bind(dev, vm, 0, &ops, &[]).or_else(errno("VM_BIND"))?;
        let group =
            panthor::group_create(dev, vm, &[0x1000, 0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM)
                .or_else(errno("GROUP_CREATE"))?;
        Ok(Client {
            vm,
            code,
            data,
            group,
            probes: 0,
        })
    }

    /// A group of two queues on the client's VM.
    fn group(&self, dev: &Drm) -> Result<u32, String> {
        panthor::group_create(
            dev,
            self.vm,
            &[0x1000, 0x1000],
            PANTHOR_GROUP_PRIORITY_MEDIUM,
        )
        .or_else(errno("GROUP_CREATE"))
    }

    /// Submits `prog`, written at `at` in the code BO, to queue `queue` of `group`; the
    /// syncobj it signals.
    fn submit(
        &self,
        dev: &Drm,
        group: u32,
        queue: u32,
        at: u64,
        prog: &[u64],
    ) -> Result<u32, String> {
        write_stream(&self.code, at, prog);
        let done = dev.syncobj_create(0).or_else(errno("SYNCOBJ_CREATE"))?;
        let job = Job {
            queue,
            addr: CODE_VA + at,
            size: 8 * prog.len() as u32,
            waits: vec![],
            signals: vec![done],
        };
        panthor::group_submit(dev, group, &[job]).or_else(errno("GROUP_SUBMIT"))?;
        Ok(done)
    }

    /// The device still works: a job on the client's group stores a word that reads back.
    fn probe(&mut self, dev: &Drm) -> Result<(), String> {
        let k = self.probes;
        if k >= MAX_PROBES {
            return Err("no probe stream left".into());
        }
        self.probes += 1;
        let (out, value) = (PROBE_WORDS + 8 * k, probe_value(k));
        let done = self.submit(
            dev,
            self.group,
            0,
            PROBE_STREAMS + 64 * k,
            &store_stream(out, value),
        )?;
        wait(dev, done)?;
        match fence_status(dev, done)? {
            FenceStatus::Signalled => {}
            s => return Err(format!("the probe job's fence: {s}")),
        }
        let got = self.data.map.read_u32(out as usize / 4);
        if got == value {
            Ok(())
        } else {
            Err(format!("the probe word reads {got:#x}, not {value:#x}"))
        }
    }
}

/// Part 1: a tiler heap of 2^32 - 1 chunks.
fn heap<W: Write>(r: &mut Report<W>, dev: &Drm, c: &mut Client) {
    let got = panthor::tiler_heap_create(dev, c.vm, u32::MAX, CHUNK_128K, u32::MAX, 1);
    r.check(
        "TILER_HEAP_CREATE of 0xffffffff initial (and max) chunks of 128 KiB fails with ENOMEM",
        expect_errnos(got, &[libc::ENOMEM]),
    );
    r.check(
        "after the heap attack a probe job stores its word",
        c.probe(dev),
    );
}

/// Part 2: a 1 TiB and an empty BO.
fn huge_bo<W: Write>(r: &mut Report<W>, dev: &Drm, c: &mut Client) {
    r.check(
        "BO_CREATE of 1 TiB fails with ENOMEM",
        expect_errnos(panthor::bo_create(dev, HUGE_BO), &[libc::ENOMEM]),
    );
    r.check(
        "BO_CREATE of 0 bytes fails with EINVAL",
        expect_errnos(panthor::bo_create(dev, 0), &[libc::EINVAL]),
    );
    r.check(
        "after the BO attacks a probe job stores its word",
        c.probe(dev),
    );
}

/// Part 3: more jobs in one call than a queue holds.
fn too_many_jobs<W: Write>(r: &mut Report<W>, dev: &Drm, c: &mut Client) {
    const CHECK: &str = "GROUP_SUBMIT of 65 jobs in one call fails with EINVAL, nothing submitted";
    let result = (|| {
        let group = c.group(dev)?;
        let done = dev.syncobj_create(0).or_else(errno("SYNCOBJ_CREATE"))?;
        let jobs: Vec<Job> = (0..=JOB_SLOTS)
            .map(|_| Job {
                signals: vec![done],
                ..Job::default()
            })
            .collect();
        expect_errnos(panthor::group_submit(dev, group, &jobs), &[libc::EINVAL])?;
        no_fence(dev, done)
    })();
    r.check(CHECK, result);
    r.check(
        "after the 65-job call a probe job stores its word",
        c.probe(dev),
    );
}

/// Part 4: many points pending on a timeline, many waits on the last one, a full queue.
fn timeline<W: Write>(r: &mut Report<W>, dev: &Drm, c: &mut Client) {
    const SETUP: &str = "timeline attack: a gate job the CPU releases and 4 groups of two \
                         queues";
    let set_up = (|| {
        let groups: Vec<u32> = (0..TIMELINE_GROUPS)
            .map(|_| c.group(dev))
            .collect::<Result<_, _>>()?;
        let gate_group = panthor::group_create(dev, c.vm, &[0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM)
            .or_else(errno("GROUP_CREATE"))?;
        let timeline = dev.syncobj_create(0).or_else(errno("SYNCOBJ_CREATE"))?;
        c.data.map.write_u64(GATE_WORD as usize / 8, 0);
        let gate = c.submit(dev, gate_group, 0, CPU_GATE_STREAM, &cpu_gate_stream())?;
        Ok::<_, String>((groups, gate_group, timeline, gate, Instant::now()))
    })();
    let (groups, gate_group, timeline, gate, gated) = match set_up {
        Ok(v) => {
            r.ok(SETUP);
            v
        }
        Err(e) => return r.fail(SETUP, e),
    };
    let submitted = (|| {
        for (g, &group) in groups.iter().enumerate() {
            for q in 0..2 {
                let jobs: Vec<JobOps> = timeline_points(g as u32, q)
                    .map(|p| JobOps {
                        queue: q,
                        syncs: vec![
                            panthor::sync_op(false, gate),
                            panthor::timeline_op(true, timeline, p),
                        ],
                        ..JobOps::default()
                    })
                    .collect();
                panthor::group_submit_ops(dev, group, &jobs)
                    .or_else(errno("GROUP_SUBMIT"))
                    .map_err(|e| format!("group {g} queue {q}: {e}"))?;
            }
        }
        Ok::<_, String>(())
    })();
    let points = last_point();
    if !r.check(
        &format!("GROUP_SUBMIT of {points} jobs behind the gate, each signalling its own point of one timeline"),
        submitted,
    ) {
        return;
    }
    let done = match dev.syncobj_create(0) {
        Ok(d) => d,
        Err(e) => return r.fail("SYNCOBJ_CREATE", e),
    };
    let mut syncs = vec![panthor::timeline_op(false, timeline, points); MAX_SYNCS - 1];
    syncs.push(panthor::sync_op(true, done));
    let many_waits = JobOps {
        queue: 0,
        syncs,
        ..JobOps::default()
    };
    let pending = dev.syncobj_query(timeline);
    r.note(format!(
        "the job with 63 waits is submitted {:.0} ms after the gate",
        gated.elapsed().as_secs_f64() * 1e3
    ));
    let waits_ok = r.check(
        &format!(
            "GROUP_SUBMIT of a job with 63 wait ops on point {points} (and a signal) succeeds"
        ),
        panthor::group_submit_ops(dev, groups[0], &[many_waits]).or_else(errno("GROUP_SUBMIT")),
    );
    r.check(
        &format!("point {points} had not signalled when that job was submitted (SYNCOBJ_QUERY)"),
        match pending {
            Ok(p) if p < points => Ok(()),
            Ok(p) => Err(format!(
                "the last signalled point was {p}: jobs went past the gate before the CPU released it"
            )),
            Err(e) => Err(format!("SYNCOBJ_QUERY: {e}")),
        },
    );
    // Queue 0 of the first group now holds 64 jobs, queue 1 holds 63.
    let busy = (|| {
        let half = dev.syncobj_create(0).or_else(errno("SYNCOBJ_CREATE"))?;
        let jobs = [
            JobOps {
                queue: 1,
                syncs: vec![panthor::sync_op(true, half)],
                ..JobOps::default()
            },
            JobOps {
                queue: 0,
                ..JobOps::default()
            },
        ];
        expect_errnos(
            panthor::group_submit_ops(dev, groups[0], &jobs),
            &[libc::EBUSY],
        )?;
        no_fence(dev, half)
    })();
    r.check(
        "GROUP_SUBMIT of a job for a queue with room and one for a full queue (64 pending) fails \
         with EBUSY, neither submitted",
        if waits_ok {
            busy
        } else {
            Err("the queue is not full".into())
        },
    );
    // Everything is in: the CPU releases the gate.
    c.data.map.write_u64(GATE_WORD as usize / 8, 1);
    if waits_ok {
        let completed = wait(dev, done);
        r.note(format!(
            "the job waiting on point {points} signalled {:.0} ms after the gate was submitted",
            gated.elapsed().as_secs_f64() * 1e3
        ));
        r.check(
            "the job waiting on the last point completes after the gate (status 1)",
            completed.and_then(|_| match fence_status(dev, done)? {
                FenceStatus::Signalled => Ok(()),
                s => Err(format!("its fence: {s}")),
            }),
        );
    }
    let mut all = groups.clone();
    all.push(gate_group);
    r.check(
        "the gate's group and the 4 groups report no fault and no timeout",
        all.iter()
            .try_for_each(|&g| match panthor::group_state(dev, g) {
                Ok((0, 0)) => Ok(()),
                Ok((s, q)) => Err(format!("group {g}: state {s:#x}, fatal queues {q:#x}")),
                Err(e) => Err(format!("GROUP_GET_STATE of {g}: {e}")),
            }),
    );
    r.check(
        "after the timeline attack a probe job stores its word",
        c.probe(dev),
    );
}

/// Where the sparse map goes in a VM of `va_bits` address bits, if it fits in the user half.
fn sparse_va(va_bits: u32) -> Option<u64> {
    let va = 1u64.checked_shl(va_bits.checked_sub(2)?)?;
    (va + SPARSE_SIZE <= 1u64.checked_shl(va_bits - 1)? * 2 - (1 << 32)).then_some(va)
}

/// Part 6: a 128 TiB sparse map on a VM of the client's own.
fn sparse<W: Write>(r: &mut Report<W>, dev: &Arc<Drm>, c: &mut Client) {
    const CHECK: &str = "VM_BIND MAP_SPARSE of 128 TiB returns 0 or ENOMEM within 10 s";
    let va_bits = match panthor::dev_query::<GpuInfo>(dev, DRM_PANTHOR_DEV_QUERY_GPU_INFO) {
        Ok(i) => i.mmu_features & 0xff,
        Err(e) => return r.fail(CHECK, format!("DEV_QUERY GPU_INFO: {e}")),
    };
    let Some(va) = sparse_va(va_bits) else {
        return r.fail(CHECK, format!("{va_bits} VA bits: 128 TiB does not fit"));
    };
    let vm = match panthor::vm_create(dev) {
        Ok(vm) => vm,
        Err(e) => return r.fail(CHECK, format!("VM_CREATE: {e}")),
    };
    let (tx, rx) = mpsc::channel();
    let d = Arc::clone(dev);
    let t = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("sparse".into())
        .spawn(move || {
            let op = VmBindOp {
                flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP
                    | DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE
                    | DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
                va,
                size: SPARSE_SIZE,
                ..panthor::unmap_op(0, 0)
            };
            let _ = tx.send(panthor::vm_bind(&d, vm, 0, &[op], &[]));
        });
    if let Err(e) = spawned {
        return r.fail(CHECK, format!("cannot start a thread: {e}"));
    }
    match rx.recv_timeout(SPARSE_LIMIT) {
        Ok(got) => {
            r.note(format!(
                "the sparse bind at {va:#x} returned {} after {:.0} ms",
                match &got {
                    Ok(()) => "0".to_string(),
                    Err(e) => e.to_string(),
                },
                t.elapsed().as_secs_f64() * 1e3
            ));
            r.check(CHECK, expect_errnos(got, &[0, libc::ENOMEM]));
        }
        Err(_) => r.fail(CHECK, "no return within 10 s (the thread is left blocked)"),
    }
    // Also when the sparse bind has not returned: whether it holds up the client's other VMs.
    const AFTER: &str =
        "after the sparse bind a VM_BIND (map, then unmap) on another VM succeeds within 10 s";
    let (tx, rx) = mpsc::channel();
    let (d, vm1, code) = (Arc::clone(dev), c.vm, c.code.handle);
    let spawned = std::thread::Builder::new()
        .name("bind".into())
        .spawn(move || {
            let map = [panthor::map_op(code, 0x300_0000, BO_SIZE)];
            let unmap = [panthor::unmap_op(0x300_0000, BO_SIZE)];
            let got = panthor::vm_bind(&d, vm1, 0, &map, &[])
                .and_then(|()| panthor::vm_bind(&d, vm1, 0, &unmap, &[]));
            let _ = tx.send(got);
        });
    if let Err(e) = spawned {
        return r.fail(AFTER, format!("cannot start a thread: {e}"));
    }
    match rx.recv_timeout(SPARSE_LIMIT) {
        Ok(got) => {
            if r.check(AFTER, got.or_else(errno("VM_BIND"))) {
                r.check(
                    "after the sparse bind a probe job stores its word",
                    c.probe(dev),
                );
            }
        }
        Err(_) => r.fail(AFTER, "no return within 10 s (the thread is left blocked)"),
    }
}

/// Part 5: a file closed while a thread waits on a job of it.
fn close_mid_wait<W: Write>(r: &mut Report<W>, dev: &Drm, c: &mut Client) {
    const SETUP: &str = "a second file: a job that will not finish soon (the gate's stream), a \
                         thread waiting on it";
    let set_up = (|| {
        let d2 = Drm::open(drm::RENDER_NODE).or_else(errno("open"))?;
        let c2 = Client::new(&d2)?;
        write_stream(
            &c2.code,
            NOP_BLOCK,
            &vec![instr::nop(); NOP_BYTES as usize / 8],
        );
        let stuck = c2.submit(&d2, c2.group, 0, GATE_STREAM, &gate_stream())?;
        Ok::<_, String>((d2, c2, stuck))
    })();
    let (d2, c2, stuck) = match set_up {
        Ok(v) => v,
        Err(e) => return r.fail(SETUP, e),
    };
    let fd: RawFd = d2.file().as_raw_fd();
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("waiter".into())
        .spawn(move || {
            // SAFETY: `fd` is the second file's descriptor; the `File` made here is never dropped
            // (the main thread closes the descriptor), and only used for the one ioctl, which
            // fails with `EBADF` if the close came first.
            let file = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
            let t = Instant::now();
            let got = drm::syncobj_wait(&file, &[stuck], drm::SYNCOBJ_WAIT_ALL, CLOSE_WAIT_NS);
            let _ = tx.send((got, t.elapsed()));
        });
    if let Err(e) = spawned {
        return r.fail(SETUP, format!("cannot start a thread: {e}"));
    }
    r.ok(SETUP);
    // Let the thread get into the wait.
    std::thread::sleep(Duration::from_millis(100));
    let Client { code, data, .. } = c2;
    let closed = code
        .map
        .unmap()
        .and_then(|()| data.map.unmap())
        .and_then(|()| d2.close());
    r.check(
        "the mappings are unmapped and the file closed while the thread waits",
        closed.or_else(errno("munmap/close")),
    );
    match rx.recv_timeout(CLOSE_JOIN) {
        Ok((got, took)) => {
            r.note(format!(
                "the wait returned {} after {:.0} ms",
                match got {
                    Ok(v) => v.to_string(),
                    Err(e) => e.to_string(),
                },
                took.as_secs_f64() * 1e3
            ));
            r.ok("the wait on the closed file's job returns");
            r.check(
                "the thread was still waiting when the file was closed (its wait took over 100 ms)",
                if took > Duration::from_millis(100) {
                    Ok(())
                } else {
                    Err(format!(
                        "the wait returned after {took:?}, before the close"
                    ))
                },
            );
        }
        Err(_) => r.fail(
            "the wait on the closed file's job returns",
            "no return within 30 s",
        ),
    }
    r.check(
        "after the close a new open of the render node creates a VM",
        Drm::open(drm::RENDER_NODE)
            .and_then(|d| panthor::vm_create(&d).map(|_| ()))
            .or_else(errno("open/VM_CREATE")),
    );
    r.check("after the close a probe job stores its word", c.probe(dev));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_points_are_distinct_and_in_order() {
        let mut all = Vec::new();
        for g in 0..TIMELINE_GROUPS {
            for q in 0..2 {
                let points = timeline_points(g, q);
                assert_eq!(points.clone().count(), POINTS_PER_QUEUE as usize);
                all.extend(points);
            }
        }
        let want: Vec<u64> = (1..=last_point()).collect();
        assert_eq!(all, want);
        assert_eq!(last_point(), 504);
    }

    #[test]
    fn errno_sets() {
        assert_eq!(expect_errnos::<()>(Ok(()), &[0, libc::ENOMEM]), Ok(()));
        assert_eq!(
            expect_errnos::<()>(Err(Errno(libc::ENOMEM)), &[0, libc::ENOMEM]),
            Ok(())
        );
        let e = expect_errnos::<()>(Err(Errno(libc::EINVAL)), &[0, libc::ENOMEM]).unwrap_err();
        assert!(e.starts_with("expected 0 or ENOMEM"), "{e}");
        assert!(expect_errnos(Ok(3), &[libc::EBUSY])
            .unwrap_err()
            .contains("got success (3)"));
    }

    #[test]
    fn sparse_range_fits_the_user_half() {
        assert_eq!(sparse_va(48), Some(1 << 46));
        assert_eq!(sparse_va(40), None);
        assert_eq!(sparse_va(1), None);
    }

    #[test]
    fn probe_streams_and_words() {
        assert_ne!(probe_value(0), probe_value(1));
        assert_eq!(store_stream(8, 5).len(), 3);
        let gate = gate_stream();
        assert_eq!(gate.len(), 2 + GATE_CALLS);
        assert_eq!(gate[2], instr::call(4, 6));
        assert_eq!(gate[GATE_CALLS + 1], instr::call(4, 6));
        assert!((GATE_STREAM + 8 * gate.len() as u64) <= CPU_GATE_STREAM);
        assert!((CPU_GATE_STREAM + 8 * cpu_gate_stream().len() as u64) <= CODE_SIZE);
    }

    #[test]
    fn without_the_device_the_program_fails_cleanly() {
        if std::path::Path::new(drm::RENDER_NODE).exists() {
            return;
        }
        let mut r = Report::new(PROGRAM, Vec::new());
        checks(&mut r);
        assert_eq!((r.passed(), r.failed()), (0, 1));
    }
}
