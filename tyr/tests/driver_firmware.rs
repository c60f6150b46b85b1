// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The firmware image at probe: every kind of bad image refused with `EINVAL` and no panic,
//! the simulated MCU refusing sections that are not where or what its image says (`ENODEV`),
//! writable sections reloaded before every cold boot, and Arm's image when
//! `TYR_FIRMWARE_DIR` holds it.

mod driver_common;

use mali_sim::firmware::{CheckError, IMAGE};
use mali_sim::Config;
use tyr::fw::image::build::Builder;
use tyr::fw::image::flags::*;
use tyr::fw::image::{ImageError, HEADER_SIZE, SHARED_REGION_VA};
use tyr::host::HostBackend;
use tyr::{driver, Error};

fn shared() -> (u32, (u32, u32)) {
    (
        RD | WR | SHARED | ZERO | CACHE_MODE_CACHED_COHERENT,
        (SHARED_REGION_VA, SHARED_REGION_VA + 0x1_0000),
    )
}

fn good() -> Builder {
    with_code(RD | EX | CACHE_MODE_CACHED, (0, 0x1000), b"code")
}

/// [`good`]'s image with its code section given: flags, range and bytes.
fn with_code(flags: u32, range: (u32, u32), code: &[u8]) -> Builder {
    let (f, va) = shared();
    Builder::new()
        .section(flags, range, code, b"")
        .section(
            RD | WR | ZERO | CACHE_MODE_CACHED,
            (0x1000, 0x3000),
            b"data",
            b"",
        )
        .section(f, va, b"", b"")
        .build_info(b"git_sha: test\0")
}

/// Probes with the driver given `driver` and the MCU `mcu`: the result and the log.
fn probe(driver: Vec<u8>, mcu: Option<&[u8]>) -> (Result<(), Error>, Vec<String>) {
    let parent = drm_ctx::device::Device::new("mali").unwrap();
    let b = HostBackend::with_images(Config::g610(), driver, mcu);
    match driver::probe(&parent, b) {
        Ok(reg) => (Ok(()), reg.device().backend.log_lines()),
        Err(e) => (Err(e), Vec::new()),
    }
}

#[test]
#[cfg_attr(miri, ignore = "a probe per image")]
fn the_test_image_and_the_sim_image_load() {
    let img = good().finish();
    let (r, log) = probe(img.clone(), Some(&img));
    assert_eq!(r, Ok(()));
    assert!(log.iter().any(|l| l == "Firmware git sha: test"), "{log:?}");
    let (r, _) = probe(IMAGE.to_vec(), Some(&IMAGE));
    assert_eq!(r, Ok(()));
}

/// Arm's image loads and the MCU accepts it, when `TYR_FIRMWARE_DIR` holds it; cold boots
/// after power-downs reload its writable section.
#[test]
#[cfg_attr(miri, ignore = "reads a file")]
fn the_arm_image_loads_from_tyr_firmware_dir() {
    let b = HostBackend::g610();
    if std::env::var_os("TYR_FIRMWARE_DIR").is_none() {
        println!("skipped: TYR_FIRMWARE_DIR is not set (cargo xtask ci sets it)");
        return;
    }
    // Set (as CI sets it): the image must come from there.
    assert!(
        matches!(b.firmware().origin, tyr::host::FirmwareOrigin::EnvDir(_)),
        "TYR_FIRMWARE_DIR has no {}",
        b.firmware().path
    );
    // The sha the image's build-info text carries, found without the driver's parser.
    let sha = driver_common::build_info_sha(&b.firmware().bytes);
    let parent = drm_ctx::device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, b).unwrap();
    let dev = reg.device();
    assert_eq!(dev.firmware.git_sha(), Some(sha.as_str()));
    assert!(dev.firmware.sections().len() >= 2);
    let pm = &dev.shared().pm;
    pm.set_idle_timeout(core::time::Duration::from_secs(3600));
    let (b, info, base) = (&dev.backend, &dev.gpu_info, dev.fw.base);
    for _ in 0..2 {
        let _ = pm.power_down(b, info, base, || true);
        let reload = || dev.firmware.reload(b, false, false);
        assert_eq!(pm.wake(b, info, base, reload), Ok(true));
        assert_eq!(b.gpu().with(|g| g.firmware_check()), None);
    }
}

