// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `/init` of the test VM for the Tyr driver (`gpukit_tyr`, booted with `gpukit.boot=tyr`):
//! plays the Mali-G610 demo's workload (`tyr/examples/mali_g610.rs`) against the kernel driver
//! through `/dev/dri/renderD128` with raw panthor ioctls and `mmap`, as Mesa's panvk would,
//! then unplugs the device and checks that nothing leaked.
//!
//! 1. **Device**: the render node opens; `DRM_IOCTL_VERSION` says `panthor` 1.8.x (anything
//!    else ends the program: no command stream goes to another driver).
//! 2. **Queries**: `DEV_QUERY` `GPU_INFO` (`GPU_ID` 0xa8670005, the simulated Mali-G610's) and
//!    `CSIF_INFO`, with sanity checks (the cores, address spaces, group slots, streams and
//!    registers the workload needs).
//! 3. **Memory**: a VM, a 64 KiB code BO and a 2 MiB data BO, both `mmap`ed (the mapping is
//!    the GPU's memory: streams are written there, results read back there; fresh BOs read as
//!    zero), a synchronous `VM_BIND` of the code and an asynchronous one of the data that
//!    signals a syncobj; the VM is usable.
//! 4. **The chain**: two groups of two queues; 64 jobs, job `k` waiting for job `k - 1`'s
//!    syncobj (the first for the asynchronous bind's), loading `a[k - 1]`, adding `k²`,
//!    storing `a[k]`, alternating groups and queues as the demo does; the CPU waits for the
//!    last one (60 s: the kernel runs under QEMU's TCG), checks every `a[k]` through the
//!    mapping, the last fence's status (1) and both groups' states (0).
//! 5. **The flush-ID page**, mapped as panvk maps it when it opens the device: one page,
//!    shared and read-only, at `DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET` (a writable, a private
//!    and a two-page mapping fail with `EINVAL`, `mprotect` to writable with `EACCES`); a map
//!    and an unmap of the code BO in the chain's VM, which is active, flush the GPU's caches,
//!    and the `LATEST_FLUSH_ID` read through the page moves.
//! 6. **A hang, recovered**: a third group on the same VM runs a `SYNC_WAIT64` on a word
//!    nothing writes; its syncobj must signal within 60 s with `-ETIMEDOUT` on the fence
//!    (read through a sync file), the group reports `TIMEDOUT`, the VM stays usable and a new
//!    job on a chain group completes and stores the right word.
//! 7. **A fault that kills only its group**: a group on a second VM (own code BO) stores to
//!    0x70000000, which nothing maps: `-EFAULT` on its fence, `FATAL_FAULT` with its queue's
//!    bit, the second VM `UNUSABLE`, submissions to the group and new groups on that VM
//!    `EINVAL`; the first VM stays usable and a chain group still computes.
//! 8. **Unplug**: the counts of `/sys/kernel/tyr/live` are read at the start and before the
//!    unplug (all non-zero then); writing `tyr` to `/sys/bus/platform/drivers/tyr/unbind`
//!    unplugs the device (ioctls and new mappings of the flush-ID page on the open file then
//!    fail with `ENODEV`, the render node goes away); after every mapping is unmapped and the file closed, every count must drop to 0
//!    within 2 s.
//!
//! A failed step is a `FAIL` line with the errno; the parts that do not need what it would
//! have made still run, and the unplug part always runs (as PID 1 only: run by hand it would
//! unbind a real GPU). The expectations follow the driver's host tests
//! (`tyr/tests/driver_fairness.rs`, `driver_sched.rs`) and the kernel side's interface ("Tyr at
//! boot" in `xtask/KERNEL.md`, which also has the figures of a run).

use std::io::Write;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use gpukit_userspace_tests::drm::{self, Drm};
use gpukit_userspace_tests::init;
use gpukit_userspace_tests::panthor::{self, Job, LiveCounts};
use gpukit_userspace_tests::report::{expect_eq, Report};
use gpukit_userspace_tests::sync_file::{self, FenceStatus};
use gpukit_userspace_tests::sys::{self, Errno, Mapping};
use tyr::csf::instr;
use tyr::uapi::*;

/// The name in the check lines.
const PROGRAM: &str = "tyr_demo";

/// What `DRM_IOCTL_VERSION` must report: panthor's name, uAPI 1.8.
const NAME: &str = "panthor";
const VERSION: (i32, i32) = (1, 8);
/// `GPU_ID` of the simulated Mali-G610 (arch 10.8.6, product 7, r0p0 status 5).
const G610_GPU_ID: u32 = 0xa867_0005;

/// Where the code and data BOs are bound (the demo's addresses).
const CODE_VA: u64 = 0x100_0000;
const DATA_VA: u64 = 0x4000_0000;
const CODE_SIZE: u64 = 0x1_0000;
const DATA_SIZE: u64 = 0x20_0000;
/// Jobs in the dependency chain.
const CHAIN: u64 = 64;
/// Offsets in the code BO of the streams of parts 6 and 7 (the chain's are at `64 k`).
const HANG_STREAM: u64 = 0x2000;
const RECOVERY_STREAM: u64 = 0x2100;
const AFTER_FAULT_STREAM: u64 = 0x2200;
/// Offsets in the data BO: the word the hung job waits on (never written), and where the jobs
/// after the hang and after the fault store (the chain's `a[k]` are at `4 k`, below 0x200).
const HANG_WORD: u64 = 0x1000;
const RECOVERY_OUT: u64 = 0x2000;
const AFTER_FAULT_OUT: u64 = 0x2008;
const RECOVERY_VALUE: u32 = 0x600d_0001;
const AFTER_FAULT_VALUE: u32 = 0x600d_0002;
/// An address nothing maps in the second VM.
const FAULT_VA: u64 = 0x7000_0000;
/// Where part 5 maps the code BO a second time (and unmaps it).
const FLUSH_PROBE_VA: u64 = 0x200_0000;
/// How long the CPU waits for a job (the kernel runs under QEMU's TCG, with lockdep).
const WAIT_NS: i64 = 60_000_000_000;
/// How long all the waits of the workload may take together: with five waits of 60 s that all
/// time out, the boot would reach the tool's 300 s limit before the unplug part and the
/// summary. Once it is spent, a wait only polls.
const WAIT_BUDGET: Duration = Duration::from_secs(150);
/// The platform driver's unbind file, and the device's name written there.
const UNBIND: &str = "/sys/bus/platform/drivers/tyr/unbind";
/// The Tyr driver's directory on the platform bus: its bound devices are links in it.
const DRIVER_DIR: &str = "/sys/bus/platform/drivers/tyr";
/// The device Tyr binds to when no device tree describes one (x86_64: the boot hook's device,
/// matched by name).
const NAMED_DEVICE: &str = "tyr";
/// The device tree's GPU node on the arm64 board (`xtask/src/dt.rs`).
#[cfg(target_arch = "aarch64")]
const GPU_NODE: &str = "/gpu@c000000";
/// How long the unbind may take (it waits for the driver's remove; a hang there must not keep
/// the program from closing everything and reporting).
const UNBIND_WAIT: Duration = Duration::from_secs(30);
/// How long the counts may take to drop to 0 after the last close (release may be deferred).
const RELEASE_WAIT: Duration = Duration::from_secs(2);
/// Ring sizes of the chain's two groups (the demo's).
const CHAIN_RINGS: [[u32; 2]; 2] = [[0x1000, 0x1000], [0x2000, 0x1000]];

