// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The whole family at work: the Tyr driver on a simulated Mali-G610, driven the way Mesa
//! drives panthor.
//!
//! 1. Probe: reset, L2 power-up, identification and the firmware interface, logged as Tyr does.
//! 2. A workload through ioctls and `mmap` only: a VM, buffer objects, synchronous and
//!    asynchronous binds, two groups with two queues each, and a chain of 64 jobs where each
//!    job waits for the previous one (through syncobjs, across queues and groups) and adds
//!    `k²` to a running sum it stores in GPU memory. The result is read back and checked.
//! 3. What a Vulkan driver adds on top: a timeline syncobj whose points order an asynchronous
//!    sparse bind (a 6 MiB range backed by one 2 MiB dummy, so a write through one block reads
//!    back through another) and three jobs, the first of which tiles 32,762 words into a tiler
//!    heap created with one 128 KiB chunk, so the GPU runs out of heap twice and the driver
//!    grows it. The later jobs follow the chunk list the GPU linked and copy words out of the
//!    new chunks; the CPU waits on timeline points in between and checks every value.
//! 4. Throughput: synchronous and asynchronous binds per second, and submissions per second
//!    (each a job that runs a small stream on the simulated GPU).
//! 5. Power, from the driver's own accounting: how long the GPU was powered (it powers down
//!    when idle and up again for work), how often it went down, and how long it ran at each
//!    clock rate the governor picked from its utilisation.
//! 6. Sharing the GPU, on a second simulated G610 whose command-stream engine is a thousand
//!    times slower (so that jobs outlast the scheduler's 10 ms tick): three clients' 24 groups
//!    with chains of jobs want the 8 group slots at once and are time-sliced (suspended and
//!    resumed through the firmware) until every job is done and right, none timed out; a
//!    `REALTIME` job starts within a tick while `LOW` groups hold every slot; and a system
//!    suspend saves the groups running mid-job, which the resume finishes.
//!
//! Exits with status 1 if anything is wrong. Run it with
//! `cargo run --release -p gpukit-tyr --features host --example mali_g610`.

use std::process::ExitCode;
use std::time::Instant;

use drm_ctx::device;
use tyr::backend::Lock as _;
use tyr::csf::instr;
use tyr::driver;
use tyr::host::HostBackend;
use tyr::job::SubmitTimes;
use tyr::uapi::*;
use tyr::umd::{spin_stream, timeline_op, Job, Umd};

/// Jobs in the dependency chain.
const CHAIN: u64 = 64;
/// Binds and submissions timed for the throughput figures.
const BINDS: u64 = 4000;
/// Jobs of the one-at-a-time submit breakdown.
const LATENCY_JOBS: u64 = 1000;
const SUBMITS: u64 = 4000;
/// How many submissions may be in flight before the client waits (the queue holds 64).
const WINDOW: usize = 48;
const SECOND: i64 = 1_000_000_000;

const CODE_VA: u64 = 0x100_0000;
const DATA_VA: u64 = 0x4000_0000;
const SPARSE_VA: u64 = 0x6000_0000;
const SZ_2M: u64 = 0x20_0000;
/// Tiler heap chunks: 128 KiB, the smallest panthor accepts; each starts with a 64-byte header
/// whose first word links the next chunk.
const CHUNK: u32 = 128 << 10;
const WORDS_PER_CHUNK: u32 = (CHUNK - 64) / 8;
/// Where the heap and sparse jobs leave what they read, in the data BO.
const OUT: u64 = 0x1000;
/// Where the tiling pass writes its tiler and heap descriptors, in the data BO.
const TILER_DESC: u64 = 0x1800;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mali_g610: FAILED: {e}");
            ExitCode::from(1)
        }
    }
}

