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

use core::fmt;

use drm_ctx::drm::{gem, AnyCtx};
use drm_ctx::types::ARef;

use super::image::{BuildInfo, CacheMode, Image, Section};
use super::{boot, MCU_SHARED_REGION_START};
use crate::backend::{Backend, DmaMemory, Words};
use crate::gem::{FwBoRef, McuVm, TyrBo};
use crate::mmu::{self, MCU_AS};
use crate::vm::{self, BindReq, VmLayout};
use crate::{dev_err, dev_info, env, gpu, uapi, Error, Result};

pub use crate::csf::{firmware_path, FwPath};

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
        // A word the range covers whole is written without reading it first.
        let whole = word >= addr && word + 8 <= end;
        let mut v = if whole {
            [0; 8]
        } else {
            w.rd64(word).to_le_bytes()
        };
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
    // Own frame, not the probe's, which stays on the stack while the firmware boots.
    #[inline(never)]
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
        // Fresh memory reads as zero already (`DmaMemory` hands out zeroed memory): only the
        // data goes in.
        fw.load_sections(b, true, true, false);
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
        self.load_sections(b, full, shared, true);
    }

    /// [`reload`](Self::reload), zeroing the tails the image asks zeroed only with `zero`.
    fn load_sections(&self, b: &B, full: bool, shared: bool, zero: bool) {
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
            if zero && s.flags & super::image::flags::ZERO != 0 {
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
// Own frame: the boot's polls step the simulated GPU on the caller's stack (see
// `xtask/src/frames.rs`), so the probe's locals must not be inlined around them.
#[inline(never)]
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
