// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Counters and power, through the ioctl layer: jobs that store the GPU timestamp and cycle
//! counters (uAPI 1.6's `GLB_COUNTER_EN`), and the GPU's power state around the work.

use drm_ctx::device;
use drm_ctx::drm::Registration;
use drm_ctx::types::ARef;
use mali_sim::{Config, Domain};
use tyr::csf::instr;
use tyr::driver::{self, TyrDriver};
use tyr::host::HostBackend;
use tyr::uapi::*;
use tyr::umd::{Bo, Job, TilerHeap, Umd};

const WAIT: i64 = 600_000_000_000;

type Drv = TyrDriver<HostBackend>;

struct Rig {
    reg: Registration<Drv>,
    _parent: ARef<device::Device>,
}

fn rig_with(cfg: Config) -> Rig {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
    Rig {
        reg,
        _parent: parent,
    }
}

fn rig() -> Rig {
    rig_with(Config::g610())
}

/// A VM with one BO mapped at `VA`: code at offset 0, data at `DATA`.
struct Space {
    vm: u32,
    bo: Bo,
}

const VA: u64 = 0x100_0000;
const DATA: u64 = 0x8000;
/// Where tiling passes write their tiler and heap descriptors.
const DESC: u64 = 0xf000;
/// Where the governor test maps its block of NOPs.
const NOPS: u64 = 0x200_0000;

fn space(umd: &Umd) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, VA).unwrap();
    Space { vm, bo }
}

/// A stream at `code` storing the timestamp at `data` and the cycle count at `data + 8`.
fn counter_stream(umd: &Umd, s: &Space, code: u64, data: u64) -> (u64, u32) {
    let prog = [
        instr::move48(0, VA + data),
        instr::store_state(0, instr::STATE_TIMESTAMP, 0),
        instr::store_state(0, instr::STATE_CYCLE_COUNT, 8),
    ];
    umd.write_stream(&s.bo, code, &prog).unwrap();
    (VA + code, (prog.len() * 8) as u32)
}

fn timestamp_info(umd: &Umd) -> TimestampInfo {
    umd.dev_query::<TimestampInfo>(DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO)
        .unwrap()
}

#[test]
fn jobs_store_timestamps_consistent_with_dev_query() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let before = timestamp_info(&umd);
    assert_eq!(before.timestamp_frequency, 24_000_000);
    let mut stamps = Vec::new();
    for i in 0..4u64 {
        let (addr, size) = counter_stream(&umd, &s, i * 64, DATA + i * 16);
        let done = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, addr, size).signal(done)])
            .unwrap();
        umd.wait(&[done], WAIT).unwrap();
        let ts = s.bo.read_u64(DATA + i * 16).unwrap();
        let cycles = s.bo.read_u64(DATA + i * 16 + 8).unwrap();
        stamps.push((ts, cycles));
    }
    let after = timestamp_info(&umd);
    let mut last = (before.current_timestamp, 0);
    for (i, &(ts, cycles)) in stamps.iter().enumerate() {
        assert_ne!(ts, 0, "job {i}: no timestamp (COUNTER_EN not enabled?)");
        assert_ne!(cycles, 0, "job {i}: no cycle count");
        assert!(ts > last.0, "job {i}: timestamp {ts} not after {}", last.0);
        assert!(
            cycles > last.1,
            "job {i}: cycles {cycles} not after {}",
            last.1
        );
        last = (ts, cycles);
    }
    assert!(
        last.0 <= after.current_timestamp,
        "a job's timestamp {} is after DEV_QUERY's {}",
        last.0,
        after.current_timestamp
    );
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
}

/// The simulated GPU's power state: L2, shader cores, tiler ready masks and `MCU_STATUS`.
fn power_state(r: &Rig) -> (u64, u64, u64, u32) {
    r.reg.device().backend.gpu().with(|g| {
        (
            g.power_ready(Domain::L2),
            g.power_ready(Domain::Shader),
            g.power_ready(Domain::Tiler),
            g.read32(mali_sim::regs::MCU_STATUS),
        )
    })
}

fn power_faults(r: &Rig) -> u32 {
    r.reg.device().backend.gpu().with(|g| g.power_faults())
}