/// The chain's job 1 as the GPU runs it, disassembled (`--csdump`, what `cargo xtask csdump
/// --demo` asks for): the user stream the job names, and the instructions Tyr writes into the
/// queue's ring around it (its sync object's address left 0: the kernel's, not userspace's).
fn csdump_chain(umd: &Umd) -> Result<(), String> {
    let k = 1;
    let stream = [
        instr::move48(0, DATA_VA + 4 * (k - 1)),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::add_imm32(2, 2, (k * k) as i32),
        instr::store_multiple(2, 0, 4, 1),
    ];
    let flush = umd
        .latest_flush_id()
        .map_err(|e| format!("flush ID: {e:?}"))?;
    let addr = CODE_VA + k * 64;
    let ring = tyr::sched::job_instrs(addr, 8 * stream.len() as u32, flush, 0, 8);
    println!("csdump: chain job {k}, the ring job Tyr writes for it:");
    print!("{}", csf::Disasm::new(&ring, 0));
    println!("csdump: chain job {k}, the user stream it calls:");
    print!("{}", csf::Disasm::new(&stream, addr));
    Ok(())
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn e<T>(what: &'static str) -> impl Fn(T) -> String
where
    T: core::fmt::Debug,
{
    move |err| format!("{what}: {err:?}")
}

fn run() -> Result<(), String> {
    // ---------------------------------------------------------------- probe
    let parent = device::Device::new("fb000000.gpu").map_err(e("device"))?;
    let reg = driver::probe(&parent, HostBackend::g610()).map_err(e("probe"))?;
    let dev = reg.device();
    for line in dev.backend.log_lines() {
        println!("tyr: {line}");
    }
    let who = match dev.backend.firmware().origin {
        tyr::host::FirmwareOrigin::Simulator => "gpukit simulated MCU image",
        _ => "Arm",
    };
    println!(
        "firmware: {} ({who}, {} sections, git sha {})",
        dev.firmware.path(),
        dev.firmware.sections().len(),
        dev.firmware.git_sha().unwrap_or("unknown")
    );
    let umd = Umd::open(dev).map_err(e("open"))?;
    let info: GpuInfo = umd
        .dev_query(DRM_PANTHOR_DEV_QUERY_GPU_INFO)
        .map_err(e("DEV_QUERY"))?;
    let csif: CsifInfo = umd
        .dev_query(DRM_PANTHOR_DEV_QUERY_CSIF_INFO)
        .map_err(e("DEV_QUERY"))?;
    println!(
        "userspace: GPU_ID {:#x}, {} shader cores, {} address spaces; firmware: {} group slots x {} streams, {} registers",
        info.gpu_id,
        info.shader_present.count_ones(),
        info.as_present.count_ones(),
        csif.csg_slot_count,
        csif.cs_slot_count,
        csif.cs_reg_count
    );

    // ---------------------------------------------------------------- memory
    let vm = umd.vm_create().map_err(e("VM_CREATE"))?;
    let code = umd.bo_create(0x1_0000).map_err(e("BO_CREATE code"))?;
    let data = umd.bo_create(0x20_0000).map_err(e("BO_CREATE data"))?;
    umd.map(vm, &code, CODE_VA).map_err(e("VM_BIND code"))?;
    // The data goes in asynchronously; the first job waits for it.
    let data_bound = umd.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
    let op = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        bo_handle: data.handle,
        va: DATA_VA,
        size: data.size,
        syncs: umd.sync_ops(&[], &[data_bound]).map_err(e("syncs"))?,
        ..Default::default()
    };
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op])
        .map_err(e("VM_BIND async"))?;

    // ---------------------------------------------------------------- the chain
    let groups = [
        umd.group_create(vm, &[0x1000, 0x1000])
            .map_err(e("GROUP_CREATE"))?,
        umd.group_create(vm, &[0x2000, 0x1000])
            .map_err(e("GROUP_CREATE"))?,
    ];
    let started = Instant::now();
    let mut prev = data_bound;
    let mut syncs = Vec::new();
    for k in 1..=CHAIN {
        // a[k] = a[k-1] + k², the sum kept in register 2.
        let stream = [
            instr::move48(0, DATA_VA + 4 * (k - 1)),
            instr::load_multiple(2, 0, 0, 1),
            instr::wait(1),
            instr::add_imm32(2, 2, (k * k) as i32),
            instr::store_multiple(2, 0, 4, 1),
        ];
        umd.write_stream(&code, k * 64, &stream)
            .map_err(e("stream"))?;
        let done = umd.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
        let group = groups[(k % 2) as usize];
        let queue = ((k / 2) % 2) as u32;
        umd.submit(
            group,
            &[Job::new(queue, CODE_VA + k * 64, 8 * stream.len() as u32)
                .wait(prev)
                .signal(done)],
        )
        .map_err(e("GROUP_SUBMIT"))?;
        syncs.push(done);
        prev = done;
    }
    umd.wait(&[prev], 10 * SECOND).map_err(e("SYNCOBJ_WAIT"))?;
    let chain_time = started.elapsed();
    if std::env::args().any(|a| a == "--csdump") {
        csdump_chain(&umd)?;
    }
    let mut sum = 0u32;
    for k in 1..=CHAIN {
        sum += (k * k) as u32;
        let got = data.read_u32(4 * k).map_err(e("read back"))?;
        check(got == sum, &format!("a[{k}] = {got}, expected {sum}"))?;
    }
    for g in groups {
        let (state, fatal) = umd.group_state(g).map_err(e("GROUP_GET_STATE"))?;
        check(state == 0 && fatal == 0, "a group reports a fault")?;
    }
    println!(
        "chain: {CHAIN} dependent jobs over 2 groups x 2 queues in {:.2} ms; sum of k^2 for k = 1..={CHAIN} is {sum}, checked at every step",
        chain_time.as_secs_f64() * 1e3
    );

    // ---------------------------------------------------------------- timeline, sparse, heap
    let (grown, sparse_word) = timeline_sparse_and_heap(&umd, vm, &code, &data, groups[1])?;
    println!(
        "timeline: sparse bind of 3 x 2 MiB onto one dummy block (0x{sparse_word:x} written through block 0, read through block 2); tiler heap grown by the driver from 1 to {grown} chunks of 128 KiB while a job tiled {} words, the last of them read back from the third chunk; timeline at point 4 (a bind and three jobs, the CPU waiting on points 2 to 4)",
        2 * WORDS_PER_CHUNK + 10
    );

    // ---------------------------------------------------------------- binds per second
    let page = umd.bo_create(0x1000).map_err(e("BO_CREATE"))?;
    // Map one page at `va`, then unmap it.
    let map_unmap = |va: u64| {
        let map = VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
            bo_handle: page.handle,
            va,
            size: 0x1000,
            ..Default::default()
        };
        let unmap = VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
            va,
            size: 0x1000,
            ..Default::default()
        };
        (map, unmap)
    };
    let t = Instant::now();
    for i in 0..BINDS / 2 {
        let (map, unmap) = map_unmap(0x8000_0000 + (i % 512) * 0x1000);
        umd.bind(vm, 0, &[map]).map_err(e("VM_BIND map"))?;
        umd.bind(vm, 0, &[unmap]).map_err(e("VM_BIND unmap"))?;
    }
    let sync_binds = BINDS as f64 / t.elapsed().as_secs_f64();

    let t = Instant::now();
    for i in 0..BINDS / 2 {
        let (map, unmap) = map_unmap(0x9000_0000 + (i % 512) * 0x1000);
        loop {
            match umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[map, unmap]) {
                Ok(()) => break,
                // The bind queue is full: let it drain.
                Err(drm_ctx::Error::Busy) => std::thread::yield_now(),
                Err(err) => return Err(format!("VM_BIND async: {err:?}")),
            }
        }
    }
    // Wait for the queue to drain with one more bind that signals.
    let drained = umd.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
    let op = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
        syncs: umd.sync_ops(&[], &[drained]).map_err(e("syncs"))?,
        ..Default::default()
    };
    // The queue may still be full from the last of them.
    loop {
        match umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]) {
            Ok(()) => break,
            Err(drm_ctx::Error::Busy) => std::thread::yield_now(),
            Err(err) => return Err(format!("VM_BIND async: {err:?}")),
        }
    }
    umd.wait(&[drained], 10 * SECOND)
        .map_err(e("SYNCOBJ_WAIT"))?;
    let async_binds = BINDS as f64 / t.elapsed().as_secs_f64();
    check(
        umd.vm_state(vm).map_err(e("VM_GET_STATE"))? == DRM_PANTHOR_VM_STATE_USABLE,
        "VM unusable",
    )?;

    // ---------------------------------------------------------------- submits per second
    let counter = [
        instr::move48(0, DATA_VA + 0x10_0000),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::add_imm32(2, 2, 1),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&code, 0x8000, &counter)
        .map_err(e("stream"))?;
    let pool: Vec<u32> = (0..WINDOW)
        .map(|_| umd.syncobj_create(false))
        .collect::<Result<_, _>>()
        .map_err(e("SYNCOBJ_CREATE"))?;
    let t = Instant::now();
    for i in 0..SUBMITS as usize {
        let slot = pool[i % WINDOW];
        if i >= WINDOW {
            // Reusing a syncobj: wait for the job that last signalled it.
            umd.wait(&[slot], 10 * SECOND).map_err(e("SYNCOBJ_WAIT"))?;
        }
        umd.submit(
            groups[0],
            &[Job::new(0, CODE_VA + 0x8000, 8 * counter.len() as u32).signal(slot)],
        )
        .map_err(e("GROUP_SUBMIT"))?;
    }
    umd.wait(&pool, 10 * SECOND).map_err(e("SYNCOBJ_WAIT"))?;
    let submits = SUBMITS as f64 / t.elapsed().as_secs_f64();
    let count = data.read_u32(0x10_0000).map_err(e("read back"))?;
    check(
        u64::from(count) == SUBMITS,
        &format!("counter is {count}, expected {SUBMITS}"),
    )?;

    println!(
        "throughput: {sync_binds:.0} synchronous binds/s, {async_binds:.0} asynchronous binds/s, {submits:.0} submits/s ({SUBMITS} jobs, counter checked)"
    );

    // ---------------------------------------------------------------- one submit's time
    // One job at a time, each waited for: the driver's profile says where the time went.
    let profile = &dev.shared().sched.shared.profile;
    let one = pool[0];
    let before = profile.read();
    let t = Instant::now();
    for _ in 0..LATENCY_JOBS {
        umd.submit(
            groups[0],
            &[Job::new(0, CODE_VA + 0x8000, 8 * counter.len() as u32).signal(one)],
        )
        .map_err(e("GROUP_SUBMIT"))?;
        umd.wait(&[one], 10 * SECOND).map_err(e("SYNCOBJ_WAIT"))?;
    }
    let each = t.elapsed().as_nanos() as u64 / LATENCY_JOBS;
    let p = profile.read().since(&before);
    check(
        p.calls == LATENCY_JOBS && p.runs == LATENCY_JOBS && p.done == LATENCY_JOBS,
        &format!("profile counted {p:?} for {LATENCY_JOBS} jobs"),
    )?;
    let mean = |ns: u64| SubmitTimes::mean(ns, LATENCY_JOBS);
    // The stages follow one another along the job's way, except the commit, which is the
    // ioctl's share of the time from queued to run (the work item may start the job before
    // the ioctl returns).
    let path = [
        mean(p.decode_ns),
        mean(p.prepare_ns),
        mean(p.handoff_ns),
        mean(p.ring_ns),
        mean(p.gpu_ns),
    ];
    let us = |ns: u64| ns as f64 / 1000.0;
    println!(
        "submit breakdown (one job at a time, mean of {LATENCY_JOBS}): {:.1} us: decode {:.1}, \
         prepare (syncobjs, dependencies) {:.1}, queued until run {:.1} (of which the ioctl's \
         commit {:.1}), ring write and doorbell {:.1}, GPU and completion interrupt {:.1}, \
         completion to the waiter {:.1}",
        us(each),
        us(path[0]),
        us(path[1]),
        us(path[2]),
        us(mean(p.commit_ns)),
        us(path[3]),
        us(path[4]),
        us(each.saturating_sub(path.iter().sum())),
    );
    // Idle now: the GPU powers down after the idle timeout (the driver's clock: real time).
    let pm = &dev.shared().pm;
    let until = Instant::now();
    while pm.is_powered() && until.elapsed().as_secs() < 10 {
        std::thread::yield_now();
    }
    check(!pm.is_powered(), "the idle GPU did not power down")?;
    let now = {
        use register::io::poll::PollClock as _;
        use tyr::backend::Backend as _;
        dev.backend.timer_clock().now()
    };
    let st = pm.stats(now);
    let ms = |ns: u64| ns as f64 / 1e6;
    let opps: Vec<String> = st.opp_ns[..st.opp_count]
        .iter()
        .map(|&(hz, ns)| format!("{} MHz {:.2} ms", hz / 1_000_000, ms(ns)))
        .collect();
    println!(
        "power: GPU powered {:.2} ms of {:.2} ms (real time), {} power-downs, {} power-ups, {} clock changes; time per clock rate: {}",
        ms(st.powered_ns),
        ms(now.as_nanos() as u64),
        st.power_downs,
        st.power_ups,
        st.clock_changes,
        opps.join(", ")
    );
    let per_opp: u64 = st.opp_ns[..st.opp_count].iter().map(|o| o.1).sum();
    check(
        per_opp.abs_diff(st.powered_ns) < 1_000_000,
        "the time per clock rate does not add up to the powered time",
    )?;
    check(
        dev.backend.gpu().with(|g| g.power_faults()) == 0,
        "the driver powered the GPU in the wrong order",
    )?;
    drop(umd);
    drop(reg);

    // ---------------------------------------------------------------- sharing
    println!("{}", sharing()?);
    println!("mali_g610: OK");
    Ok(())
}

