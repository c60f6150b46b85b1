// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Time as on silicon, on the default host backend (real time, `HostTime::Real`): a stream
//! blocked on a word the CPU sets seconds later is not timed out meanwhile and goes on once
//! it is set; a stream that never makes progress times out after panthor's 5 s of wall time,
//! not before; the simulated GPU's time never runs ahead of real time; `TIMESTAMP_INFO`'s CPU
//! timestamps are the host's `CLOCK_MONOTONIC` and `CLOCK_MONOTONIC_RAW`.

mod driver_common;

use std::time::{Duration, Instant};

use driver_common::{errno, fence_status};

use drm_ctx::device;
use drm_ctx::drm::Registration;
use drm_ctx::types::ARef;
use tyr::csf::instr;
use tyr::driver::{self, TyrDriver};
use tyr::host::HostBackend;
use tyr::sched::JOB_TIMEOUT;
use tyr::uapi::*;
use tyr::umd::{Bo, Job, Umd};

const EINVAL: i32 = -22;
const ETIMEDOUT: i32 = -110;
const MINUTE: i64 = 60_000_000_000;

type Drv = TyrDriver<HostBackend>;

struct Rig {
    reg: Registration<Drv>,
    _parent: ARef<device::Device>,
    made: Instant,
}

/// The driver on the default backend: `HostBackend::g610()`, on real time.
fn rig() -> Rig {
    let made = Instant::now();
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::g610()).unwrap();
    Rig {
        reg,
        _parent: parent,
        made,
    }
}

impl Rig {
    /// Checks that the simulated GPU's time is not ahead of the real time since the backend
    /// was made (give or take what the probe's poll loops waited for the hardware).
    fn check_pacing(&self) {
        let simulated = Duration::from_nanos(self.reg.device().backend.gpu().now_ns());
        let real = self.made.elapsed();
        assert!(
            simulated <= real + Duration::from_millis(50),
            "simulated time {simulated:?} ran ahead of real time {real:?}"
        );
    }
}

const VA: u64 = 0x100_0000;
/// The word the stream waits for, and where it stores what it read after.
const FLAG: u64 = 0x8000;
const OUT: u64 = 0x8100;

/// A VM with a BO at `VA`, a one-queue group on it, and at offset 0 of the BO a stream that
/// waits (`SYNC_WAIT32`) until the word at `FLAG` exceeds 0, then stores 0x600d at `OUT`.
fn blocked_job(umd: &Umd) -> (u32, Bo, Job) {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, VA).unwrap();
    let group = umd.group_create(vm, &[0x1000]).unwrap();
    let prog = [
        instr::move48(0, VA + FLAG),
        instr::move32(2, 0),
        instr::sync_wait32(instr::Condition::Greater, 0, 2),
        instr::move48(4, VA + OUT),
        instr::move32(6, 0x600d),
        instr::store_multiple(6, 4, 0, 1),
    ];
    umd.write_stream(&bo, 0, &prog).unwrap();
    (group, bo, Job::new(0, VA, (prog.len() * 8) as u32))
}

/// An adding stream at offset 0x2000 of `bo`: a job the group runs after the blocked one.
fn next_job(umd: &Umd, bo: &Bo) -> Job {
    let prog = [
        instr::move48(0, VA + OUT + 8),
        instr::move32(2, 7),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(bo, 0x2000, &prog).unwrap();
    Job::new(0, VA + 0x2000, (prog.len() * 8) as u32)
}

#[test]
#[cfg_attr(miri, ignore = "seconds of real time")]
fn a_stream_blocked_on_a_word_the_cpu_sets_two_seconds_later_completes() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let (group, bo, job) = blocked_job(&umd);
    let done = umd.syncobj_create(false).unwrap();
    umd.submit(group, &[job.signal(done)]).unwrap();
    // Another CPU thread sets the word 2 s later; the job waits for it, not timed out.
    let setter = std::thread::scope(|s| {
        let t = s.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            bo.write(FLAG, &1u32.to_le_bytes()).unwrap();
            Instant::now()
        });
        // Meanwhile the job is blocked on the GPU, nothing more.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(fence_status(&umd, done), None);
        assert_eq!(bo.read_u32(OUT).unwrap(), 0);
        t.join().unwrap()
    });
    umd.wait(&[done], MINUTE).unwrap();
    let seen = setter.elapsed();
    assert_eq!(fence_status(&umd, done), Some(0));
    assert_eq!(bo.read_u32(OUT).unwrap(), 0x600d);
    // The release was seen within the simulated firmware's poll of sync waits (1 ms), give
    // or take the host's scheduling.
    assert!(
        seen < Duration::from_secs(1),
        "the write was seen {seen:?} late"
    );
    // The group is alive: no timeout, no fault, and its next submission runs.
    assert_eq!(umd.group_state(group).unwrap(), (0, 0));
    let next = umd.syncobj_create(false).unwrap();
    umd.submit(group, &[next_job(&umd, &bo).signal(next)])
        .unwrap();
    umd.wait(&[next], MINUTE).unwrap();
    assert_eq!(fence_status(&umd, next), Some(0));
    assert_eq!(bo.read_u32(OUT + 8).unwrap(), 7);
    r.check_pacing();
}