/// Waits (in real time; the event thread moves simulated time to the idle deadline) until the
/// driver says the GPU is powered `on`.
fn wait_powered(r: &Rig, on: bool) {
    let pm = &r.reg.device().shared().pm;
    for _ in 0..5000 {
        if pm.is_powered() == on {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("the GPU never became powered {on}");
}

/// One job: store the counters at `data`, then tile `words` words into `heap`.
fn counters_and_tiling(umd: &Umd, s: &Space, code: u64, data: u64, heap: &TilerHeap) -> (u64, u32) {
    let mut prog = vec![
        instr::move48(0, VA + data),
        instr::store_state(0, instr::STATE_TIMESTAMP, 0),
        instr::store_state(0, instr::STATE_CYCLE_COUNT, 8),
    ];
    prog.extend_from_slice(&heap.tile(VA + DESC, 4, 0x1000 + code));
    umd.write_stream(&s.bo, code, &prog).unwrap();
    (VA + code, (prog.len() * 8) as u32)
}

#[test]
fn an_idle_gpu_powers_down_and_a_submission_wakes_it() {
    let r = rig();
    let pm = &r.reg.device().shared().pm;
    pm.set_idle_timeout(std::time::Duration::from_millis(1));
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let heap = umd.tiler_heap_create(s.vm, 1, 128 << 10, 4, 0).unwrap();
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let mut stamps = Vec::new();
    for round in 0..3u64 {
        let (addr, size) = counters_and_tiling(&umd, &s, round * 256, DATA + round * 16, &heap);
        let done = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, addr, size).signal(done)])
            .unwrap();
        umd.wait(&[done], WAIT).unwrap();
        assert_eq!(
            umd.group_state(g).unwrap(),
            (0, 0),
            "round {round}: the job failed"
        );
        stamps.push(s.bo.read_u64(DATA + round * 16).unwrap());
        // Nothing more to do: after the idle timeout, the MCU is disabled and every domain off.
        wait_powered(&r, false);
        assert_eq!(power_state(&r), (0, 0, 0, mali_sim::regs::mcu::DISABLED));
    }
    // At least once per round (the GPU may also have gone down before the first submission),
    // and it ends down.
    let stats = pm.stats(std::time::Duration::ZERO);
    assert!(stats.power_ups >= 2, "{stats:?}");
    assert_eq!(stats.power_downs, stats.power_ups + 1, "{stats:?}");
    // Every job ran, counters enabled after every cold boot, time moving on.
    assert!(
        stamps.windows(2).all(|w| w[0] != 0 && w[0] < w[1]),
        "{stamps:?}"
    );
    assert_eq!(
        power_faults(&r),
        0,
        "the driver powered the GPU in the wrong order"
    );
    umd.tiler_heap_destroy(&heap).unwrap();
}

/// A stream storing the timestamp at `data`.
fn stamp_stream(umd: &Umd, s: &Space, code: u64, data: u64) -> (u64, u32) {
    let prog = [
        instr::move48(0, VA + data),
        instr::store_state(0, instr::STATE_TIMESTAMP, 0),
    ];
    umd.write_stream(&s.bo, code, &prog).unwrap();
    (VA + code, (prog.len() * 8) as u32)
}

fn fence_status(umd: &Umd, h: u32) -> Option<i32> {
    let f = umd.client().file().syncobjs().fence(h).unwrap()?;
    f.status().map(|r| r.err().unwrap_or(0))
}

/// Submits `n` chained jobs (alternating queues, each after the one before) storing
/// timestamps from `slot` on; returns their syncobjs.
fn chain(umd: &Umd, s: &Space, g: u32, slot: u64, n: u64, after: Option<u32>) -> Vec<u32> {
    let mut done: Vec<u32> = Vec::new();
    for i in slot..slot + n {
        let (addr, size) = stamp_stream(umd, s, i * 64, DATA + i * 8);
        let d = umd.syncobj_create(false).unwrap();
        let mut job = Job::new((i % 2) as u32, addr, size).signal(d);
        if let Some(prev) = done.last().copied().or(after) {
            job = job.wait(prev);
        }
        if let Err(e) = umd.submit(g, &[job]) {
            panic!("job {i}: {e:?}, group state {:?}", umd.group_state(g));
        }
        done.push(d);
    }
    done
}