// The streams and the words the jobs use do not overlap, and all fit in their BOs: the
// chain's streams end before the other streams; a[0..=64], the hang word and the two stored
// words are distinct; the fault address is outside the code.
const _: () = {
    assert!(64 * CHAIN + 8 * 4 <= HANG_STREAM);
    assert!(HANG_STREAM + 64 <= RECOVERY_STREAM && RECOVERY_STREAM + 64 <= AFTER_FAULT_STREAM);
    assert!(AFTER_FAULT_STREAM + 64 <= CODE_SIZE);
    assert!(4 * (CHAIN + 1) <= HANG_WORD && HANG_WORD + 8 <= RECOVERY_OUT);
    assert!(RECOVERY_OUT + 4 <= AFTER_FAULT_OUT && AFTER_FAULT_OUT + 4 <= DATA_SIZE);
    assert!(FAULT_VA >= CODE_VA + CODE_SIZE);
    assert!(FLUSH_PROBE_VA >= CODE_VA + CODE_SIZE && FLUSH_PROBE_VA + CODE_SIZE <= DATA_VA);
};

fn main() {
    init::run(PROGRAM, checks)
}

/// A buffer object and its CPU mapping.
struct Bo {
    handle: u32,
    map: Mapping,
}

/// What the parts made, for the parts after them and for the unplug at the end.
#[derive(Default)]
struct World {
    vm: Option<u32>,
    code: Option<Bo>,
    data: Option<Bo>,
    /// Whether the code BO is bound at `CODE_VA`.
    code_bound: bool,
    /// The asynchronous bind's syncobj.
    data_bound: Option<u32>,
    /// The chain's two groups.
    groups: Option<[u32; 2]>,
    /// Every mapping made, in order (the code and data BOs' are in `code` and `data`).
    other_maps: Vec<(&'static str, Mapping)>,
}

fn checks<W: Write>(r: &mut Report<W>) {
    let init = sys::is_init();
    if init {
        r.check("mount sysfs on /sys", sys::mount_sysfs("/sys").map(|_| ()));
        r.check("mount procfs on /proc", sys::mount_proc("/proc").map(|_| ()));
    }
    let start = LiveCounts::read(panthor::LIVE_PATH);
    if let Ok(c) = &start {
        r.note(format!("live counts at the start: {c}"));
    }
    r.check(
        &format!(
            "{} reads as one well-formed line at the start",
            panthor::LIVE_PATH
        ),
        start.map(|_| ()),
    );

    if init {
        bound_device(r);
    }
    let dev = match Drm::open(drm::RENDER_NODE) {
        Ok(dev) => {
            r.ok("open /dev/dri/renderD128");
            dev
        }
        Err(e) => {
            r.fail(
                "open /dev/dri/renderD128",
                format!("{e}; {}", drm::list_dev_dri()),
            );
            // What the driver made without a render node must still go with the unbind.
            if may_unbind(r, init) {
                unplug(r, None, World::default());
            }
            return;
        }
    };
    if !version(r, &dev) {
        r.note("not the panthor driver: no workload, no unplug");
        return;
    }
    queries(r, &dev);
    let mut world = World::default();
    memory(r, &dev, &mut world);
    chain(r, &dev, &mut world);
    flush_id(r, &dev, &mut world);
    hang(r, &dev, &world);
    fault(r, &dev, &mut world);
    if may_unbind(r, init) {
        unplug(r, Some(dev), world);
    }
}

/// The devices bound to the Tyr driver: the links in [`DRIVER_DIR`].
fn tyr_devices() -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(DRIVER_DIR).map_err(|e| format!("{DRIVER_DIR}: {e}"))?;
    let mut devices = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if link && name != "module" {
            devices.push(name);
        }
    }
    Ok(devices)
}

/// The one device bound to Tyr, for the unbind; [`NAMED_DEVICE`] if it cannot be read.
fn the_device() -> String {
    match tyr_devices() {
        Ok(mut d) if d.len() == 1 => d.remove(0),
        _ => NAMED_DEVICE.to_string(),
    }
}

/// Checks how Tyr found its device: on arm64 the platform bus bound it to the board's device
/// tree node (the device's `of_node` is that node, its `compatible` RK3588's GPU's); on
/// x86_64, without a device tree, to the boot hook's device named `tyr`.
fn bound_device<W: Write>(r: &mut Report<W>) {
    let got = tyr_devices().and_then(|d| match d.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("{} devices bound: {d:?}", d.len())),
    });
    #[cfg(target_arch = "aarch64")]
    let got = got.and_then(|name| {
        let node = std::fs::read_link(format!("{DRIVER_DIR}/{name}/of_node"))
            .map_err(|e| format!("{name}/of_node: {e}"))?;
        let node = node.to_string_lossy().into_owned();
        let path = node
            .split_once("devicetree/base")
            .map(|(_, p)| p.to_string())
            .ok_or_else(|| format!("{name}/of_node -> {node}: not a device-tree node"))?;
        let compatible = std::fs::read(format!("{DRIVER_DIR}/{name}/of_node/compatible"))
            .map_err(|e| format!("{name}/of_node/compatible: {e}"))?;
        let first = compatible.split(|&b| b == 0).next().unwrap_or_default();
        if path != GPU_NODE || first != b"rockchip,rk3588-mali" {
            return Err(format!(
                "{name} is node {path} ({}), not {GPU_NODE} (rockchip,rk3588-mali)",
                String::from_utf8_lossy(first)
            ));
        }
        Ok(format!("{name}, device-tree node {path}"))
    });
    #[cfg(not(target_arch = "aarch64"))]
    let got = got.and_then(|name| {
        if name == NAMED_DEVICE {
            Ok(name)
        } else {
            Err(format!("{name}, not the boot hook's {NAMED_DEVICE}"))
        }
    });
    match got {
        Ok(seen) => r.ok(&format!("Tyr is bound to one platform device: {seen}")),
        Err(e) => r.fail("Tyr is bound to one platform device", e),
    }
}

/// Whether the unplug part may run: only as PID 1 of the test VM, with gpukit's Tyr (the one
/// with the leak counters), never on a host with a real GPU behind a driver named `tyr`.
fn may_unbind<W: Write>(r: &mut Report<W>, init: bool) -> bool {
    if !init {
        r.note("not PID 1: no unbind (it would unplug this machine's GPU), no leak check");
        false
    } else if !std::path::Path::new(panthor::LIVE_PATH).exists() {
        r.note(format!(
            "no {}: not gpukit's Tyr, no unbind, no leak check",
            panthor::LIVE_PATH
        ));
        false
    } else {
        true
    }
}