/// A group of `umd` in `vm` with one queue and its own 1 MiB object at `va` (streams from
/// offset 0, results at `SPIN_DATA`), and the done syncobjs of its jobs.
struct SpinGroup {
    handle: u32,
    bo: tyr::umd::Bo,
    va: u64,
    /// Bytes of streams written.
    code: u64,
    jobs: Vec<u32>,
}

const SPIN_BO: u64 = 0x10_0000;
const SPIN_DATA: u64 = 0xf_f000;

impl SpinGroup {
    fn new(umd: &Umd, vm: u32, va: u64, priority: u8) -> Result<Self, String> {
        let bo = umd.bo_create(SPIN_BO).map_err(e("BO_CREATE"))?;
        umd.map(vm, &bo, va).map_err(e("VM_BIND"))?;
        let handle = umd
            .group_create_prio(vm, &[0x1000], priority)
            .map_err(e("GROUP_CREATE"))?;
        Ok(SpinGroup {
            handle,
            bo,
            va,
            code: 0,
            jobs: Vec::new(),
        })
    }

    /// The word job `j` stores next to its count.
    fn value(&self, j: u64) -> u32 {
        0x5000_0000 | self.handle << 12 | j as u32
    }

    /// Writes the streams of jobs `0..n`, each spinning `spin` times, and makes their
    /// syncobjs: everything [`submit`](Self::submit) needs, so that it is quick.
    fn stage(&mut self, umd: &Umd, n: u64, spin: u32) -> Result<Vec<Job>, String> {
        let mut jobs = Vec::new();
        for j in 0..n {
            let prog = spin_stream(self.va + SPIN_DATA + 8 * j, self.value(j), spin);
            let at = self.code;
            // Streams start 64-byte aligned and stay below the results.
            self.code += (8 * prog.len() as u64).next_multiple_of(64);
            check(
                self.code <= SPIN_DATA,
                "the streams overflow into the results",
            )?;
            umd.write_stream(&self.bo, at, &prog).map_err(e("stream"))?;
            let done = umd.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
            jobs.push(Job::new(0, self.va + at, 8 * prog.len() as u32).signal(done));
            self.jobs.push(done);
        }
        Ok(jobs)
    }