#[test]
fn a_suspend_holds_queued_jobs_and_the_resume_runs_them_in_order() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000, 0x1000]).unwrap();
    let first = chain(&umd, &s, g, 0, 1, None);
    umd.wait(&first, WAIT).unwrap();
    driver::suspend(dev).unwrap();
    assert_eq!(
        driver::suspend(dev).map_err(|e| e.to_errno()),
        Err(-16),
        "EBUSY"
    );
    assert_eq!(power_state(&r), (0, 0, 0, mali_sim::regs::mcu::DISABLED));
    // Jobs submitted while the device sleeps: the first reaches its ring and no further, the
    // others wait in their queues for it.
    let pm = &dev.shared().pm;
    let reached = pm.activity();
    let mut done = chain(&umd, &s, g, 1, 4, first.last().copied());
    while pm.activity() == reached {
        std::thread::yield_now();
    }
    assert!(done.iter().all(|d| fence_status(&umd, *d).is_none()));
    assert_eq!(power_state(&r), (0, 0, 0, mali_sim::regs::mcu::DISABLED));
    driver::resume(dev).unwrap();
    assert_eq!(
        driver::resume(dev).map_err(|e| e.to_errno()),
        Err(-22),
        "EINVAL"
    );
    umd.wait(&done, WAIT).unwrap();
    assert!(done.iter().all(|d| fence_status(&umd, *d) == Some(0)));
    // A suspend right behind a submission: whatever had reached the GPU completes first, the
    // rest waits for the resume.
    let more = chain(&umd, &s, g, 5, 6, done.last().copied());
    driver::suspend(dev).unwrap();
    assert_eq!(power_state(&r), (0, 0, 0, mali_sim::regs::mcu::DISABLED));
    driver::resume(dev).unwrap();
    umd.wait(&more, WAIT).unwrap();
    done.extend(more);
    let st: Vec<_> = done.iter().map(|d| fence_status(&umd, *d)).collect();
    assert!(
        st.iter().all(|s| *s == Some(0)),
        "{st:?} {:?}",
        umd.group_state(g)
    );
    // In submission order.
    let stamps: Vec<u64> = (0..11)
        .map(|i| s.bo.read_u64(DATA + i * 8).unwrap())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] != 0 && w[0] < w[1]),
        "{stamps:?}"
    );
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
    assert_eq!(power_faults(&r), 0);
}

/// A suspend whose work item never runs (its executor is stopped) fails with `ETIMEDOUT` after
/// `SUSPEND_START_TIMEOUT` of the system's time, and the device is left running (not
/// suspended). The wait is a wait for the CPU: it sleeps on the system's clock and does not
/// run the simulated GPU ahead while it waits.
#[test]
#[cfg_attr(miri, ignore = "a second of real time")]
fn a_suspend_the_work_item_never_takes_up_times_out_in_system_time() {
    use tyr::backend::Backend as _;
    let r = rig();
    let dev = r.reg.device();
    let shared = dev.shared();
    shared.backend.stop_events();
    let gpu_before = shared.backend.gpu().now_ns();
    let t0 = std::time::Instant::now();
    assert_eq!(
        driver::suspend(dev).map_err(|e| e.to_errno()),
        Err(-110),
        "ETIMEDOUT"
    );
    let waited = t0.elapsed();
    assert!(
        waited >= tyr::pm::SUSPEND_START_TIMEOUT,
        "gave up after {waited:?} of real time"
    );
    assert_eq!(
        shared.backend.gpu().now_ns(),
        gpu_before,
        "the wait moved the GPU's time"
    );
    assert!(!shared.pm.is_suspended());
    assert_eq!(
        driver::resume(dev).map_err(|e| e.to_errno()),
        Err(-22),
        "EINVAL: not suspended"
    );
}

#[test]
fn the_simulator_refuses_a_wrong_power_order_and_passes_the_drivers() {
    let r = rig();
    let dev = r.reg.device();
    let pm = &dev.shared().pm;
    pm.set_idle_timeout(std::time::Duration::from_millis(1));
    wait_powered(&r, false);
    assert_eq!(power_faults(&r), 0, "the driver's power-down");
    // By hand, cores before the L2: refused.
    let gpu = dev.backend.gpu().clone();
    gpu.write64(mali_sim::regs::SHADER_PWRON_LO, 0x5_0005);
    assert_eq!(gpu.with(|g| g.power_faults()), 1);
    assert_eq!(
        gpu.read32(mali_sim::regs::GPU_FAULTSTATUS),
        mali_sim::GPU_POWER_ORDER_FAULT
    );
    assert_eq!(power_state(&r).1, 0);
    // The driver's sequence: no fault.
    let info = dev.shared().gpu_info;
    tyr::gpu::power_on(&dev.backend, &info.raw).unwrap();
    assert_eq!(power_state(&r).0..=power_state(&r).2, 1..=1);
    tyr::gpu::power_off(&dev.backend, &info.raw).unwrap();
    assert_eq!(power_state(&r), (0, 0, 0, mali_sim::regs::mcu::DISABLED));
    assert_eq!(gpu.with(|g| g.power_faults()), 1);
}

