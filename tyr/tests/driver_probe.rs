// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Probe on the simulated G610: success with Tyr's log lines, the DRM device registered last,
//! and the refusals (unknown GPU, a reset that never completes, an L2 that never powers up).

mod driver_common;

use drm_ctx::device;
use mali_sim::{regs, Config};
use tyr::backend::Backend;
use tyr::host::HostBackend;
use tyr::{driver, gpu, Error};

#[test]
fn probe_succeeds_and_logs_like_tyr() {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::g610()).unwrap();
    let dev = reg.device();
    assert!(dev.is_registered());
    assert_eq!(dev.gpu_info.model.name, "g610");
    assert_eq!(dev.gpu_info.raw.gpu_id, 0xa867_0005);
    assert_eq!(dev.gpu_info.raw.shader_present, 0x5_0005);
    assert_eq!(dev.gpu_info.num_as(), 8);
    assert_eq!((dev.gpu_info.va_bits(), dev.gpu_info.pa_bits()), (48, 40));
    // The firmware interface region was allocated before registration.
    assert_eq!(dev.fw_objects.len(), 1);
    assert_eq!(dev.fw_objects[0].size(), driver::FW_INTERFACE_SIZE);
    // The firmware lines, panthor's: the image, its header and its git sha.
    let (fw_lines, lines): (Vec<_>, Vec<_>) = dev
        .backend
        .log_lines()
        .into_iter()
        .partition(|l| l.starts_with("Firmware"));
    let image = dev.backend.firmware();
    assert_eq!(
        fw_lines[0],
        format!(
            "Firmware image 'arm/mali/arch10.8/mali_csffw.bin': {} bytes",
            image.bytes.len()
        )
    );
    assert!(fw_lines[1].starts_with("Firmware header version 0.3, version hash "));
    // The sha the image's build-info text carries, found without the driver's parser.
    let sha = driver_common::build_info_sha(&image.bytes);
    if matches!(image.origin, tyr::host::FirmwareOrigin::Simulator) {
        assert_eq!(sha, mali_sim::firmware::GIT_SHA);
    }
    assert_eq!(
        fw_lines.last().unwrap(),
        &format!("Firmware git sha: {sha}")
    );
    assert_eq!(
        lines,
        [
            "mali-g610 GPU_ID 0xa8670005 major 0x0 minor 0x0 status 0x5",
            "Features: L2:0x7120306 Tiler:0x809 Mem:0x301 MMU:0x2830 AS:0xff",
            "shader_present=0x0000000000050005 l2_present=0x0000000000000001 tiler_present=0x0000000000000001",
            "Tyr initialized correctly.",
        ]
    );
    // An idle GPU powers down after the idle timeout, which simulated time may already have
    // reached: keep it up, and powered, for what follows.
    let pm = &dev.shared().pm;
    pm.set_idle_timeout(std::time::Duration::from_secs(3600));
    assert_eq!(
        pm.wake(&dev.backend, &dev.gpu_info, dev.fw.base, || {
            dev.firmware.reload(&dev.backend, false, false)
        }),
        Ok(true)
    );
    let gpu = dev.backend.gpu();
    assert_eq!(gpu.read32(regs::L2_READY_LO), 1);
    // The MCU runs, with the firmware interface mapped in address space 0.
    assert_eq!(gpu.read32(regs::MCU_STATUS), regs::mcu::ENABLED);
    assert_eq!(
        gpu.read32(regs::JOB_IRQ_RAWSTAT),
        0,
        "boot interrupt acknowledged"
    );
    assert_eq!(
        (dev.csif_info.csg_slot_count, dev.csif_info.cs_reg_count),
        (8, 96)
    );
    assert_eq!(
        gpu.read32(regs::GPU_IRQ_RAWSTAT) & regs::gpu_irq::RESET_COMPLETED,
        0
    );
    gpu.with(|g| {
        assert_eq!(g.resets_completed(), 1);
        assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors());
    });
}

#[test]
fn releasing_the_device_stops_the_mcu_and_frees_its_memory() {
    let parent = device::Device::new("mali").unwrap();
    let backend = HostBackend::g610();
    let gpu = backend.gpu().clone();
    let reg = driver::probe(&parent, backend).unwrap();
    assert!(gpu.memory().allocated_pages() > 0);
    drop(reg);
    assert_eq!(gpu.read32(regs::MCU_STATUS), regs::mcu::DISABLED);
    assert_eq!(gpu.read32(regs::as_reg(0, regs::AS_TRANSCFG_LO)) & 0xf, 1);
    assert_eq!(
        gpu.memory().allocated_pages(),
        0,
        "firmware region and page tables freed"
    );
    gpu.with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
}

#[test]
fn unknown_gpu_is_refused() {
    let mut cfg = Config::g610();
    cfg.identity.gpu_id = 0x9091_0000; // a Mali-G57 (arch 9)
    let b = HostBackend::new(cfg);
    assert_eq!(
        gpu::probe(&b).map(|_| ()),
        Err(Error::UnknownGpu {
            gpu_id: 0x9091_0000
        })
    );
    assert!(b.log_lines()[0].starts_with("mali-unknown GPU_ID 0x90910000"));
    assert_eq!(
        b.log_lines().last().unwrap(),
        "Unsupported GPU (GPU_ID 0x90910000)."
    );

    let parent = device::Device::new("mali").unwrap();
    let mut cfg = Config::g610();
    cfg.identity.gpu_id = 0xdead_0000;
    let r = driver::probe(&parent, HostBackend::new(cfg));
    assert_eq!(r.err().map(|e| e.to_errno()), Some(-19));
}

#[test]
fn reset_that_never_completes_times_out() {
    let mut cfg = Config::g610();
    cfg.faults.reset_never_completes = true;
    let b = HostBackend::new(cfg);
    assert_eq!(gpu::probe(&b).map(|_| ()), Err(Error::TimedOut));
    assert_eq!(b.log_lines(), ["GPU reset failed."]);
    // It waited the whole timeout in simulated time, and not much longer.
    let waited = b.clock_now_ns();
    assert!((100_000_000..=102_000_000).contains(&waited), "{waited}");
    // The L2 was never asked to power up.
    assert_eq!(b.gpu().read32(regs::L2_READY_LO), 0);

    let parent = device::Device::new("mali").unwrap();
    let mut cfg = Config::g610();
    cfg.faults.reset_never_completes = true;
    let r = driver::probe(&parent, HostBackend::new(cfg));
    assert_eq!(r.err().map(|e| e.to_errno()), Some(-110));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a whole probe (minutes under Miri); probe_succeeds_and_logs_like_tyr runs the same code"
)]
fn reset_failing_once_then_retry_succeeds() {
    let mut cfg = Config::g610();
    cfg.faults.reset_fails_once = true;
    let b = HostBackend::new(cfg);
    assert_eq!(gpu::probe(&b).map(|_| ()), Err(Error::TimedOut));
    assert_eq!(gpu::probe(&b).map(|i| i.model.name), Ok("g610"));
}

#[test]
fn l2_that_never_powers_up_times_out() {
    let mut cfg = Config::g610();
    cfg.faults.l2_never_powers_up = true;
    let b = HostBackend::new(cfg);
    assert_eq!(gpu::probe(&b).map(|_| ()), Err(Error::TimedOut));
    assert_eq!(b.log_lines(), ["Failed to power on the GPU."]);
}

trait Now {
    fn clock_now_ns(&self) -> u64;
}

impl Now for HostBackend {
    fn clock_now_ns(&self) -> u64 {
        use register::io::poll::PollClock;
        self.clock().now().as_nanos() as u64
    }
}
