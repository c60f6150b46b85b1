// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM drivers and device registration.
//!
//! A driver describes itself with the [`Driver`] trait: the type of its per-device data, of its
//! GEM objects and of its per-file data, its name and version, and its ioctl table. A device is
//! made visible to userspace by a [`Registration`], which consumes the
//! [`UnregisteredDevice`](super::UnregisteredDevice) and hands back the device in the
//! [`Registered`](super::Registered) context. Dropping the registration unplugs the device.

use super::{
    device::Device,
    file::{DriverFile, File},
    gem::{CpuPage, DriverObject},
    ioctl,
};
use crate::Result;
use core::ffi::CStr;

/// Name and version a driver reports to userspace (`DRM_IOCTL_VERSION`).
#[derive(Clone, Copy, Debug)]
pub struct DriverInfo {
    /// Major version.
    pub major: i32,
    /// Minor version.
    pub minor: i32,
    /// Patch level.
    pub patchlevel: i32,
    /// Driver name (for example `c"panthor"`); a C string, as the kernel's `struct drm_driver`
    /// holds it.
    pub name: &'static CStr,
    /// Human-readable description.
    pub desc: &'static CStr,
}

/// A DRM driver.
pub trait Driver: Sized + 'static {
    /// Per-device driver data; [`Device`] dereferences to it.
    type Data: Send + Sync;

    /// The driver's GEM object data.
    type Object: DriverObject<Driver = Self>;

    /// The driver's per-file data.
    type File: DriverFile<Driver = Self>;

    /// Name and version.
    const INFO: DriverInfo;

    /// The driver ioctls, numbered from [`ioctl::COMMAND_BASE`] without gaps (see
    /// [`declare_drm_ioctls!`](crate::declare_drm_ioctls)). Checked at compile time when a device
    /// of the driver is registered.
    const IOCTLS: &'static [ioctl::Descriptor<Self>];

    /// Whether the driver offers a render node; a render-node file may only issue ioctls flagged
    /// [`ioctl::RENDER_ALLOW`].
    const FEAT_RENDER: bool = false;

    /// Called once, right after the device is unplugged (by `Device::unplug` or by dropping
    /// the [`Registration`]), when no section entered with `Device::enter` is running any more
    /// and none can start: where the driver stops its hardware, as a bus driver's remove does
    /// after `drm_dev_unplug` (panthor's `panthor_device_unplug`). Open files, GEM objects
    /// and the driver data stay until their last reference goes, but a bus releases the
    /// device's resources (its MMIO mapping, its interrupt lines) when the driver is unbound,
    /// so nothing may touch the hardware after this returns. The default does nothing.
    fn unplugged(_dev: &Device<Self>) {}

    /// Maps a file offset the driver keeps for itself instead of a GEM object: `None` (the
    /// default) leaves the offset to GEM, `Some(Err(_))` fails the `mmap()` with that error,
    /// `Some(Ok(page))` maps `page` as the request's only page (read-only unless the request
    /// is writable, and then never made writable by `mprotect()`). The page must stay
    /// allocated as long as the device's driver data: the mapping holds the file, which holds
    /// the device, and nothing else.
    ///
    /// What it is for: a GPU's user MMIO page, such as the page holding Mali's
    /// `LATEST_FLUSH_ID` that panthor maps at `DRM_PANTHOR_USER_MMIO_OFFSET`, above every GEM
    /// offset. The kernel backend asks before `drm_gem_mmap`, with the request as the VMA
    /// gives it (a request for more than one page is refused with `EINVAL` whatever the driver
    /// answers). The host core maps only GEM objects (`host::Fd::mmap`); a driver
    /// offers its own offsets on the host through an entry point of its own.
    fn mmap_own(_file: &File<Self::File>, _req: &MmapRequest) -> Option<Result<CpuPage>> {
        None
    }
}

/// An `mmap()` of a DRM file, as [`Driver::mmap_own`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapRequest {
    /// The file offset in bytes (a multiple of the page size: `mmap()` takes page offsets).
    pub offset: u64,
    /// The length in bytes (whole pages).
    pub len: usize,
    /// `PROT_WRITE`.
    pub write: bool,
    /// `PROT_EXEC`.
    pub exec: bool,
    /// `MAP_SHARED` (otherwise private).
    pub shared: bool,
}

#[cfg(not(gpukit_kernel))]
mod core_impl;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::Registration;
#[cfg(gpukit_kernel)]
pub use crate::kernel::drm::Registration;