/// `Ok` if the call failed with `want`.
fn expect_errno<T: std::fmt::Debug>(got: Result<T, Errno>, want: i32) -> Result<(), String> {
    match got {
        Err(e) if e.0 == want => Ok(()),
        Err(e) => Err(format!("expected {}, got {e}", Errno(want))),
        Ok(v) => Err(format!("expected {}, got success ({v:?})", Errno(want))),
    }
}

/// An errno as a failure message.
fn errno<T>(what: &'static str) -> impl Fn(Errno) -> Result<T, String> {
    move |e| Err(format!("{what}: {e}"))
}

/// Part 1: `DRM_IOCTL_VERSION`; whether the driver is panthor.
fn version<W: Write>(r: &mut Report<W>, dev: &Drm) -> bool {
    match dev.version() {
        Ok(v) => {
            r.note(format!(
                "driver {} {}.{}.{} ({})",
                v.name, v.number.0, v.number.1, v.number.2, v.desc
            ));
            let panthor = r.check(
                &format!("VERSION reports the name {NAME}"),
                expect_eq("name", v.name.as_str(), NAME),
            );
            r.check(
                "VERSION reports version 1.8.x",
                expect_eq("major.minor", (v.number.0, v.number.1), VERSION),
            );
            panthor
        }
        Err(e) => {
            r.fail("VERSION (two passes: lengths, then strings)", e);
            false
        }
    }
}

/// Part 2: `GPU_INFO` and `CSIF_INFO`.
fn queries<W: Write>(r: &mut Report<W>, dev: &Drm) {
    match panthor::dev_query::<GpuInfo>(dev, DRM_PANTHOR_DEV_QUERY_GPU_INFO) {
        Ok(info) => {
            r.note(format!(
                "GPU_ID {:#x}, {} shader cores ({:#x}), {} address spaces ({:#x}), L2 {:#x}, \
                 tiler {:#x}, MMU features {:#x}",
                info.gpu_id,
                info.shader_present.count_ones(),
                info.shader_present,
                info.as_present.count_ones(),
                info.as_present,
                info.l2_present,
                info.tiler_present,
                info.mmu_features
            ));
            r.check(
                "DEV_QUERY GPU_INFO: GPU_ID 0xa8670005 (the simulated Mali-G610)",
                expect_eq(
                    "GPU_ID",
                    format!("{:#x}", info.gpu_id),
                    format!("{G610_GPU_ID:#x}"),
                ),
            );
            r.check("DEV_QUERY GPU_INFO: sane values", gpu_info_sane(&info));
        }
        Err(e) => r.fail("DEV_QUERY GPU_INFO", e),
    }
    match panthor::dev_query::<CsifInfo>(dev, DRM_PANTHOR_DEV_QUERY_CSIF_INFO) {
        Ok(c) => {
            r.note(format!(
                "firmware: {} group slots x {} streams, {} registers ({} unpreserved), {} \
                 scoreboard slots",
                c.csg_slot_count,
                c.cs_slot_count,
                c.cs_reg_count,
                c.unpreserved_cs_reg_count,
                c.scoreboard_slot_count
            ));
            r.check("DEV_QUERY CSIF_INFO: sane values", csif_info_sane(&c));
        }
        Err(e) => r.fail("DEV_QUERY CSIF_INFO", e),
    }
}

