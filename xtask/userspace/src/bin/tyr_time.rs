// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `/init` of the test VM that checks the Tyr driver's time against the kernel's
//! (`gpukit_tyr`, booted with `gpukit.boot=tyr`), through `/dev/dri/renderD128`:
//!
//! 1. **A CPU release**: a job whose stream waits (`SYNC_WAIT32`) for a word of a mapped BO
//!    that this program sets 2 s later (through its mapping) is still pending just before,
//!    completes once the word is set, its group stays alive (`GROUP_GET_STATE` 0) and the
//!    next submission to it runs. The simulated GPU's time never jumps to the job timeout
//!    while it waits: the driver's deadlines are on `ktime_get`.
//! 2. **No progress**: a job waiting for a word nobody sets fails with `ETIMEDOUT` after
//!    panthor's 5 s of real time (`CLOCK_MONOTONIC`), not before; its group reads
//!    `TIMEDOUT` and refuses the next submission with `EINVAL`. QEMU's TCG makes the rest
//!    slow, never the timeout early.
//! 3. **CPU timestamps**: `DEV_QUERY(TIMESTAMP_INFO)` with `CPU_MONOTONIC` (and
//!    `CPU_MONOTONIC_RAW`) returns a time between two `clock_gettime` readings of that clock
//!    taken around the call.

use std::io::Write;
use std::time::{Duration, Instant};

use gpukit_userspace_tests::drm::{self, Drm};
use gpukit_userspace_tests::init;
use gpukit_userspace_tests::panthor::{self, Job};
use gpukit_userspace_tests::report::Report;
use gpukit_userspace_tests::sync_file::{self, FenceStatus};
use gpukit_userspace_tests::sys::{self, Errno, Mapping};
use tyr::csf::instr;
use tyr::uapi::*;

/// The name in the check lines.
const PROGRAM: &str = "tyr_time";

const CODE_VA: u64 = 0x100_0000;
const DATA_VA: u64 = 0x4000_0000;
const BO_SIZE: u64 = 0x1_0000;
/// Data offsets: the word a stream waits for, and where it stores after.
const FLAG: u64 = 0x100;
const OUT: u64 = 0x200;
/// Panthor's `JOB_TIMEOUT_MS`.
const JOB_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a wait may take before the check fails (TCG is slow).
const WAIT_NS: i64 = 120_000_000_000;

fn main() {
    init::run(PROGRAM, checks)
}

/// A buffer object and its CPU mapping.
struct Bo {
    handle: u32,
    map: Mapping,
}

fn errno<T>(what: &'static str) -> impl Fn(Errno) -> Result<T, String> {
    move |e| Err(format!("{what}: {e}"))
}

fn bo_mapped(dev: &Drm, size: u64) -> Result<Bo, String> {
    let (handle, _) = panthor::bo_create(dev, size).or_else(errno("BO_CREATE"))?;
    let offset = panthor::bo_mmap_offset(dev, handle).or_else(errno("BO_MMAP_OFFSET"))?;
    let map = Mapping::shared(dev.file(), size as usize, offset).or_else(errno("mmap"))?;
    Ok(Bo { handle, map })
}

/// A VM with a code and a data BO bound, and a one-queue group on it.
struct Client {
    code: Bo,
    data: Bo,
    group: u32,
}

