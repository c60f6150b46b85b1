// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Loading the firmware image into the MCU's address space (panthor's `panthor_fw_load`).
//!
//! At probe the driver asks its backend for `arm/mali/arch<major>.<minor>/mali_csffw.bin`
//! ([`firmware_path`], the architecture from `GPU_ID`), checks it ([`Image::parse`]), gives
//! every section buffer object of its size, copies the section's data in (and zeroes the rest
//! where the image says so), and maps it in the MCU's VM (address space 0) at the section's
//! address: read-only unless writable, not executable unless executable, uncached unless the
//! section's cache mode is "cached" (panthor maps the coherent modes uncached too). The
//! section at [`MCU_SHARED_REGION_START`] is the interface region.
//!
//! The firmware changes its writable sections as it runs; before every cold boot (the MCU
//! enabled from disabled, after a power-down) the driver loads their data again
//! ([`Firmware::reload`]), and after a GPU reset every section, read-only ones too. The shared
//! section is loaded once, at probe: its contents are the interface, which the firmware
//! publishes again at every boot, and this driver keeps its queues' interface words there
//! (panthor gives them buffers of their own), so it clears its requests itself instead.
//!
//! The driver keeps the file ([`Backend::Firmware`]) for those reloads, and its path, size,
//! header and git sha for the logs and for [`Firmware::describe`].

use core::fmt::{self, Write as _};

use drm_ctx::drm::{gem, AnyCtx};
use drm_ctx::types::ARef;

use super::image::{BuildInfo, CacheMode, Image, Section};
use super::{boot, MCU_SHARED_REGION_START};
use crate::backend::{Backend, DmaMemory, Words};
use crate::gem::{FwBoRef, McuVm, TyrBo};
use crate::mmu::{self, MCU_AS};
use crate::vm::{self, BindReq, VmLayout};
use crate::{dev_err, dev_info, env, gpu, uapi, Error, Result};

/// Longest firmware path ([`firmware_path`]).
const PATH_MAX: usize = 48;

/// The path of a firmware file, relative to the firmware directory.
#[derive(Clone, Copy)]
pub struct FwPath {
    buf: [u8; PATH_MAX],
    len: usize,
}

impl FwPath {
    /// The path.
    pub fn as_str(&self) -> &str {
        // Only `write_str` fills the buffer, with whole `str`s.
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("")
    }
}

impl fmt::Write for FwPath {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl fmt::Debug for FwPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FwPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The firmware path for the GPU whose `GPU_ID` is `gpu_id`:
/// `arm/mali/arch<major>.<minor>/mali_csffw.bin`.
///
/// # Examples
///
/// ```
/// assert_eq!(
///     tyr::fw::firmware_path(0xa867_0005).as_str(),
///     "arm/mali/arch10.8/mali_csffw.bin"
/// );
/// ```
pub fn firmware_path(gpu_id: u32) -> FwPath {
    let mut p = FwPath {
        buf: [0; PATH_MAX],
        len: 0,
    };
    // At most 46 bytes: never fails.
    let _ = write!(
        p,
        "arm/mali/arch{}.{}/mali_csffw.bin",
        gpu_id >> 28,
        (gpu_id >> 24) & 0xf
    );
    p
}

/// A loaded section: its memory and what reloading it needs.
pub struct FwSection<B: Backend> {
    /// The section's memory.
    pub obj: ARef<gem::Object<TyrBo<B>, AnyCtx>>,
    /// The section's flags ([`super::image::flags`]).
    pub flags: u32,
    /// MCU address.
    pub va: u32,
    /// Offset of the data in the file.
    pub data_offset: usize,
    /// Length of the data.
    pub data_len: usize,
}

/// The firmware the driver loaded: the file and its sections.
pub struct Firmware<B: Backend> {
    file: B::Firmware,
    path: FwPath,
    sections: env::Vec<FwSection<B>, B::Alloc>,
    shared: usize,
}

impl<B: Backend> fmt::Debug for Firmware<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Firmware")
            .field("path", &self.path)
            .field("size", &self.file.len())
            .field("sections", &self.sections.len())
            .finish_non_exhaustive()
    }
}