/// What the workload needs of the GPU, and what any Mali CSF GPU has.
fn gpu_info_sane(i: &GpuInfo) -> Result<(), String> {
    let mut bad = Vec::new();
    if i.shader_present & 1 == 0 {
        bad.push(format!(
            "shader_present {:#x} lacks core 0 (the groups' core masks)",
            i.shader_present
        ));
    }
    // Address spaces are contiguous from bit 0; the workload has two VMs running.
    if i.as_present.count_ones() < 2 || i.as_present & (i.as_present + 1) != 0 {
        bad.push(format!(
            "as_present {:#x} is not 2 or more address spaces from 0",
            i.as_present
        ));
    }
    if i.l2_present == 0 || i.tiler_present == 0 {
        bad.push(format!(
            "l2_present {:#x}, tiler_present {:#x}",
            i.l2_present, i.tiler_present
        ));
    }
    // MMU_FEATURES: virtual address bits in 7:0, physical in 15:8; the workload uses 32-bit
    // addresses.
    let (va, pa) = (i.mmu_features & 0xff, (i.mmu_features >> 8) & 0xff);
    if !(32..=64).contains(&va) || !(32..=64).contains(&pa) {
        bad.push(format!(
            "MMU_FEATURES {:#x}: {va} VA bits, {pa} PA bits",
            i.mmu_features
        ));
    }
    if i.pad != 0 {
        bad.push(format!("pad {}", i.pad));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

/// What the workload needs of the firmware interface.
fn csif_info_sane(c: &CsifInfo) -> Result<(), String> {
    let mut bad = Vec::new();
    if c.csg_slot_count == 0 || c.csg_slot_count > 32 {
        bad.push(format!("{} group slots", c.csg_slot_count));
    }
    if c.cs_slot_count < 2 || c.cs_slot_count > 32 {
        bad.push(format!(
            "{} streams per group (the chain's groups have 2)",
            c.cs_slot_count
        ));
    }
    // The streams use registers 0 to 3.
    if c.cs_reg_count < 8 || c.unpreserved_cs_reg_count >= c.cs_reg_count {
        bad.push(format!(
            "{} registers, {} unpreserved",
            c.cs_reg_count, c.unpreserved_cs_reg_count
        ));
    }
    if c.pad != 0 {
        bad.push(format!("pad {}", c.pad));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

/// `size` in MiB or KiB when it is a whole number of them.
fn bytes(size: u64) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else if size.is_multiple_of(1 << 10) {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} bytes")
    }
}

/// `BO_CREATE` of `size` bytes, `BO_MMAP_OFFSET` and `mmap`, each a check; the fresh BO must
/// read as zero.
fn bo_mapped<W: Write>(r: &mut Report<W>, dev: &Drm, what: &str, size: u64) -> Option<Bo> {
    let create = format!(
        "BO_CREATE of {} ({what}) gives a handle of that size",
        bytes(size)
    );
    let handle = match panthor::bo_create(dev, size) {
        Ok((h, s)) if h != 0 && s == size => {
            r.ok(&create);
            h
        }
        Ok((h, s)) => {
            r.fail(&create, format!("handle {h}, size {s:#x}"));
            return None;
        }
        Err(e) => {
            r.fail(&create, e);
            return None;
        }
    };
    let page = sys::page_size();
    let mapped = panthor::bo_mmap_offset(dev, handle)
        .or_else(errno("BO_MMAP_OFFSET"))
        .and_then(|o| {
            if o == 0 || o % page != 0 {
                return Err(format!("BO_MMAP_OFFSET gave {o:#x}"));
            }
            Mapping::shared(dev.file(), size as usize, o).or_else(errno("mmap"))
        });
    let map = match mapped {
        Ok(m) => {
            r.ok(&format!(
                "BO_MMAP_OFFSET and mmap of the {what} BO (shared, read-write)"
            ));
            m
        }
        Err(e) => {
            r.fail(
                &format!("BO_MMAP_OFFSET and mmap of the {what} BO (shared, read-write)"),
                e,
            );
            return None;
        }
    };
    // The first 64 KiB are enough to see a BO handed out with someone else's data.
    let words = (map.len() / 8).min(0x2000);
    let dirty = (0..words).find(|&i| map.read_u64(i) != 0);
    r.check(
        &format!("the fresh {what} BO reads as zero through the mapping"),
        match dirty {
            None => Ok(()),
            Some(i) => Err(format!("word {i} holds {:#x}", map.read_u64(i))),
        },
    );
    Some(Bo { handle, map })
}

/// Part 3: the VM, the BOs, the binds.
fn memory<W: Write>(r: &mut Report<W>, dev: &Drm, w: &mut World) {
    match panthor::vm_create(dev) {
        Ok(id) if id != 0 => {
            r.ok("VM_CREATE gives a non-zero VM id");
            w.vm = Some(id);
        }
        Ok(id) => r.fail("VM_CREATE gives a non-zero VM id", format!("got {id}")),
        Err(e) => r.fail("VM_CREATE gives a non-zero VM id", e),
    }
    w.code = bo_mapped(r, dev, "code", CODE_SIZE);
    w.data = bo_mapped(r, dev, "data", DATA_SIZE);
    if let Some(code) = &w.code {
        // A copy-on-write mapping would keep what the process writes from the GPU.
        const PRIVATE: &str = "a private writable mmap of the code BO fails with EINVAL";
        match panthor::bo_mmap_offset(dev, code.handle) {
            Ok(o) => {
                let got = Mapping::try_private(dev.file(), CODE_SIZE as usize, o);
                r.check(PRIVATE, expect_errno(got, libc::EINVAL));
            }
            Err(e) => r.fail(PRIVATE, format!("BO_MMAP_OFFSET: {e}")),
        }
    }
    let Some(vm) = w.vm else {
        r.note("memory: no VM, nothing bound");
        return;
    };
    if let Some(code) = &w.code {
        let op = panthor::map_op(code.handle, CODE_VA, CODE_SIZE);
        w.code_bound = r.check(
            "VM_BIND (synchronous) of the code BO at 0x1000000",
            panthor::vm_bind(dev, vm, 0, &[op], &[]).or_else(errno("VM_BIND")),
        );
    }
    if let Some(data) = &w.data {
        const BIND: &str =
            "VM_BIND (asynchronous) of the data BO at 0x40000000, signalling a syncobj";
        match dev.syncobj_create(0) {
            Ok(done) => {
                let op = panthor::map_op(data.handle, DATA_VA, DATA_SIZE);
                let signal = [panthor::sync_op(true, done)];
                let bound = panthor::vm_bind(dev, vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op], &[&signal]);
                if r.check(BIND, bound.or_else(errno("VM_BIND"))) {
                    w.data_bound = Some(done);
                }
            }
            Err(e) => r.fail(BIND, format!("SYNCOBJ_CREATE: {e}")),
        }
    }
    r.check("VM_GET_STATE: the VM is usable", vm_usable(dev, vm));
}

/// `Ok` if `vm` reports `USABLE`.
fn vm_usable(dev: &Drm, vm: u32) -> Result<(), String> {
    match panthor::vm_state(dev, vm) {
        Ok(DRM_PANTHOR_VM_STATE_USABLE) => Ok(()),
        Ok(s) => Err(format!(
            "state {s} (UNUSABLE is {DRM_PANTHOR_VM_STATE_UNUSABLE})"
        )),
        Err(e) => Err(format!("VM_GET_STATE: {e}")),
    }
}

/// Writes `prog` into `bo` at byte `offset` (8-aligned, inside the BO: the offsets are this
/// program's constants).
fn write_stream(bo: &Bo, offset: u64, prog: &[u64]) {
    for (i, word) in prog.iter().enumerate() {
        bo.map.write_u64(offset as usize / 8 + i, *word);
    }
}

/// The stream of chain job `k`: `a[k] = a[k - 1] + k²`, the sum in register 2.
fn chain_stream(k: u64) -> [u64; 5] {
    [
        instr::move48(0, DATA_VA + 4 * (k - 1)),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::add_imm32(2, 2, (k * k) as i32),
        instr::store_multiple(2, 0, 4, 1),
    ]
}

/// `a[k]` after the chain: the sum of `i²` for `i` up to `k`.
fn chain_value(k: u64) -> u32 {
    (k * (k + 1) * (2 * k + 1) / 6) as u32
}

/// The group and queue of chain job `k`, as the demo alternates them.
fn chain_slot(k: u64) -> (usize, u32) {
    ((k % 2) as usize, ((k / 2) % 2) as u32)
}

/// A stream that stores `value` at `DATA_VA + out`.
fn store_stream(out: u64, value: u32) -> [u64; 3] {
    [
        instr::move48(0, DATA_VA + out),
        instr::move32(2, value),
        instr::store_multiple(2, 0, 0, 1),
    ]
}

/// Writes `prog` at `at` in `code` (bound at `CODE_VA`) and submits it to queue `queue` of
/// `group`, waiting on `waits`; returns the syncobj it signals.
fn submit(
    dev: &Drm,
    group: u32,
    queue: u32,
    code: &Bo,
    at: u64,
    prog: &[u64],
    waits: &[u32],
) -> Result<u32, String> {
    write_stream(code, at, prog);
    let done = dev.syncobj_create(0).or_else(errno("SYNCOBJ_CREATE"))?;
    let job = Job {
        queue,
        addr: CODE_VA + at,
        size: 8 * prog.len() as u32,
        waits: waits.to_vec(),
        signals: vec![done],
    };
    panthor::group_submit(dev, group, &[job]).or_else(errno("GROUP_SUBMIT"))?;
    Ok(done)
}

/// How long the workload's waits have taken so far (against [`WAIT_BUDGET`]).
static WAITED: Mutex<Duration> = Mutex::new(Duration::ZERO);

/// How long the next wait may take: [`WAIT_NS`], or what is left of [`WAIT_BUDGET`] after
/// `waited`.
fn wait_limit_ns(waited: Duration) -> i64 {
    let left = WAIT_BUDGET.saturating_sub(waited).as_nanos();
    WAIT_NS.min(i64::try_from(left).unwrap_or(WAIT_NS))
}

/// Waits up to [`WAIT_NS`] (less once [`WAIT_BUDGET`] runs low) for `syncobj`; returns how
/// long it took.
fn wait(dev: &Drm, syncobj: u32) -> Result<Duration, String> {
    let mut waited = WAITED.lock().unwrap_or_else(|e| e.into_inner());
    let limit = wait_limit_ns(*waited);
    let t = Instant::now();
    let result = dev.syncobj_wait(&[syncobj], drm::SYNCOBJ_WAIT_ALL, limit);
    let took = t.elapsed();
    *waited += took;
    match result {
        Ok(_) => Ok(took),
        Err(e) => Err(format!(
            "SYNCOBJ_WAIT: {e} after {:.1} s (limit {:.1} s{})",
            took.as_secs_f64(),
            limit as f64 / 1e9,
            if limit < WAIT_NS {
                ", the rest of the workload's wait budget"
            } else {
                ""
            }
        )),
    }
}

/// The status of the fence `syncobj` holds, through a sync file.
fn fence_status(dev: &Drm, syncobj: u32) -> Result<FenceStatus, String> {
    let file = dev
        .syncobj_export_sync_file(syncobj)
        .or_else(errno("SYNCOBJ_HANDLE_TO_FD (EXPORT_SYNC_FILE)"))?;
    let status = sync_file::status(&file);
    sys::close(file).or_else(errno("close of the sync file"))?;
    status
}

/// `Ok` if `syncobj`'s fence has `want`.
fn expect_status(dev: &Drm, syncobj: u32, want: FenceStatus) -> Result<(), String> {
    let got = fence_status(dev, syncobj)?;
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want}, got {got}"))
    }
}