impl Client {
    fn new(dev: &Drm) -> Result<Self, String> {
        let vm = panthor::vm_create(dev).or_else(errno("VM_CREATE"))?;
        let code = bo_mapped(dev, BO_SIZE)?;
        let data = bo_mapped(dev, BO_SIZE)?;
        let ops = [
            panthor::map_op(code.handle, CODE_VA, BO_SIZE),
            panthor::map_op(data.handle, DATA_VA, BO_SIZE),
        ];
        panthor::vm_bind(dev, vm, 0, &ops, &[]).or_else(errno("VM_BIND"))?;
        let group = panthor::group_create(dev, vm, &[0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM)
            .or_else(errno("GROUP_CREATE"))?;
        Ok(Client { code, data, group })
    }

    /// Submits `prog`, written at `at` in the code BO; the syncobj it signals.
    fn submit(&self, dev: &Drm, at: u64, prog: &[u64]) -> Result<u32, Errno> {
        for (i, word) in prog.iter().enumerate() {
            self.code.map.write_u64(at as usize / 8 + i, *word);
        }
        let done = dev.syncobj_create(0)?;
        let job = Job {
            queue: 0,
            addr: CODE_VA + at,
            size: 8 * prog.len() as u32,
            waits: vec![],
            signals: vec![done],
        };
        panthor::group_submit(dev, self.group, &[job])?;
        Ok(done)
    }

    /// A job that waits until the word at `FLAG` exceeds 0, then stores 0x600d at `OUT`.
    fn submit_blocked(&self, dev: &Drm) -> Result<u32, String> {
        let prog = [
            instr::move48(0, DATA_VA + FLAG),
            instr::move32(2, 0),
            instr::sync_wait32(instr::Condition::Greater, 0, 2),
            instr::move48(4, DATA_VA + OUT),
            instr::move32(6, 0x600d),
            instr::store_multiple(6, 4, 0, 1),
        ];
        self.submit(dev, 0, &prog).or_else(errno("GROUP_SUBMIT"))
    }

    /// A job that stores 7 at `OUT + 8`.
    fn submit_next(&self, dev: &Drm) -> Result<u32, Errno> {
        let prog = [
            instr::move48(0, DATA_VA + OUT + 8),
            instr::move32(2, 7),
            instr::store_multiple(2, 0, 0, 1),
        ];
        self.submit(dev, 0x1000, &prog)
    }
}

fn wait(dev: &Drm, syncobj: u32) -> Result<(), String> {
    dev.syncobj_wait(&[syncobj], drm::SYNCOBJ_WAIT_ALL, WAIT_NS)
        .map(|_| ())
        .or_else(errno("SYNCOBJ_WAIT"))
}

fn fence_status(dev: &Drm, syncobj: u32) -> Result<FenceStatus, String> {
    let file = dev
        .syncobj_export_sync_file(syncobj)
        .or_else(errno("SYNCOBJ_HANDLE_TO_FD (EXPORT_SYNC_FILE)"))?;
    let status = sync_file::status(&file);
    sys::close(file).or_else(errno("close of the sync file"))?;
    status
}

fn checks<W: Write>(r: &mut Report<W>) {
    let dev = match Drm::open(drm::RENDER_NODE) {
        Ok(dev) => {
            r.ok("open /dev/dri/renderD128");
            dev
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
        Ok(v) => return r.note(format!("driver {}, not panthor: nothing to time", v.name)),
        Err(e) => return r.fail("VERSION", e),
    }
    r.check(
        "a SYNC_WAIT32 released by the CPU 2 s later completes; the group lives on",
        cpu_release(&dev),
    );
    r.check(
        "a job that never progresses times out after 5 s of real time, not before",
        no_progress(&dev),
    );
    r.check(
        "TIMESTAMP_INFO's CPU timestamps are CLOCK_MONOTONIC and CLOCK_MONOTONIC_RAW",
        cpu_timestamps(&dev),
    );
}

/// Part 1.
fn cpu_release(dev: &Drm) -> Result<(), String> {
    let c = Client::new(dev)?;
    let done = c.submit_blocked(dev)?;
    // This thread sets the word 2 s after the submission; just before, the job is pending.
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    match fence_status(dev, done)? {
        FenceStatus::Pending => {}
        s => return Err(format!("before the release the job's fence was {s}")),
    }
    std::thread::sleep(Duration::from_secs(2).saturating_sub(t0.elapsed()));
    c.data.map.write_u32(FLAG as usize / 4, 1);
    let set_at = Instant::now();
    wait(dev, done)?;
    let seen = set_at.elapsed();
    match fence_status(dev, done)? {
        FenceStatus::Signalled => {}
        s => return Err(format!("the released job's fence: {s} ({seen:?} after the write)")),
    }
    let out = c.data.map.read_u32(OUT as usize / 4);
    if out != 0x600d {
        return Err(format!("the released job stored {out:#x}, not 0x600d"));
    }
    let state = panthor::group_state(dev, c.group).or_else(errno("GROUP_GET_STATE"))?;
    if state != (0, 0) {
        return Err(format!("the group's state is {state:?}, not (0, 0)"));
    }
    let next = c.submit_next(dev).or_else(errno("the next GROUP_SUBMIT"))?;
    wait(dev, next)?;
    match fence_status(dev, next)? {
        FenceStatus::Signalled if c.data.map.read_u32((OUT + 8) as usize / 4) == 7 => Ok(()),
        s => Err(format!("the next job: fence {s}")),
    }
}

/// Part 2.
fn no_progress(dev: &Drm) -> Result<(), String> {
    let c = Client::new(dev)?;
    let t0 = Instant::now();
    let done = c.submit_blocked(dev)?;
    wait(dev, done)?;
    let took = t0.elapsed();
    if took < JOB_TIMEOUT {
        return Err(format!("the job ended after {took:?}, before 5 s"));
    }
    match fence_status(dev, done)? {
        FenceStatus::Error(Errno(libc::ETIMEDOUT)) => {}
        s => return Err(format!("the job's fence after {took:?}: {s}, not ETIMEDOUT")),
    }
    let (state, _) = panthor::group_state(dev, c.group).or_else(errno("GROUP_GET_STATE"))?;
    if state & DRM_PANTHOR_GROUP_STATE_TIMEDOUT == 0 {
        return Err(format!("the group's state is {state:#x}, not TIMEDOUT"));
    }
    match c.submit_next(dev) {
        Err(Errno(libc::EINVAL)) => Ok(()),
        Err(e) => Err(format!("the next submission gave {e}, not EINVAL")),
        Ok(_) => Err("the timed-out group took a submission".into()),
    }
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call.
    unsafe { libc::clock_gettime(id, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Part 3.
fn cpu_timestamps(dev: &Drm) -> Result<(), String> {
    for (flag, id, name) in [
        (
            DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC,
            libc::CLOCK_MONOTONIC,
            "MONOTONIC",
        ),
        (
            DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC_RAW,
            libc::CLOCK_MONOTONIC_RAW,
            "MONOTONIC_RAW",
        ),
    ] {
        let mut info = TimestampInfo {
            flags: DRM_PANTHOR_TIMESTAMP_GPU | flag,
            ..TimestampInfo::default()
        };
        let before = clock(id);
        let mut q = DevQuery {
            type_: DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
            size: core::mem::size_of::<TimestampInfo>() as u32,
            pointer: &mut info as *mut TimestampInfo as u64,
        };
        // SAFETY: `pointer` is `info`, valid for reads and writes of `size` bytes during the
        // call and referenced nowhere else; `TimestampInfo` takes any bytes.
        unsafe { dev.ioctl_with_pointers(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q) }
            .or_else(errno("DEV_QUERY(TIMESTAMP_INFO)"))?;
        let after = clock(id);
        let cpu = Duration::new(info.cpu_timestamp_sec, info.cpu_timestamp_nsec as u32);
        if !(before <= cpu && cpu <= after) {
            return Err(format!("{name}: {cpu:?} not within {before:?}..{after:?}"));
        }
    }
    Ok(())
}