/// Copies `bytes` to device address `addr` of `dma` (any alignment), through the CPU view.
fn copy_in<D: DmaMemory>(dma: &D, addr: u64, bytes: &[u8]) {
    fill(dma, addr, bytes.len(), |i| {
        bytes.get(i).copied().unwrap_or(0)
    });
}

/// Writes `len` bytes at device address `addr`, byte `i` being `byte(i)`, whole words where
/// it can and the bytes of a partial word merged into it.
fn fill<D: DmaMemory>(dma: &D, addr: u64, len: usize, byte: impl Fn(usize) -> u8) {
    let w = Words(dma);
    let end = addr.saturating_add(len as u64);
    let mut word = addr & !7;
    while word < end {
        let mut v = w.rd64(word).to_le_bytes();
        for (k, b) in v.iter_mut().enumerate() {
            let a = word + k as u64;
            if a >= addr && a < end {
                *b = byte((a - addr) as usize);
            }
        }
        w.wr64(word, u64::from_le_bytes(v));
        word += 8;
    }
}

impl<B: Backend> Firmware<B> {
    /// Asks the backend for the firmware of the GPU `info` describes.
    ///
    /// # Errors
    ///
    /// The backend's error if it has no such file.
    pub fn request(b: &B, info: &gpu::GpuInfo) -> Result<(FwPath, B::Firmware)> {
        let path = firmware_path(info.raw.gpu_id);
        match b.request_firmware(path.as_str()) {
            Ok(f) => Ok((path, f)),
            Err(e) => {
                dev_err!(b, "Failed to load firmware image '{path}': {e}");
                Err(e)
            }
        }
    }

    /// Checks the image `file` (from [`request`](Self::request)), creates and fills the
    /// memory of its sections with `new_obj` (a buffer object of the given size and id),
    /// and logs what panthor logs of it.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an image the parser refuses (logged with its reason) or whose
    /// shared section is smaller than [`super::FW_INTERFACE_SIZE`]; `new_obj`'s errors.
    pub fn load(
        b: &B,
        path: FwPath,
        file: B::Firmware,
        mut new_obj: impl FnMut(usize, u64) -> Result<ARef<gem::Object<TyrBo<B>, AnyCtx>>>,
    ) -> Result<Self> {
        dev_info!(b, "Firmware image '{path}': {} bytes", file.len());
        let (count, shared_size) = {
            let img = Image::parse(&file).map_err(|e| {
                dev_err!(b, "Invalid firmware image '{path}': {e}");
                Error::Invalid
            })?;
            let h = img.header();
            dev_info!(
                b,
                "Firmware header version {}.{}, version hash {:#x}",
                h.major,
                h.minor,
                h.version_hash
            );
            if img.protected_count() > 0 {
                dev_info!(
                    b,
                    "Firmware protected mode entry is not supported, ignoring"
                );
            }
            match img.build_info() {
                BuildInfo::GitSha(_) => match img.git_sha() {
                    Some(sha) => dev_info!(b, "Firmware git sha: {sha}"),
                    None => dev_info!(b, "Firmware git sha is not text"),
                },
                BuildInfo::Corrupt => dev_err!(b, "Firmware build info corrupt"),
                BuildInfo::Unterminated => {
                    dev_info!(b, "Firmware's git sha is not NUL terminated")
                }
                BuildInfo::Absent | BuildInfo::Foreign => {}
            }
            (img.section_count(), img.shared().size())
        };
        if (shared_size as usize) < super::FW_INTERFACE_SIZE {
            dev_err!(
                b,
                "Firmware shared region of {shared_size:#x} bytes is smaller than the {:#x} the driver uses",
                super::FW_INTERFACE_SIZE
            );
            return Err(Error::Invalid);
        }
        let mut sections = env::Vec::try_with_capacity(count)?;
        let mut shared = 0;
        let img = Image::parse(&file).map_err(|_| Error::Invalid)?;
        for (i, s) in img.sections().enumerate() {
            let obj = new_obj(s.size() as usize, 1 + i as u64)?;
            if u64::from(s.va_start) == MCU_SHARED_REGION_START {
                shared = i;
            }
            sections.try_push(FwSection {
                obj,
                flags: s.flags,
                va: s.va_start,
                data_offset: s.data_offset as usize,
                data_len: s.data.len(),
            })?;
        }
        let fw = Firmware {
            file,
            path,
            sections,
            shared,
        };
        fw.reload(b, true, true);
        Ok(fw)
    }