/// `Ok` if `group` reports `want` (state flags, fatal-queue mask).
fn expect_group_state(dev: &Drm, group: u32, want: (u32, u32)) -> Result<(), String> {
    match panthor::group_state(dev, group) {
        Ok(got) if got == want => Ok(()),
        Ok((s, q)) => Err(format!(
            "expected state {:#x} fatal queues {:#x}, got {s:#x} and {q:#x}",
            want.0, want.1
        )),
        Err(e) => Err(format!("GROUP_GET_STATE: {e}")),
    }
}

/// Part 4: the 64-job chain.
fn chain<W: Write>(r: &mut Report<W>, dev: &Drm, w: &mut World) {
    let (Some(vm), Some(code), Some(data), Some(bound), true) =
        (w.vm, &w.code, &w.data, w.data_bound, w.code_bound)
    else {
        r.note("chain: skipped (no VM, code or data, or a bind failed)");
        return;
    };
    let mut groups = [0u32; 2];
    for (i, rings) in CHAIN_RINGS.iter().enumerate() {
        let check = format!(
            "GROUP_CREATE of chain group {i} (queues of {:#x} and {:#x} bytes)",
            rings[0], rings[1]
        );
        match panthor::group_create(dev, vm, rings, PANTHOR_GROUP_PRIORITY_MEDIUM) {
            Ok(g) => {
                r.ok(&check);
                groups[i] = g;
            }
            Err(e) => {
                r.fail(&check, e);
                return;
            }
        }
    }
    w.groups = Some(groups);
    // Poison in a[1..=64]: only the GPU's stores make them right.
    data.map.write_u32(0, 0);
    for k in 1..=CHAIN as usize {
        data.map.write_u32(k, 0xdead_0000 | k as u32);
    }

    let started = Instant::now();
    let mut prev = bound;
    let mut jobs = Vec::new();
    let mut submitted = Ok(());
    for k in 1..=CHAIN {
        let (g, queue) = chain_slot(k);
        match submit(
            dev,
            groups[g],
            queue,
            code,
            64 * k,
            &chain_stream(k),
            &[prev],
        ) {
            Ok(done) => {
                jobs.push(done);
                prev = done;
            }
            Err(e) => {
                submitted = Err(format!(
                    "job {k} (group {g}, queue {queue}): {e}; group state {:?}",
                    panthor::group_state(dev, groups[g])
                ));
                break;
            }
        }
    }
    if !r.check(
        "the 64 GROUP_SUBMITs of the chain (each job waiting on the one before)",
        submitted,
    ) {
        return;
    }
    let waited = wait(dev, prev);
    let took = started.elapsed();
    let waited = waited.map(|_| ()).map_err(|e| {
        // How far the chain got, for the report.
        let done = (1..=CHAIN)
            .take_while(|&k| data.map.read_u32(k as usize) == chain_value(k))
            .count();
        format!(
            "{e}; a[1..={done}] are right, group states {:?} and {:?}",
            panthor::group_state(dev, groups[0]),
            panthor::group_state(dev, groups[1])
        )
    });
    if !r.check(
        "SYNCOBJ_WAIT on the chain's last job (60 s) returns 0",
        waited,
    ) {
        return;
    }
    // The last job's first, then the others (all done once it is).
    let statuses = std::iter::once((CHAIN, prev))
        .chain((1..).zip(jobs.iter().copied()).take(CHAIN as usize - 1))
        .map(|(k, h)| {
            expect_status(dev, h, FenceStatus::Signalled).map_err(|e| format!("job {k}: {e}"))
        })
        .filter_map(Result::err)
        .take(4)
        .collect::<Vec<_>>();
    r.check(
        "every chain job's fence signalled without an error (sync file status 1)",
        if statuses.is_empty() {
            Ok(())
        } else {
            Err(statuses.join("; "))
        },
    );
    let wrong: Vec<String> = (1..=CHAIN)
        .filter_map(|k| {
            let got = data.map.read_u32(k as usize);
            (got != chain_value(k))
                .then(|| format!("a[{k}] = {got:#x}, expected {}", chain_value(k)))
        })
        .take(4)
        .collect();
    r.check(
        "a[k] = a[k-1] + k² for k = 1..=64, read back through the mapping",
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        },
    );
    for (i, g) in groups.iter().enumerate() {
        r.check(
            &format!("GROUP_GET_STATE of chain group {i}: no fault, no timeout"),
            expect_group_state(dev, *g, (0, 0)),
        );
    }
    r.note(format!(
        "chain: {CHAIN} dependent jobs over 2 groups x 2 queues in {:.1} ms (submits and wait); \
         sum of k^2 for k = 1..={CHAIN} is {}",
        took.as_secs_f64() * 1e3,
        chain_value(CHAIN)
    ));
}