/// Every kind of bad image is refused at probe with `EINVAL`, its reason logged, no panic.
#[test]
#[cfg_attr(miri, ignore = "a probe per image")]
fn bad_images_are_refused_at_probe() {
    let (f, va) = shared();
    let mut bad = Vec::new();
    let mut b = good();
    b.magic = 0xdead_beef;
    bad.push((b.finish(), ImageError::BadMagic(0xdead_beef)));
    let mut b = good();
    b.version.1 = 1;
    bad.push((
        b.finish(),
        ImageError::UnsupportedVersion { major: 1, minor: 3 },
    ));
    let mut t = good().finish();
    let len = t.len();
    t[16..20].copy_from_slice(&(len as u32 + 8).to_le_bytes());
    bad.push((
        t,
        ImageError::Truncated {
            size: len as u32 + 8,
            len,
        },
    ));
    let mut t = good().finish();
    t[HEADER_SIZE + 1] = 0xfc;
    bad.push((
        t,
        ImageError::EntryTooLong {
            offset: HEADER_SIZE,
        },
    ));
    let mut t = good().finish();
    let at = HEADER_SIZE + 4 + 16;
    t[at..at + 4].copy_from_slice(&(len as u32 + 0x100).to_le_bytes());
    bad.push((
        t,
        ImageError::SectionDataPastEnd {
            end: len as u32 + 0x100,
            len,
        },
    ));
    bad.push((
        good().section(RD, (0x8000, 0x8100), b"", b"").finish(),
        ImageError::SectionVaUnaligned {
            start: 0x8000,
            end: 0x8100,
        },
    ));
    bad.push((
        good()
            .section(RD, (0x8000, 0x9000), &[7; 0x1004], b"")
            .finish(),
        ImageError::SectionDataLargerThanVa { start: 0x8000 },
    ));
    bad.push((
        good()
            .section(RD | 1 << 9, (0x8000, 0x9000), b"", b"")
            .finish(),
        ImageError::UnsupportedFlags(RD | 1 << 9),
    ));
    bad.push((
        good().section(RD, (0x2000, 0x4000), b"", b"").finish(),
        ImageError::Overlap {
            first: 0x1000,
            second: 0x2000,
        },
    ));
    bad.push((
        Builder::new().section(RD, (0, 0x1000), b"", b"").finish(),
        ImageError::NoSharedRegion,
    ));
    bad.push((
        Builder::new().section(f & !SHARED, va, b"", b"").finish(),
        ImageError::SharedNotShared,
    ));
    bad.push((
        good().raw(12, 0, b"").finish(),
        ImageError::UnknownMandatoryEntry(12),
    ));
    for (img, want) in bad {
        let parent = drm_ctx::device::Device::new("mali").unwrap();
        let b = HostBackend::with_images(Config::g610(), img, None);
        let gpu = b.gpu().clone();
        let r = driver::probe(&parent, b).map(|_| ());
        assert_eq!(r, Err(Error::Invalid), "{want}");
        // The MCU never started.
        assert_eq!(
            gpu.read32(mali_sim::regs::MCU_STATUS),
            mali_sim::regs::mcu::DISABLED,
            "{want}"
        );
    }
    // The reason is logged with the parser's message.
    let msg = format!("{}", ImageError::BadMagic(0xdead_beef));
    assert_eq!(msg, "invalid firmware magic 0xdeadbeef");
}

/// The MCU refuses an image whose sections are not where, or not what, its image says:
/// the probe fails with `ENODEV` and no panic, and the simulator says why.
#[test]
#[cfg_attr(miri, ignore = "a probe per image")]
fn the_mcu_refuses_misplaced_or_altered_sections() {
    let mcu = good().finish();
    let cases = [
        // The code section one page off.
        (
            with_code(RD | EX | CACHE_MODE_CACHED, (0x1_0000, 0x1_1000), b"code").finish(),
            CheckError::NotMapped { va: 0 },
        ),
        // One byte of the code different.
        (
            with_code(RD | EX | CACHE_MODE_CACHED, (0, 0x1000), b"codf").finish(),
            CheckError::WrongData { va: 0 },
        ),
        // The read-only code section mapped writable.
        (
            with_code(RD | WR | EX | CACHE_MODE_CACHED, (0, 0x1000), b"code").finish(),
            CheckError::WrongPermissions { va: 0 },
        ),
    ];
    for (driver_image, want) in cases {
        let parent = drm_ctx::device::Device::new("mali").unwrap();
        let b = HostBackend::with_images(Config::g610(), driver_image, Some(&mcu));
        let gpu = b.gpu().clone();
        let r = driver::probe(&parent, b).map(|_| ());
        assert_eq!(r, Err(Error::NoDevice), "{want}");
        assert_eq!(gpu.with(|g| g.firmware_check()), Some(want));
        assert_eq!(
            gpu.read32(mali_sim::regs::MCU_STATUS),
            mali_sim::regs::mcu::FATAL
        );
    }
}

/// A GPU that powers down and up boots its MCU cold: the driver reloads the data section
/// the firmware wrote to, or the MCU would refuse it.
#[test]
#[cfg_attr(miri, ignore = "a probe and power cycles")]
fn writable_sections_are_reloaded_before_a_cold_boot() {
    let parent = drm_ctx::device::Device::new("mali").unwrap();
    let b = HostBackend::with_firmware(Config::g610(), IMAGE.to_vec());
    let reg = driver::probe(&parent, b).unwrap();
    let dev = reg.device();
    let pm = &dev.shared().pm;
    pm.set_idle_timeout(core::time::Duration::from_secs(3600));
    let (b, info, base) = (&dev.backend, &dev.gpu_info, dev.fw.base);
    for _ in 0..2 {
        let _ = pm.power_down(b, info, base, || true);
        assert!(!pm.is_powered());
        assert_eq!(pm.wake(b, info, base, || {}), Err(Error::NoDevice));
        assert_eq!(
            b.gpu().with(|g| g.firmware_check()),
            Some(CheckError::NotZeroed { va: 0x0200_1000 })
        );
        // With the reload it boots (the MCU disabled again first, as after a failure).
        b.gpu()
            .write32(mali_sim::regs::MCU_CONTROL, mali_sim::regs::mcu::DISABLED);
        tyr::gpu::power_off(b, &info.raw).unwrap();
        assert_eq!(
            pm.wake(b, info, base, || dev.firmware.reload(b, false, false)),
            Ok(true)
        );
        assert_eq!(b.gpu().with(|g| g.firmware_check()), None);
    }
}