    /// Submits staged jobs, the first waiting on `after`.
    fn submit(&self, umd: &Umd, mut jobs: Vec<Job>, after: Option<u32>) -> Result<(), String> {
        if let (Some(first), Some(w)) = (jobs.first_mut(), after) {
            *first = first.clone().wait(w);
        }
        umd.submit(self.handle, &jobs).map_err(|err| {
            format!(
                "GROUP_SUBMIT to group {}: {err:?}, state {:?}",
                self.handle,
                umd.group_state(self.handle)
            )
        })
    }

    /// Waits for every job and checks what each stored and that the group is fine.
    fn check(&self, umd: &Umd, spin: u32) -> Result<(), String> {
        umd.wait(&self.jobs, 60 * SECOND)
            .map_err(e("SYNCOBJ_WAIT"))?;
        for j in 0..self.jobs.len() as u64 {
            let count = self
                .bo
                .read_u32(SPIN_DATA + 8 * j)
                .map_err(e("read back"))?;
            let value = self
                .bo
                .read_u32(SPIN_DATA + 8 * j + 4)
                .map_err(e("read back"))?;
            check(
                count == spin && value == self.value(j),
                &format!("group {} job {j}: [{count}, {value:#x}]", self.handle),
            )?;
        }
        let (state, fatal) = umd.group_state(self.handle).map_err(e("GROUP_GET_STATE"))?;
        check(
            state == 0 && fatal == 0,
            "a time-sliced group reports a fault or a timeout",
        )
    }
}