/// A job on a chain group that stores `value` at `out`, and the checks on it: it completes,
/// its fence has no error, the word reads back.
/// Part 5: the flush-ID page.
fn flush_id<W: Write>(r: &mut Report<W>, dev: &Drm, w: &mut World) {
    const AT: u64 = DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET;
    const PAGE: usize = 4096;
    r.check(
        "a writable mmap of the flush-ID page fails with EINVAL",
        expect_errno(
            Mapping::try_shared_writable(dev.file(), PAGE, AT),
            libc::EINVAL,
        ),
    );
    r.check(
        "a private mmap of the flush-ID page fails with EINVAL",
        expect_errno(Mapping::try_private(dev.file(), PAGE, AT), libc::EINVAL),
    );
    r.check(
        "a two-page mmap of the flush-ID page fails with EINVAL",
        expect_errno(
            Mapping::shared_read_only(dev.file(), 2 * PAGE, AT).map(|_| ()),
            libc::EINVAL,
        ),
    );
    const MAP: &str = "mmap of the flush-ID page (one page, shared, read-only)";
    let page = match Mapping::shared_read_only(dev.file(), PAGE, AT) {
        Ok(m) => {
            r.ok(MAP);
            m
        }
        Err(e) => {
            r.fail(MAP, e);
            return;
        }
    };
    r.check(
        "mprotect of the flush-ID mapping to writable fails with EACCES",
        expect_errno(page.try_protect_writable(), libc::EACCES),
    );
    const MOVED: &str = "the flush ID read through the page moves with the binds' cache flushes";
    match (w.vm, &w.code) {
        (Some(vm), Some(code)) if w.code_bound => {
            let before = page.read_u32(0);
            let bound = panthor::vm_bind(
                dev,
                vm,
                0,
                &[panthor::map_op(code.handle, FLUSH_PROBE_VA, CODE_SIZE)],
                &[],
            )
            .and_then(|()| {
                let op = panthor::unmap_op(FLUSH_PROBE_VA, CODE_SIZE);
                panthor::vm_bind(dev, vm, 0, &[op], &[])
            });
            let after = page.read_u32(0);
            if r.check(
                "VM_BIND map and unmap of the code BO at 0x2000000 in the chain's VM",
                bound.or_else(errno("VM_BIND")),
            ) {
                r.note(format!("flush ID {before} before the binds, {after} after"));
                r.check(
                    MOVED,
                    if after != before {
                        Ok(())
                    } else {
                        Err(format!("still {before}"))
                    },
                );
            }
        }
        _ => r.fail(MOVED, "no VM with the code BO bound"),
    }
    w.other_maps.push(("flush-ID page", page));
}

fn store_job(
    dev: &Drm,
    group: u32,
    queue: u32,
    code: &Bo,
    data: &Bo,
    (at, out, value): (u64, u64, u32),
) -> Result<(), String> {
    let done = submit(dev, group, queue, code, at, &store_stream(out, value), &[])?;
    wait(dev, done)?;
    expect_status(dev, done, FenceStatus::Signalled)?;
    let got = data.map.read_u32(out as usize / 4);
    expect_eq("the stored word", got, value)
}