/// Waits (spinning: time runs on its own meanwhile) until `f` holds for the driver's power
/// accounting, which is on the clock of the driver's deadlines (real time).
fn wait_stats(r: &Rig, what: &str, f: impl Fn(&tyr::pm::PmStats) -> bool) -> tyr::pm::PmStats {
    use register::io::poll::PollClock as _;
    use tyr::backend::Backend as _;
    let dev = r.reg.device();
    let pm = &dev.shared().pm;
    let clock = dev.backend.timer_clock().clone();
    let start = std::time::Instant::now();
    loop {
        let st = pm.stats(clock.now());
        if f(&st) {
            return st;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{what}: {st:?}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn the_governor_follows_the_load_and_the_counters_stay_consistent() {
    let r = rig();
    let dev = r.reg.device();
    let pm = &dev.shared().pm;
    pm.set_idle_timeout(std::time::Duration::from_secs(3600));
    // The GPU may have gone idle before the timeout changed: the governor only runs while it
    // is powered.
    assert_eq!(
        pm.wake(&dev.backend, &dev.gpu_info, dev.fw.base, || {
            dev.firmware.reload(&dev.backend, false, false)
        }),
        Ok(true)
    );
    let rates = dev.backend.gpu().with(|g| g.config().timings.opp_table);
    let (slow, fast) = (rates[0], rates[rates.len() - 1]);
    let gpu_rate = || dev.backend.gpu().with(|g| g.gpu_clock_hz());
    let _ = fast;
    let umd = Umd::open(dev).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000, 0x1000]).unwrap();
    // Idle: down to the slowest rate.
    wait_stats(&r, "idle lowers the clock", |st| st.clock_hz == slow);
    assert_eq!(gpu_rate(), slow, "the simulated clock follows the governor");
    let (addr, size) = counter_stream(&umd, &s, 0, DATA);
    let d0 = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(0, addr, size).signal(d0)])
        .unwrap();
    umd.wait(&[d0], WAIT).unwrap();
    // Load: one job calling a block of 8192 NOPs 100 times (about 5 ms of GPU time at 16
    // instructions per 100 ns), then storing the counters. No observation from this thread is
    // needed: the governor's accounting keeps the history.
    let nops = umd.bo_create(0x10000).unwrap();
    umd.map(s.vm, &nops, NOPS).unwrap();
    umd.write_stream(&nops, 0, &[instr::nop(); 8192]).unwrap();
    let mut long = Vec::new();
    for _ in 0..100 {
        long.extend([
            instr::move48(10, NOPS),
            instr::move32(12, 0x10000),
            instr::call(10, 12),
        ]);
    }
    long.extend([
        instr::move48(4, VA + DATA + 0x10),
        instr::store_state(4, instr::STATE_TIMESTAMP, 0),
        instr::store_state(4, instr::STATE_CYCLE_COUNT, 8),
    ]);
    umd.write_stream(&s.bo, 0x1000, &long).unwrap();
    let now = || {
        use register::io::poll::PollClock as _;
        use tyr::backend::Backend as _;
        dev.backend.timer_clock().now()
    };
    let before = pm.stats(now());
    let d1 = umd.syncobj_create(false).unwrap();
    umd.submit(
        g,
        &[Job::new(0, VA + 0x1000, (long.len() * 8) as u32).signal(d1)],
    )
    .unwrap();
    umd.wait(&[d1], WAIT).unwrap();
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
    let during = pm.stats(now());
    let at_fast = |st: &tyr::pm::PmStats| st.opp_ns[st.opp_count - 1].1;
    assert!(
        at_fast(&during) > at_fast(&before) + 1_000_000,
        "the load did not raise the clock: {before:?} {during:?}"
    );
    // Idle again: down again.
    let st = wait_stats(&r, "idle lowers the clock again", |st| st.clock_hz == slow);
    assert!(st.clock_changes >= 3, "{st:?}");
    // The counters across the changes: the timestamp follows the fixed 24 MHz counter, the
    // cycles the clock, which ran slow for part of the time and fast for the rest.
    let (ts0, cy0) = (
        s.bo.read_u64(DATA).unwrap(),
        s.bo.read_u64(DATA + 8).unwrap(),
    );
    let (ts1, cy1) = (
        s.bo.read_u64(DATA + 0x10).unwrap(),
        s.bo.read_u64(DATA + 0x18).unwrap(),
    );
    assert!(
        ts0 != 0 && ts1 > ts0 && cy1 > cy0,
        "{ts0} {ts1} {cy0} {cy1}"
    );
    let dt_ns = u128::from(ts1 - ts0) * 1_000_000_000 / 24_000_000;
    let cycles = u128::from(cy1 - cy0);
    let at = |hz: u64| dt_ns * u128::from(hz) / 1_000_000_000;
    assert!(
        cycles > at(slow) && cycles <= at(fast) + u128::from(fast / 24_000_000) + 1,
        "{cycles} cycles in {dt_ns} ns"
    );
    // The time per rate adds up to the powered time.
    let total: u64 = st.opp_ns[..st.opp_count].iter().map(|o| o.1).sum();
    assert!(total.abs_diff(st.powered_ns) < 1_000_000, "{st:?}");
    assert_eq!(power_faults(&r), 0);
}