/// Step 6 of the module docs; returns the line it prints.
fn sharing() -> Result<String, String> {
    use std::sync::atomic::Ordering;
    const SPIN: u32 = 600;
    const JOBS: u64 = 8;
    // About 9 ms a job: long enough that the LOW groups still hold the slots when this thread,
    // which the simulated GPU does not wait for, gets to submit the REALTIME job.
    const LOW_JOBS: u64 = 40;
    let mut cfg = mali_sim::Config::g610();
    // A step of 16 instructions every 100 us: a job of 600 takes about 4 ms.
    cfg.timings.cs_step_ns = 100_000;
    let hz = cfg.timings.timestamp_hz;
    let parent = device::Device::new("fb000000.gpu").map_err(e("device"))?;
    let reg = driver::probe(&parent, HostBackend::new(cfg)).map_err(e("probe"))?;
    let dev = reg.device();
    let sched = &dev.shared().sched;
    // No idle power-down while the work is set up (the rotations are what is shown here).
    dev.shared()
        .pm
        .set_idle_timeout(std::time::Duration::from_secs(3600));
    let slots = sched.slots.guard().len();

    // Three clients, 24 groups with chains of 8 jobs, released together by a gate job.
    let clients: Vec<Umd> = (0..3)
        .map(|_| Umd::open(dev))
        .collect::<Result<_, _>>()
        .map_err(e("open"))?;
    let mut gates = Vec::new();
    let mut groups = Vec::new();
    for umd in &clients {
        let vm = umd.vm_create().map_err(e("VM_CREATE"))?;
        // Syncobj handles are the client's own: each has its gate.
        gates.push(SpinGroup::new(
            umd,
            vm,
            0x800_0000,
            PANTHOR_GROUP_PRIORITY_MEDIUM,
        )?);
        for k in 0..8u64 {
            let g = SpinGroup::new(
                umd,
                vm,
                0x100_0000 + k * 0x10_0000,
                PANTHOR_GROUP_PRIORITY_MEDIUM,
            )?;
            groups.push(g);
        }
    }
    let (suspends, resumes) = (
        sched.suspends.load(Ordering::Acquire),
        sched.resumes.load(Ordering::Acquire),
    );
    let staged: Vec<Vec<Job>> = groups
        .iter_mut()
        .enumerate()
        .map(|(i, g)| g.stage(&clients[i / 8], JOBS, SPIN))
        .collect::<Result<_, _>>()?;
    for (umd, gate) in clients.iter().zip(&mut gates) {
        let jobs = gate.stage(umd, 3, 1500)?;
        gate.submit(umd, jobs, None)?;
    }
    // The groups' chains wait for the last job of their client's gate, about 28 ms away:
    // they all reach their rings together.
    for (i, (g, jobs)) in groups.iter().zip(staged).enumerate() {
        g.submit(&clients[i / 8], jobs, Some(gates[i / 8].jobs[2]))?;
    }
    for (i, g) in groups.iter().enumerate() {
        g.check(&clients[i / 8], SPIN)?;
    }
    for (umd, gate) in clients.iter().zip(&gates) {
        gate.check(umd, 1500)?;
    }
    let ticks = sched.ticks.load(Ordering::Acquire);
    let suspended = sched.suspends.load(Ordering::Acquire) - suspends;
    let resumed = sched.resumes.load(Ordering::Acquire) - resumes;
    let moves = sched.moves.load(Ordering::Acquire);
    check(suspended > 0 && resumed > 0, "no group was time-sliced")?;
    check(
        sched.shared.resets.load(Ordering::Acquire) == 0,
        "the GPU was reset",
    )?;

    // Eight LOW groups with long chains hold every slot; a REALTIME job of a privileged
    // client starts within one tick. Everything is made first: the simulated GPU runs on its
    // own while this thread works.
    let boss = Umd::open_with(
        dev,
        drm_ctx::drm::OpenOptions {
            master: true,
            ..drm_ctx::drm::OpenOptions::primary()
        },
    )
    .map_err(e("open"))?;
    let rt_vm = boss.vm_create().map_err(e("VM_CREATE"))?;
    let rt = SpinGroup::new(&boss, rt_vm, 0x100_0000, PANTHOR_GROUP_PRIORITY_REALTIME)?;
    // The job notes the GPU timestamp as it starts.
    let prog = [
        instr::move48(0, rt.va + SPIN_DATA),
        instr::store_state(0, instr::STATE_TIMESTAMP, 0),
    ];
    boss.write_stream(&rt.bo, 0, &prog).map_err(e("stream"))?;
    let done = boss.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
    let low_umd = &clients[1];
    let low_vm = low_umd.vm_create().map_err(e("VM_CREATE"))?;
    let mut low = Vec::new();
    let mut staged = Vec::new();
    for k in 0..8u64 {
        let mut g = SpinGroup::new(
            low_umd,
            low_vm,
            0x100_0000 + k * 0x10_0000,
            PANTHOR_GROUP_PRIORITY_LOW,
        )?;
        staged.push(g.stage(low_umd, LOW_JOBS, 1500)?);
        low.push(g);
    }
    for (g, jobs) in low.iter().zip(staged) {
        g.submit(low_umd, jobs, None)?;
    }
    let t = Instant::now();
    while sched.slots.guard().iter().any(Option::is_none) {
        if t.elapsed().as_secs() >= 60 {
            let done: Vec<usize> = low
                .iter()
                .map(|g| {
                    g.jobs
                        .iter()
                        .filter(|j| low_umd.wait(&[**j], 0).is_ok())
                        .count()
                })
                .collect();
            return Err(format!(
                "the LOW groups never took every slot: slots {:?}, jobs done per LOW group {done:?}",
                sched.slots.guard()
            ));
        }
        std::thread::yield_now();
    }
    let gpu = dev.backend.gpu().clone();
    boss.submit(rt.handle, &[Job::new(0, rt.va, 16).signal(done)])
        .map_err(e("GROUP_SUBMIT"))?;
    let submitted = gpu.read64(mali_sim::regs::TIMESTAMP_LO);
    boss.wait(&[done], 60 * SECOND).map_err(e("SYNCOBJ_WAIT"))?;
    let started = rt.bo.read_u64(SPIN_DATA).map_err(e("read back"))?;
    let waited_us = started.saturating_sub(submitted) as f64 * 1e6 / hz as f64;
    check(
        waited_us <= tyr::sched::TICK_PERIOD.as_secs_f64() * 1e6,
        &format!("the REALTIME job waited {waited_us:.0} us"),
    )?;
    check(
        low.iter()
            .any(|g| low_umd.wait(&g.jobs[LOW_JOBS as usize - 1..], 0).is_err()),
        "the LOW groups were done before the REALTIME job ran",
    )?;

    // A system suspend with the LOW groups in the middle of their jobs.
    let saved = sched.suspends.load(Ordering::Acquire);
    driver::suspend(dev).map_err(e("suspend"))?;
    let saved = sched.suspends.load(Ordering::Acquire) - saved;
    check(
        !dev.shared().pm.is_powered(),
        "the GPU is powered while suspended",
    )?;
    driver::resume(dev).map_err(e("resume"))?;
    for g in &low {
        g.check(low_umd, 1500)?;
    }
    check(
        sched.shared.resets.load(Ordering::Acquire) == 0,
        "the GPU was reset",
    )?;
    check(
        gpu.with(|g| g.power_faults()) == 0,
        "the driver powered the GPU in the wrong order",
    )?;
    let jobs = groups.len() as u64 * JOBS;
    Ok(format!(
        "sharing: {} groups of 3 clients with chains of {JOBS} jobs over {slots} group slots: all {jobs} jobs right, none timed out, after {ticks} scheduler ticks, {suspended} suspends and {resumed} resumes ({moves} on another slot); a REALTIME job started {waited_us:.0} us after its submission while LOW groups held every slot; a system suspend saved {saved} groups mid-job and the resume finished them",
        groups.len()
    ))
}