    /// The section's data in the file.
    fn data(&self, s: &FwSection<B>) -> &[u8] {
        let end = s.data_offset.saturating_add(s.data_len);
        self.file.get(s.data_offset..end).unwrap_or(&[])
    }

    /// Loads the sections' data again (and zeroes what follows where the image says so):
    /// the writable ones, or every one with `full`; the shared section only with `shared`
    /// (at probe). The MCU must be stopped.
    pub fn reload(&self, b: &B, full: bool, shared: bool) {
        let dma = b.dma();
        for (i, s) in self.sections.iter().enumerate() {
            let writable = s.flags & super::image::flags::WR != 0;
            if (i == self.shared && !shared) || !(full || writable) {
                continue;
            }
            let base = s.obj.dma_addr();
            let size = s.obj.size();
            let data = self.data(s);
            copy_in(dma, base, data);
            if s.flags & super::image::flags::ZERO != 0 {
                fill(
                    dma,
                    base + data.len() as u64,
                    size.saturating_sub(data.len()),
                    |_| 0,
                );
            }
            dma.sync_for_device(base, size);
        }
    }

    /// The file's path in the firmware directory.
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.file
    }

    /// The loaded sections, in file order.
    pub fn sections(&self) -> &[FwSection<B>] {
        &self.sections
    }

    /// The shared section (the interface region).
    pub fn shared(&self) -> &FwSection<B> {
        &self.sections[self.shared]
    }

    /// The firmware's git sha, if its build information has a readable one.
    pub fn git_sha(&self) -> Option<&str> {
        Image::parse(&self.file).ok()?.git_sha()
    }

    /// A line describing the image: `<path> (<size> bytes, header <major>.<minor>, git sha
    /// <sha>)`.
    pub fn describe(&self) -> impl fmt::Display + '_ {
        struct D<'a, B: Backend>(&'a Firmware<B>);
        impl<B: Backend> fmt::Display for D<'_, B> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let fw = self.0;
                write!(f, "{} ({} bytes", fw.path, fw.file.len())?;
                if let Ok(img) = Image::parse(&fw.file) {
                    let h = img.header();
                    write!(f, ", header {}.{}", h.major, h.minor)?;
                }
                match fw.git_sha() {
                    Some(sha) => write!(f, ", git sha {sha})"),
                    None => write!(f, ")"),
                }
            }
        }
        D(self)
    }
}

/// The bind flags of a section: read-only unless writable, not executable unless executable,
/// uncached unless cached (panthor's choice, coherent modes included).
fn map_flags(s: &Section<'_>) -> u32 {
    let mut f = 0;
    if !s.writable() {
        f |= uapi::DRM_PANTHOR_VM_BIND_OP_MAP_READONLY;
    }
    if !s.executable() {
        f |= uapi::DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
    }
    if s.cache_mode() != CacheMode::Cached {
        f |= uapi::DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED;
    }
    f
}

