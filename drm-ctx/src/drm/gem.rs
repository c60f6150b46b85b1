// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GEM objects: buffers of a DRM device.
//!
//! GEM ("graphics execution manager") objects are the buffers a GPU driver manages: command
//! streams, vertex data, firmware sections. They are reference counted. Userspace names them
//! through per-file handles and maps them through fake mmap offsets; both exist only once the
//! device is registered with userspace. But drivers also need buffers earlier — Tyr loads the
//! Mali firmware into GEM objects while it is still building its driver data.
//!
//! So [`Object<T, C>`] carries the registration context of the device it was created with:
//!
//! - An object created with a `Device<_, AnyCtx>` (or an
//!   [`UnregisteredDevice`](super::UnregisteredDevice), or during
//!   [`UnregisteredDevice::new_with`]) is an `Object<T, AnyCtx>`: usable by the driver,
//!   invisible to userspace.
//! - An object created with a `Device<_, Registered>` is an `Object<T, Registered>` and offers
//!   [`create_handle`](Object::create_handle), [`lookup_handle`](Object::lookup_handle) and
//!   [`create_mmap_offset`](Object::create_mmap_offset).
//!
//! An object keeps the memory of its device alive but not the device's driver data (which often
//! holds objects itself); [`Object::device`] therefore returns the device only while it is alive.
//!
//! # Examples
//!
//! ```
//! use drm_ctx::drm::{self, gem, AnyCtx};
//! # use drm_ctx::doc_driver::{Bo, DocDriver};
//!
//! let parent = drm_ctx::device::Device::new("gpu").unwrap();
//! let unreg = drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
//! // Before registration: objects exist, handles do not.
//! let fw = gem::Object::<Bo, AnyCtx>::new(&unreg, 4096, ()).unwrap();
//! assert_eq!(fw.size(), 4096);
//! let reg = drm::Registration::new(unreg, 0).unwrap();
//! let bo = gem::Object::<Bo>::new(reg.device(), 100, ()).unwrap();
//! assert_eq!(bo.size(), 4096); // rounded up to whole pages
//! let offset = bo.create_mmap_offset().unwrap();
//! assert_eq!(offset % 4096, 0);
//! ```
//!
#![cfg_attr(
    feature = "std",
    doc = "[`UnregisteredDevice::new_with`]: super::UnregisteredDevice::new_with"
)]
#![cfg_attr(
    not(feature = "std"),
    doc = "[`UnregisteredDevice::new_with`]: crate#features"
)]

use super::{Driver, File};
use crate::Result;

#[cfg(not(gpukit_kernel))]
mod core_impl;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::Object;
#[cfg(gpukit_kernel)]
pub use crate::kernel::gem::Object;

/// The driver's data of a GEM object.
pub trait DriverObject: Sized + Send + Sync + 'static {
    /// The driver.
    type Driver: Driver<Object = Self>;

    /// Arguments of [`new`](Self::new).
    type Args;

    /// Creates the data of a new object of `size` bytes (already rounded up to whole pages).
    ///
    /// Unlike the kernel's, this does not receive the device: objects can be created while the
    /// device's driver data is still being built.
    fn new(size: usize, args: Self::Args) -> Result<Self>;

    /// Called when a file gets a handle to the object; an error fails the handle creation.
    fn open(_obj: &Object<Self>, _file: &File<<Self::Driver as Driver>::File>) -> Result {
        Ok(())
    }

    /// Called when a file's handle to the object is closed.
    fn close(_obj: &Object<Self>, _file: &File<<Self::Driver as Driver>::File>) {}

    /// Whether a CPU mapping of the object shows the driver's own memory ([`cpu_page`]) rather
    /// than the DRM core's backing store.
    ///
    /// A GPU driver whose buffers live in memory it allocated itself (a carve-out, a DMA
    /// allocation, a simulator's memory) sets it, so that what userspace writes through
    /// `mmap()` is what the GPU reads. In the kernel the object's `mmap` then inserts the pages
    /// [`cpu_page`] names instead of faulting in shmem pages; the crate's own core hands the
    /// object itself to a test client, which reaches the memory through the driver's data.
    ///
    /// [`cpu_page`]: Self::cpu_page
    const MAPS_OWN_PAGES: bool = false;

    /// Page `index` of the memory a CPU mapping shows, when [`MAPS_OWN_PAGES`] is set; `None`
    /// makes the mapping fail (`EINVAL`).
    ///
    /// [`MAPS_OWN_PAGES`]: Self::MAPS_OWN_PAGES
    fn cpu_page(&self, _index: usize) -> Option<CpuPage> {
        None
    }
}

/// One page of CPU memory that a GEM object lends to userspace mappings.
///
/// # Invariants
///
/// The pointer is page aligned and is the start of a whole page of kernel memory (the direct
/// map or `vmalloc` space; a host allocation on the host) that stays allocated at that address
/// for as long as the object that returned it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuPage(core::ptr::NonNull<u8>);

impl CpuPage {
    /// The page at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be page aligned and the start of a whole page of memory that stays allocated
    /// at that address for as long as the object that hands it out lives (see the type's
    /// invariants). `None` if `ptr` is not page aligned.
    pub unsafe fn new(ptr: core::ptr::NonNull<u8>) -> Option<Self> {
        // INVARIANT: Alignment checked here, the rest is the caller's promise.
        if !(ptr.as_ptr() as usize).is_multiple_of(PAGE_SIZE) {
            return None;
        }
        Some(CpuPage(ptr))
    }

    /// The start of the page.
    pub fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }
}

/// The page size [`CpuPage`] is a page of.
pub const PAGE_SIZE: usize = 4096;