#[test]
#[cfg_attr(miri, ignore = "seconds of real time")]
fn a_stream_that_never_makes_progress_times_out_after_five_seconds_of_wall_time() {
    assert_eq!(
        JOB_TIMEOUT,
        Duration::from_secs(5),
        "panthor's JOB_TIMEOUT_MS"
    );
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let (group, bo, job) = blocked_job(&umd);
    let done = umd.syncobj_create(false).unwrap();
    let t0 = Instant::now();
    umd.submit(group, &[job.signal(done)]).unwrap();
    umd.wait(&[done], MINUTE).unwrap();
    let took = t0.elapsed();
    assert!(took >= JOB_TIMEOUT, "timed out after {took:?}, before 5 s");
    assert!(took < JOB_TIMEOUT * 3, "timed out only after {took:?}");
    // As panthor reports it: the job fails with ETIMEDOUT, the group is marked timed out and
    // refuses new work with EINVAL.
    assert_eq!(fence_status(&umd, done), Some(ETIMEDOUT));
    assert_eq!(bo.read_u32(OUT).unwrap(), 0);
    let (state, fatal) = umd.group_state(group).unwrap();
    assert_eq!(
        state & DRM_PANTHOR_GROUP_STATE_TIMEDOUT,
        DRM_PANTHOR_GROUP_STATE_TIMEDOUT
    );
    assert_eq!(fatal, 0);
    assert_eq!(errno(umd.submit(group, &[next_job(&umd, &bo)])), EINVAL);
    r.check_pacing();
}

/// The CPU clock `id` as userspace reads it.
fn clock_gettime(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call.
    assert_eq!(unsafe { libc::clock_gettime(id, &mut ts) }, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
#[cfg_attr(miri, ignore = "CLOCK_MONOTONIC_RAW")]
fn timestamp_info_reads_the_cpu_clocks_userspace_reads() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let hz = umd
        .dev_query::<TimestampInfo>(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO)
        .unwrap()
        .timestamp_frequency;
    assert!(hz > 0);
    for (flag, id) in [
        (DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC, libc::CLOCK_MONOTONIC),
        (
            DRM_PANTHOR_TIMESTAMP_CPU_MONOTONIC_RAW,
            libc::CLOCK_MONOTONIC_RAW,
        ),
    ] {
        let flags = DRM_PANTHOR_TIMESTAMP_GPU | flag | DRM_PANTHOR_TIMESTAMP_DURATION;
        let input = TimestampInfo {
            flags,
            ..TimestampInfo::default()
        };
        let before = clock_gettime(id);
        let info = umd
            .dev_query_in(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO, &input)
            .unwrap();
        let after = clock_gettime(id);
        let cpu = Duration::new(info.cpu_timestamp_sec, info.cpu_timestamp_nsec as u32);
        assert!(
            before <= cpu && cpu <= after,
            "flag {flag:#x}: {cpu:?} not within {before:?}..{after:?}"
        );
        assert_eq!(info.flags, flags);
        assert!(u64::from(info.duration_nsec) <= (after - before).as_nanos() as u64);
    }
    // The GPU's timestamp moves with real time: it never runs ahead of it by more than the
    // event thread's lead (0.5 ms; the first sample may have been taken just before a step,
    // the second just after one). The GPU stays powered for this: a power-down and the
    // wake the second query would need run the driver's poll loops, whose sleeps move
    // simulated time without real time passing (by milliseconds: see `HostTime`).
    let pm = &r.reg.device().shared().pm;
    pm.set_idle_timeout(Duration::from_secs(3600));
    let first = umd
        .dev_query::<TimestampInfo>(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO)
        .unwrap()
        .current_timestamp;
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    let second = umd
        .dev_query::<TimestampInfo>(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO)
        .unwrap()
        .current_timestamp;
    let gpu = Duration::from_nanos((second - first) * 1_000_000_000 / hz);
    assert!(
        gpu <= t.elapsed() + Duration::from_micros(500),
        "{gpu:?} of GPU time in {:?}",
        t.elapsed()
    );
    r.check_pacing();
}