/// The timeline, sparse and tiler-heap part of the workload (step 3 of the module docs).
/// Returns the number of heap chunks and the word read back through the sparse range.
fn timeline_sparse_and_heap(
    umd: &Umd,
    vm: u32,
    code: &tyr::umd::Bo,
    data: &tyr::umd::Bo,
    group: u32,
) -> Result<(u32, u32), String> {
    let tl = umd.syncobj_create(false).map_err(e("SYNCOBJ_CREATE"))?;
    let wait_point = |point: u64| {
        umd.timeline_wait(&[tl], &[point], 0, 10 * SECOND)
            .map_err(e("SYNCOBJ_TIMELINE_WAIT"))
    };
    // Point 1: three 2 MiB blocks of sparse range, bound asynchronously.
    let op = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP
            | DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE
            | DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
        va: SPARSE_VA,
        size: 3 * SZ_2M,
        syncs: umd.array(&[timeline_op(true, tl, 1)]).map_err(e("syncs"))?,
        ..Default::default()
    };
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op])
        .map_err(e("VM_BIND sparse"))?;
    let heap = umd
        .tiler_heap_create(vm, 1, CHUNK, 4, 8)
        .map_err(e("TILER_HEAP_CREATE"))?;
    let words = 2 * WORDS_PER_CHUNK + 10;
    let tag = 0x7a00_0000u64;

    // Point 2 (after point 1): tile `words` words, which needs two more chunks; copy the first
    // chunk's link to the next one out; write a word through sparse block 0 and copy what
    // block 2 holds at the same offset out.
    let mut a = heap.tile(DATA_VA + TILER_DESC, words, tag).to_vec();
    a.extend([
        instr::move48(0, heap.first_chunk_va),
        instr::load_multiple(2, 0, 0, 0b11),
        instr::wait(1),
        instr::move48(4, DATA_VA + OUT),
        instr::store_multiple(2, 4, 0, 0b11),
        instr::move48(0, SPARSE_VA + 0x1230),
        instr::move32(2, 0x5ca1_ab1e),
        instr::store_multiple(2, 0, 0, 1),
        instr::move48(4, SPARSE_VA + 2 * SZ_2M + 0x1230),
        instr::load_multiple(6, 4, 0, 1),
        instr::wait(1),
        instr::move48(8, DATA_VA + OUT + 8),
        instr::store_multiple(6, 8, 0, 1),
    ]);
    let run = |at: u64, prog: &[u64], wait: u64, signal: u64| -> Result<(), String> {
        umd.write_stream(code, at, prog).map_err(e("stream"))?;
        let job = Job::new(0, CODE_VA + at, (prog.len() * 8) as u32)
            .wait_point(tl, wait)
            .signal_point(tl, signal);
        umd.submit(group, &[job]).map_err(e("GROUP_SUBMIT"))
    };
    run(0x9000, &a, 1, 2)?;
    wait_point(2)?;
    let link1 = data.read_u64(OUT).map_err(e("read back"))?;
    let sparse_word = data.read_u32(OUT + 8).map_err(e("read back"))?;
    check(
        sparse_word == 0x5ca1_ab1e,
        &format!("sparse block 2 reads {sparse_word:#x}, block 0 was written 0x5ca1ab1e"),
    )?;
    check(
        link1 & 0xfff == u64::from(CHUNK >> 12) && link1 & !0xfff != 0,
        &format!("the first chunk links {link1:#x}, not a grown 128 KiB chunk"),
    )?;

    // Point 3: the first word of the second chunk and that chunk's own link.
    let chunk2 = link1 & !0xfff;
    let b = [
        instr::move48(0, chunk2),
        instr::load_multiple(2, 0, 0, 0b11),
        instr::wait(1),
        instr::move48(4, chunk2 + 64),
        instr::load_multiple(6, 4, 0, 0b11),
        instr::wait(1),
        instr::move48(8, DATA_VA + OUT + 16),
        instr::store_multiple(2, 8, 0, 0b11),
        instr::store_multiple(6, 8, 8, 0b11),
    ];
    run(0x9400, &b, 2, 3)?;
    wait_point(3)?;
    let link2 = data.read_u64(OUT + 16).map_err(e("read back"))?;
    let first2 = data.read_u64(OUT + 24).map_err(e("read back"))?;
    check(
        first2 == tag + u64::from(WORDS_PER_CHUNK),
        &format!("the second chunk starts with {first2:#x}"),
    )?;
    check(
        link2 & 0xfff == u64::from(CHUNK >> 12) && link2 & !0xfff != 0,
        &format!("the second chunk links {link2:#x}, not a grown 128 KiB chunk"),
    )?;

    // Point 4: the last word tiled, tenth of the third chunk, and that chunk's link.
    let chunk3 = link2 & !0xfff;
    let c = [
        instr::move48(0, chunk3 + 64 + 8 * 9),
        instr::load_multiple(2, 0, 0, 0b11),
        instr::wait(1),
        instr::move48(4, chunk3),
        instr::load_multiple(6, 4, 0, 0b11),
        instr::wait(1),
        instr::move48(8, DATA_VA + OUT + 32),
        instr::store_multiple(2, 8, 0, 0b11),
        instr::store_multiple(6, 8, 8, 0b11),
    ];
    run(0x9800, &c, 3, 4)?;
    wait_point(4)?;
    let last = data.read_u64(OUT + 32).map_err(e("read back"))?;
    let link3 = data.read_u64(OUT + 40).map_err(e("read back"))?;
    check(
        last == tag + u64::from(words) - 1,
        &format!("the last word tiled reads {last:#x}"),
    )?;
    check(
        link3 == 0,
        &format!("the third chunk links {link3:#x}, not the end"),
    )?;
    // The chunks the GPU went through: the first, and one per link it followed.
    let chunks = 1 + [link1, link2, link3].iter().filter(|&&l| l != 0).count() as u32;
    let points = umd
        .syncobj_query(&[tl], false)
        .map_err(e("SYNCOBJ_QUERY"))?;
    check(
        points == [4],
        &format!("the timeline is at {points:?}, not 4"),
    )?;
    let (state, fatal) = umd.group_state(group).map_err(e("GROUP_GET_STATE"))?;
    check(state == 0 && fatal == 0, "the heap group reports a fault")?;
    umd.tiler_heap_destroy(&heap)
        .map_err(e("TILER_HEAP_DESTROY"))?;
    umd.syncobj_destroy(tl).map_err(e("SYNCOBJ_DESTROY"))?;
    Ok((chunks, sparse_word))
}