/// Maps the firmware's sections for the MCU in address space 0 and starts the MCU.
pub(crate) fn start_mcu<B: Backend>(
    backend: &B,
    gpu_info: &gpu::GpuInfo,
    fw: &Firmware<B>,
) -> Result<(McuVm<B>, uapi::CsifInfo)> {
    let layout = VmLayout::new(gpu_info.va_bits(), 0)?;
    let mut vm = McuVm::<B>::new(1, backend.dma().clone(), layout, gpu_info.pa_bits())?;
    let img = Image::parse(fw.bytes()).map_err(|_| Error::Invalid)?;
    for (s, loaded) in img.sections().zip(fw.sections()) {
        let obj = FwBoRef(loaded.obj.clone());
        let map = BindReq::Map {
            va: u64::from(s.va_start),
            size: u64::from(s.size()),
            obj: &obj,
            offset: 0,
            flags: map_flags(&s),
        };
        vm.bind(&[map], &mut vm::NoMmu).map_err(|(_, e)| {
            dev_err!(
                backend,
                "Cannot map firmware section {:#x}-{:#x}: {e}",
                s.va_start,
                s.va_end
            );
            e
        })?;
    }
    mmu::enable(backend, MCU_AS, &vm.as_regs()?)?;
    let shared = fw.shared();
    let csif = boot(
        backend,
        shared.obj.dma_addr(),
        super::FW_INTERFACE_SIZE as u64,
    )?;
    Ok((vm, csif))
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use std::vec::Vec;

    use super::super::image::build::Builder;
    use super::super::image::flags::*;
    use super::super::image::{ImageError, HEADER_SIZE, SHARED_REGION_VA};
    use crate::host::HostBackend;
    use crate::{driver, Error};
    use mali_sim::firmware::{CheckError, IMAGE};
    use mali_sim::Config;

    fn shared() -> (u32, (u32, u32)) {
        (
            RD | WR | SHARED | ZERO | CACHE_MODE_CACHED_COHERENT,
            (SHARED_REGION_VA, SHARED_REGION_VA + 0x1_0000),
        )
    }

    fn good() -> Builder {
        let (f, va) = shared();
        Builder::new()
            .section(RD | EX | CACHE_MODE_CACHED, (0, 0x1000), b"code", b"")
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
    fn probe(driver: Vec<u8>, mcu: Option<&[u8]>) -> (Result<(), Error>, Vec<std::string::String>) {
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
        if !matches!(b.firmware().origin, crate::host::FirmwareOrigin::EnvDir(_)) {
            std::println!("skipped: no Arm image in TYR_FIRMWARE_DIR");
            return;
        }
        let parent = drm_ctx::device::Device::new("mali").unwrap();
        let reg = driver::probe(&parent, b).unwrap();
        let dev = reg.device();
        assert_eq!(
            dev.firmware.git_sha(),
            Some("95a25d71030715381f33105394285e1dcc860a65")
        );
        assert_eq!(dev.firmware.sections().len(), 7);
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
        let msg = std::format!("{}", ImageError::BadMagic(0xdead_beef));
        assert_eq!(msg, "invalid firmware magic 0xdeadbeef");
    }

    /// The MCU refuses an image whose sections are not where, or not what, its image says:
    /// the probe fails with `ENODEV` and no panic, and the simulator says why.
    #[test]
    #[cfg_attr(miri, ignore = "a probe per image")]
    fn the_mcu_refuses_misplaced_or_altered_sections() {
        let (f, va) = shared();
        let mcu = good().finish();
        let cases = [
            // The code section one page off.
            (
                Builder::new()
                    .section(
                        RD | EX | CACHE_MODE_CACHED,
                        (0x1_0000, 0x1_1000),
                        b"code",
                        b"",
                    )
                    .section(
                        RD | WR | ZERO | CACHE_MODE_CACHED,
                        (0x1000, 0x3000),
                        b"data",
                        b"",
                    )
                    .section(f, va, b"", b"")
                    .finish(),
                CheckError::NotMapped { va: 0 },
            ),
            // One byte of the code different.
            (good_with_code(b"codf"), CheckError::WrongData { va: 0 }),
            // The read-only code section mapped writable.
            (
                Builder::new()
                    .section(RD | WR | EX | CACHE_MODE_CACHED, (0, 0x1000), b"code", b"")
                    .section(
                        RD | WR | ZERO | CACHE_MODE_CACHED,
                        (0x1000, 0x3000),
                        b"data",
                        b"",
                    )
                    .section(f, va, b"", b"")
                    .finish(),
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

    fn good_with_code(code: &[u8]) -> Vec<u8> {
        let (f, va) = shared();
        Builder::new()
            .section(RD | EX | CACHE_MODE_CACHED, (0, 0x1000), code, b"")
            .section(
                RD | WR | ZERO | CACHE_MODE_CACHED,
                (0x1000, 0x3000),
                b"data",
                b"",
            )
            .section(f, va, b"", b"")
            .build_info(b"git_sha: test\0")
            .finish()
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
            crate::gpu::power_off(b, &info.raw).unwrap();
            assert_eq!(
                pm.wake(b, info, base, || dev.firmware.reload(b, false, false)),
                Ok(true)
            );
            assert_eq!(b.gpu().with(|g| g.firmware_check()), None);
        }
    }
}