/// Part 6: a job that waits forever times out; the driver recovers.
fn hang<W: Write>(r: &mut Report<W>, dev: &Drm, w: &World) {
    let (Some(vm), Some(code), Some(data), Some(groups)) = (w.vm, &w.code, &w.data, w.groups)
    else {
        r.note("hang: skipped (no VM, code, data or chain groups)");
        return;
    };
    let hung = match panthor::group_create(dev, vm, &[0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM) {
        Ok(g) => {
            r.ok("GROUP_CREATE of a third group (one queue) on the same VM");
            g
        }
        Err(e) => {
            return r.fail(
                "GROUP_CREATE of a third group (one queue) on the same VM",
                e,
            )
        }
    };
    // Waits until the word at HANG_WORD exceeds 0; nothing ever writes it.
    let prog = [
        instr::move48(0, DATA_VA + HANG_WORD),
        instr::move48(2, 0),
        instr::sync_wait64(instr::Condition::Greater, 0, 2),
    ];
    const SUBMIT: &str =
        "GROUP_SUBMIT of a job that waits forever (SYNC_WAIT64 > 0 on a zero word)";
    let stuck = match submit(dev, hung, 0, code, HANG_STREAM, &prog, &[]) {
        Ok(s) => {
            r.ok(SUBMIT);
            s
        }
        Err(e) => return r.fail(SUBMIT, e),
    };
    match wait(dev, stuck) {
        Ok(took) => {
            r.ok("the hung job's syncobj signals within 60 s (the job timeout)");
            r.note(format!(
                "hang: the job failed {:.1} ms into the wait",
                took.as_secs_f64() * 1e3
            ));
        }
        Err(e) => {
            r.fail(
                "the hung job's syncobj signals within 60 s (the job timeout)",
                e,
            );
            return;
        }
    }
    r.check(
        "the hung job's fence carries ETIMEDOUT (sync file status -110)",
        expect_status(dev, stuck, FenceStatus::Error(Errno(libc::ETIMEDOUT))),
    );
    r.check(
        "GROUP_GET_STATE of the hung group has TIMEDOUT",
        match panthor::group_state(dev, hung) {
            Ok((s, _)) if s & DRM_PANTHOR_GROUP_STATE_TIMEDOUT != 0 => Ok(()),
            Ok((s, q)) => Err(format!("state {s:#x}, fatal queues {q:#x}")),
            Err(e) => Err(format!("GROUP_GET_STATE: {e}")),
        },
    );
    // A job that only synchronises: nothing in it is wrong but its group.
    r.check(
        "GROUP_SUBMIT to the timed-out group fails with EINVAL",
        expect_errno(
            panthor::group_submit(dev, hung, &[Job::default()]),
            libc::EINVAL,
        ),
    );
    r.check("the VM stays usable after the timeout", vm_usable(dev, vm));
    r.check(
        "after the timeout a job on chain group 0 completes (status 1) and its store reads back",
        store_job(
            dev,
            groups[0],
            0,
            code,
            data,
            (RECOVERY_STREAM, RECOVERY_OUT, RECOVERY_VALUE),
        ),
    );
    r.check(
        "chain group 0 still reports no fault and no timeout",
        expect_group_state(dev, groups[0], (0, 0)),
    );
}

/// Part 7: a page fault kills only its group and makes only its VM unusable.
fn fault<W: Write>(r: &mut Report<W>, dev: &Drm, w: &mut World) {
    let vm2 = match panthor::vm_create(dev) {
        Ok(id) if id != 0 && Some(id) != w.vm => {
            r.ok("VM_CREATE of a second VM");
            id
        }
        Ok(id) => {
            return r.fail(
                "VM_CREATE of a second VM",
                format!("got id {id}, first {:?}", w.vm),
            )
        }
        Err(e) => return r.fail("VM_CREATE of a second VM", e),
    };
    let Some(code2) = bo_mapped(r, dev, "second code", CODE_SIZE) else {
        return;
    };
    let op = panthor::map_op(code2.handle, CODE_VA, CODE_SIZE);
    let bound = r.check(
        "VM_BIND of the second code BO at 0x1000000 in the second VM",
        panthor::vm_bind(dev, vm2, 0, &[op], &[]).or_else(errno("VM_BIND")),
    );
    let result = if bound {
        faulting_group(r, dev, vm2, &code2)
    } else {
        None
    };
    w.other_maps.push(("second code", code2.map));
    if result.is_none() {
        return;
    }
    if let Some(vm) = w.vm {
        r.check("the first VM stays usable", vm_usable(dev, vm));
    }
    if let (Some(code), Some(data), Some(groups)) = (&w.code, &w.data, w.groups) {
        r.check(
            "a job on chain group 1 (queue 1) still completes (status 1) and its store reads back",
            store_job(
                dev,
                groups[1],
                1,
                code,
                data,
                (AFTER_FAULT_STREAM, AFTER_FAULT_OUT, AFTER_FAULT_VALUE),
            ),
        );
    }
}

/// The faulting group of part 6 and the checks on it; `None` if it could not run.
fn faulting_group<W: Write>(r: &mut Report<W>, dev: &Drm, vm2: u32, code2: &Bo) -> Option<()> {
    let group =
        match panthor::group_create(dev, vm2, &[0x1000, 0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM) {
            Ok(g) => {
                r.ok("GROUP_CREATE of a group with two queues on the second VM");
                g
            }
            Err(e) => {
                r.fail(
                    "GROUP_CREATE of a group with two queues on the second VM",
                    e,
                );
                return None;
            }
        };
    // A store to an address nothing maps, on queue 1.
    let prog = [
        instr::move48(0, FAULT_VA),
        instr::move32(2, 1),
        instr::store_multiple(2, 0, 0, 1),
    ];
    const SUBMIT: &str = "GROUP_SUBMIT of a job on queue 1 storing to the unmapped 0x70000000";
    let done = match submit(dev, group, 1, code2, 0, &prog, &[]) {
        Ok(d) => {
            r.ok(SUBMIT);
            d
        }
        Err(e) => {
            r.fail(SUBMIT, e);
            return None;
        }
    };
    if !r.check(
        "the faulting job's syncobj signals within 60 s",
        wait(dev, done).map(|_| ()),
    ) {
        return None;
    }
    r.check(
        "the faulting job's fence carries EFAULT (sync file status -14)",
        expect_status(dev, done, FenceStatus::Error(Errno(libc::EFAULT))),
    );
    r.check(
        "GROUP_GET_STATE of the faulting group: FATAL_FAULT, fatal queues 0b10",
        expect_group_state(dev, group, (DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, 1 << 1)),
    );
    r.check(
        "VM_GET_STATE of the second VM: UNUSABLE",
        match panthor::vm_state(dev, vm2) {
            Ok(s) => expect_eq("state", s, DRM_PANTHOR_VM_STATE_UNUSABLE),
            Err(e) => Err(format!("VM_GET_STATE: {e}")),
        },
    );
    // A job that only synchronises: nothing in it is wrong but its group.
    r.check(
        "GROUP_SUBMIT to the faulted group fails with EINVAL",
        expect_errno(
            panthor::group_submit(dev, group, &[Job::default()]),
            libc::EINVAL,
        ),
    );
    r.check(
        "GROUP_CREATE on the unusable VM fails with EINVAL",
        expect_errno(
            panthor::group_create(dev, vm2, &[0x1000], PANTHOR_GROUP_PRIORITY_MEDIUM),
            libc::EINVAL,
        ),
    );
    Some(())
}

/// The board's interrupt lines as `/proc/interrupts` counts them: each of Tyr's three
/// handlers (`tyr-job`, `tyr-mmu`, `tyr-gpu`) was reached through the interrupt controller
/// during the workload (the job line by every completion, the MMU line by the fault, the GPU
/// line by the cache flushes' completions).
#[cfg(target_arch = "aarch64")]
fn interrupt_counts<W: Write>(r: &mut Report<W>) {
    let text = match std::fs::read_to_string("/proc/interrupts") {
        Ok(t) => t,
        Err(e) => {
            r.fail("read /proc/interrupts", e);
            return;
        }
    };
    for label in ["tyr-job", "tyr-mmu", "tyr-gpu"] {
        // `  14:   123   45   GICv3  92 Level     tyr-job`: the counts are the CPUs' columns.
        let line = text.lines().find(|l| l.split_whitespace().last() == Some(label));
        let total = line.map(|l| {
            l.split_whitespace()
                .skip(1)
                .map_while(|w| w.parse::<u64>().ok())
                .sum::<u64>()
        });
        if let Some(l) = line {
            r.note(l.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        r.check(
            &format!("/proc/interrupts counts {label} interrupts through the GIC"),
            match (line, total) {
                (Some(_), Some(n)) if n > 0 => Ok(()),
                (Some(l), _) => Err(format!("none counted: `{}`", l.trim())),
                (None, _) => Err(format!("no line for {label}")),
            },
        );
    }
}

/// Part 8: unbind, unmap, close; nothing may be left. Without `dev` (the render node did not
/// open) only the unbind and the counts after it.
fn unplug<W: Write>(r: &mut Report<W>, dev: Option<Drm>, w: World) {
    #[cfg(target_arch = "aarch64")]
    interrupt_counts(r);
    // Everything above stepped the simulated GPU from the driver's own threads (the probe, the
    // ioctls, the work items): what those paths left of their kernel stacks.
    let left = panthor::stack_least_left(panthor::STACK_PATH);
    if let Ok(Some(n)) = left {
        r.note(format!("least kernel stack left where the GPU ran: {n} bytes"));
    }
    r.check(
        &format!(
            "the simulated GPU always ran with at least {} bytes of kernel stack left",
            panthor::STACK_MARGIN
        ),
        match left {
            Ok(Some(n)) if n >= panthor::STACK_MARGIN => Ok(()),
            Ok(Some(n)) => Err(format!("only {n} bytes were left")),
            Ok(None) => Err("it never ran on a task's stack".into()),
            Err(e) => Err(e),
        },
    );
    match LiveCounts::read(panthor::LIVE_PATH) {
        Ok(c) if dev.is_some() => {
            r.note(format!("live counts before the unplug: {c}"));
            r.check(
                "before the unplug every live count is non-zero (the BOs and mappings are held)",
                if c.zeros().is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} at 0 in `{c}`", c.zeros().join(", ")))
                },
            );
        }
        Ok(c) => r.note(format!("live counts before the unplug: {c}")),
        Err(e) => r.fail("read the live counts before the unplug", e),
    }
    let device = the_device();
    r.check(&format!("write `{device}` to {UNBIND}"), unbind(device));
    let Some(dev) = dev else {
        leak_counts(r, Instant::now());
        return;
    };
    r.check(
        "after the unbind DEV_QUERY fails with ENODEV",
        expect_errno(
            panthor::dev_query::<GpuInfo>(&dev, DRM_PANTHOR_DEV_QUERY_GPU_INFO).map(|i| i.gpu_id),
            libc::ENODEV,
        ),
    );
    if let Some(vm) = w.vm {
        r.check(
            "after the unbind VM_GET_STATE fails with ENODEV",
            expect_errno(panthor::vm_state(&dev, vm), libc::ENODEV),
        );
    }
    r.check(
        "after the unbind an mmap of the flush-ID page fails with ENODEV",
        expect_errno(
            Mapping::shared_read_only(dev.file(), 4096, DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET)
                .map(|_| ()),
            libc::ENODEV,
        ),
    );
    let mut maps: Vec<(&str, Mapping)> = Vec::new();
    maps.extend(w.code.map(|b| ("code", b.map)));
    maps.extend(w.data.map(|b| ("data", b.map)));
    maps.extend(w.other_maps);
    if !maps.is_empty() {
        let count = maps.len();
        let unmapped: Vec<String> = maps
            .into_iter()
            .filter_map(|(name, m)| m.unmap().err().map(|e| format!("{name}: {e}")))
            .collect();
        r.check(
            &format!("munmap of every mapping ({count})"),
            if unmapped.is_empty() {
                Ok(())
            } else {
                Err(unmapped.join("; "))
            },
        );
    }
    r.check(
        "close of the render node",
        dev.close().or_else(errno("close")),
    );
    let closed = Instant::now();
    let t = Instant::now();
    let gone = loop {
        match std::fs::metadata(drm::RENDER_NODE) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break Ok(()),
            _ if t.elapsed() > RELEASE_WAIT => {
                break Err(format!("still there after {} s", RELEASE_WAIT.as_secs()))
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    r.check("/dev/dri/renderD128 goes away after the unbind", gone);
    leak_counts(r, closed);
}

/// The counts must drop to 0 within [`RELEASE_WAIT`] of `closed` (when the last file was
/// closed; the release may be deferred).
fn leak_counts<W: Write>(r: &mut Report<W>, closed: Instant) {
    let t = closed;
    let last = loop {
        let c = LiveCounts::read(panthor::LIVE_PATH);
        match &c {
            Ok(c) if c.all_zero() => break Ok(*c),
            _ if t.elapsed() > RELEASE_WAIT => break c,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    match last {
        Ok(c) => {
            r.note(format!(
                "live counts after the unplug and the last close: {c} ({:.0} ms after it)",
                t.elapsed().as_secs_f64() * 1e3
            ));
            r.check(
                "every live count is 0 within 2 s of the last close (nothing leaked)",
                if c.all_zero() {
                    Ok(())
                } else {
                    Err(format!("`{c}` after {} s", RELEASE_WAIT.as_secs()))
                },
            );
        }
        Err(e) => r.fail(
            "every live count is 0 within 2 s of the last close (nothing leaked)",
            e,
        ),
    }
}

/// Writes the device's name to the driver's unbind file, from a thread of its own: `Err` if the
/// write fails or does not return within [`UNBIND_WAIT`] (the thread is then left blocked).
fn unbind(device: String) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("unbind".into())
        .spawn(move || {
            let _ = tx.send(sys::write_existing(UNBIND, device.as_bytes()));
        })
        .map_err(|e| format!("cannot start a thread for the write: {e}"))?;
    match rx.recv_timeout(UNBIND_WAIT) {
        Ok(written) => written.or_else(errno("write")),
        Err(_) => Err(format!(
            "the write did not return within {} s",
            UNBIND_WAIT.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_adds_squares() {
        assert_eq!(chain_value(1), 1);
        assert_eq!(chain_value(2), 5);
        assert_eq!(chain_value(CHAIN), 89_440);
        let mut sum = 0u32;
        for k in 1..=CHAIN {
            sum += (k * k) as u32;
            assert_eq!(chain_value(k), sum);
        }
    }

    #[test]
    fn chain_jobs_alternate_groups_and_queues_as_the_demo() {
        let slots: Vec<_> = (1..=4).map(chain_slot).collect();
        assert_eq!(slots, [(1, 0), (0, 1), (1, 1), (0, 0)]);
        // Job k reads a[k-1], waits for the load, and stores a[k] (offset 4 from it).
        let s = chain_stream(3);
        assert_eq!(s[0], instr::move48(0, DATA_VA + 8));
        assert_eq!(s[2], instr::wait(1));
        assert_eq!(s[4], instr::store_multiple(2, 0, 4, 1));
    }

    #[test]
    fn sanity_checks_reject_what_the_workload_cannot_use() {
        let g610 = GpuInfo {
            gpu_id: G610_GPU_ID,
            shader_present: 0x5_0005,
            as_present: 0xff,
            l2_present: 1,
            tiler_present: 1,
            mmu_features: 0x2830,
            ..GpuInfo::default()
        };
        assert_eq!(gpu_info_sane(&g610), Ok(()));
        let holes = GpuInfo {
            as_present: 0b101,
            ..g610
        };
        assert!(gpu_info_sane(&holes).unwrap_err().contains("as_present"));
        let no_core0 = GpuInfo {
            shader_present: 0x5_0004,
            ..g610
        };
        assert!(gpu_info_sane(&no_core0).unwrap_err().contains("core 0"));
        let csif = CsifInfo {
            csg_slot_count: 8,
            cs_slot_count: 8,
            cs_reg_count: 96,
            scoreboard_slot_count: 8,
            unpreserved_cs_reg_count: 4,
            pad: 0,
        };
        assert_eq!(csif_info_sane(&csif), Ok(()));
        let one_stream = CsifInfo {
            cs_slot_count: 1,
            ..csif
        };
        assert!(csif_info_sane(&one_stream).is_err());
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(DATA_SIZE), "2 MiB");
        assert_eq!(bytes(CODE_SIZE), "64 KiB");
        assert_eq!(bytes(4097), "4097 bytes");
    }

    #[test]
    fn waits_share_a_budget() {
        assert_eq!(wait_limit_ns(Duration::ZERO), WAIT_NS);
        assert_eq!(wait_limit_ns(Duration::from_secs(90)), WAIT_NS);
        assert_eq!(wait_limit_ns(Duration::from_secs(120)), 30_000_000_000);
        assert_eq!(wait_limit_ns(Duration::from_secs(150)), 0);
        assert_eq!(wait_limit_ns(Duration::from_secs(400)), 0);
    }

    #[test]
    fn errno_expectations() {
        assert_eq!(
            expect_errno::<()>(Err(Errno(libc::ENODEV)), libc::ENODEV),
            Ok(())
        );
        assert_eq!(
            expect_errno(Ok(7u32), libc::ENODEV).unwrap_err(),
            "expected ENODEV (19), got success (7)"
        );
    }

    #[test]
    fn without_the_device_the_program_fails_cleanly() {
        if std::path::Path::new(drm::RENDER_NODE).exists()
            || std::path::Path::new(panthor::LIVE_PATH).exists()
        {
            return;
        }
        let mut r = Report::new(PROGRAM, Vec::new());
        checks(&mut r);
        r.summary();
        let text = String::from_utf8(r.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with(
            "userspace: tyr_demo: FAIL /sys/kernel/tyr/live reads as one well-formed line at the start: /sys/kernel/tyr/live: ENOENT"
        ));
        assert!(lines[1].starts_with("userspace: tyr_demo: FAIL open /dev/dri/renderD128: ENOENT"));
        // Not PID 1: nothing is unbound.
        assert_eq!(
            lines[2],
            "userspace: tyr_demo: not PID 1: no unbind (it would unplug this machine's GPU), no leak check"
        );
        assert_eq!(lines[3], "userspace: tyr_demo: summary: 0 passed, 2 failed");
    }
}