/// Binds need no power: with the GPU down, VM_BINDs (synchronous, and asynchronous through the
/// VM's bind queue) update the page tables without waking it; the next submission wakes it
/// and its job sees exactly the new mappings — a range remapped to another object while the
/// GPU was down reaches the new object, not a stale translation of the old one.
#[test]
fn binds_while_powered_down_stay_down_and_the_next_job_sees_them() {
    const X: u64 = 0x400_0000;
    let r = rig();
    let pm = &r.reg.device().shared().pm;
    pm.set_idle_timeout(std::time::Duration::from_millis(1));
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let store = |code: u64, value: u32| {
        let prog = [
            instr::move48(0, X),
            instr::move32(2, value),
            instr::store_multiple(2, 0, 0, 1),
        ];
        umd.write_stream(&s.bo, code, &prog).unwrap();
        let done = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, VA + code, 24).signal(done)])
            .unwrap();
        umd.wait(&[done], WAIT).unwrap();
        assert_eq!(
            umd.group_state(g).unwrap(),
            (0, 0),
            "job storing {value:#x}"
        );
    };
    let old = umd.bo_create(0x1000).unwrap();
    let new = umd.bo_create(0x1000).unwrap();
    wait_powered(&r, false);
    let ups = pm.stats(std::time::Duration::ZERO).power_ups;
    umd.map(s.vm, &old, X).unwrap();
    assert!(!pm.is_powered(), "a synchronous bind woke the GPU");
    store(0, 0x01d);
    assert_eq!(old.read_u32(0).unwrap(), 0x01d);
    wait_powered(&r, false);
    // Remapped while down, through the bind queue.
    let unmap = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
        va: X,
        size: 0x1000,
        ..Default::default()
    };
    let map = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        bo_handle: new.handle,
        va: X,
        size: 0x1000,
        ..Default::default()
    };
    let bound = umd.syncobj_create(false).unwrap();
    let ops = [
        VmBindOp { ..unmap },
        VmBindOp {
            syncs: umd.sync_ops(&[], &[bound]).unwrap(),
            ..map
        },
    ];
    umd.bind(s.vm, DRM_PANTHOR_VM_BIND_ASYNC, &ops).unwrap();
    umd.wait(&[bound], WAIT).unwrap();
    assert!(!pm.is_powered(), "an asynchronous bind woke the GPU");
    store(64, 0x2ee);
    assert_eq!(
        new.read_u32(0).unwrap(),
        0x2ee,
        "the job reached the new object"
    );
    assert_eq!(old.read_u32(0).unwrap(), 0x01d, "and not the old one");
    assert!(pm.stats(std::time::Duration::ZERO).power_ups >= ups + 2);
    assert_eq!(power_faults(&r), 0);
    assert!(r
        .reg
        .device()
        .backend
        .gpu()
        .with(|g| g.bus_errors().is_empty()));
}
