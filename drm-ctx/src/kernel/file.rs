// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM files in the kernel: [`File`] is a `kernel::drm::File`, a `struct drm_file` whose
//! private data carries the driver's file data ([`DriverFile`]). GEM handles and syncobjs live
//! in the `struct drm_file` (the DRM core's `object_idr` and `syncobj_xa`), and the core closes
//! them all when the file is closed, before the driver's [`DriverFile::close`] runs.

use core::{ffi::c_int, pin::Pin, ptr::NonNull};

use ::kernel::{bindings, drm as kdrm, prelude::*};

use super::drm::{check, KDriver};
use super::{syncobj::Syncobj, DmaFence, KernelUserMemory};
use crate::{
    drm::{Device, DriverFile, Node, OpenOptions},
    uaccess::UserMemory,
    Result,
};

// See `drm.rs`: only pointers to `struct drm_file` cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    fn gpukit_drm_syncobj_create(
        file: *mut bindings::drm_file,
        fence: *mut bindings::dma_fence,
        handle: *mut u32,
    ) -> c_int;
    fn gpukit_drm_is_current_master(file: *mut bindings::drm_file) -> bool;
}

/// The private data of a `struct drm_file` of a driver written against this crate.
///
/// # Invariants
///
/// `dev` is the device the file was opened on, which outlives the file.
pub struct KFile<F: DriverFile> {
    inner: F,
    dev: NonNull<bindings::drm_device>,
}

// SAFETY: `dev` is only used to reach the (thread-safe) device; `F` is `Send + Sync`.
unsafe impl<F: DriverFile> Send for KFile<F> {}
// SAFETY: See `Send`.
unsafe impl<F: DriverFile> Sync for KFile<F> {}

impl<F: DriverFile> kdrm::file::DriverFile for KFile<F> {
    type Driver = KDriver<F::Driver>;

    fn open(device: &kdrm::Device<Self::Driver>) -> ::kernel::error::Result<Pin<KBox<Self>>> {
        // SAFETY: Files are only opened on registered devices, whose data is built.
        let dev = unsafe { Device::<F::Driver>::from_kernel(device) };
        let inner = F::open(dev)?;
        let dev = NonNull::new(dev.as_raw()).ok_or(EINVAL)?;
        KBox::pin(KFile { inner, dev }, GFP_KERNEL).map_err(Into::into)
    }
}

impl<F: DriverFile> Drop for KFile<F> {
    fn drop(&mut self) {
        // SAFETY: The device outlives the file (type invariant); it was registered and its
        // data built when the file was opened.
        let dev = unsafe { Device::<F::Driver>::from_raw(self.dev.as_ptr()) };
        self.inner.close(dev);
    }
}

/// An open DRM file.
///
/// # Invariants
///
/// Transparent over `kernel::drm::File<KFile<F>>`: a `struct drm_file` opened on a device of
/// `F::Driver`.
#[repr(transparent)]
pub struct File<F: DriverFile>(kdrm::File<KFile<F>>);

impl<F: DriverFile> File<F> {
    pub(crate) fn from_kernel(file: &kdrm::File<KFile<F>>) -> &Self {
        // CAST: Transparent wrapper.
        // SAFETY: The reference bounds the lifetime.
        unsafe { &*core::ptr::from_ref(file).cast::<Self>() }
    }

    /// The file behind a `struct drm_file` (what a driver's own C glue or a test that opened
    /// the device hands over).
    ///
    /// # Safety
    ///
    /// `ptr` is an open `struct drm_file` of a device of `F::Driver`, alive for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::drm_file) -> &'a Self {
        // SAFETY: Guaranteed by the caller.
        Self::from_kernel(unsafe { kdrm::File::from_raw(ptr) })
    }

    /// The kernel's file.
    pub fn as_kernel(&self) -> &kdrm::File<KFile<F>> {
        &self.0
    }

    fn as_raw(&self) -> *mut bindings::drm_file {
        // CAST: `kernel::drm::File` is a transparent `struct drm_file`.
        core::ptr::from_ref(&self.0).cast_mut().cast()
    }

    /// The device this file was opened on.
    pub fn device(&self) -> &Device<F::Driver> {
        let dev = self.0.inner().get_ref().dev;
        // SAFETY: The device outlives the file and was registered when it was opened.
        unsafe { Device::from_raw(dev.as_ptr()) }
    }

    /// The driver's per-file data.
    pub fn inner(&self) -> &F {
        &self.0.inner().get_ref().inner
    }

    /// How the file was opened: its node, whether it is authenticated or the current master,
    /// and whether the calling task has `CAP_SYS_ADMIN` (so call it from the file's ioctls).
    pub fn options(&self) -> OpenOptions {
        let raw = self.as_raw();
        // SAFETY: An open file has its minor; `authenticated` is a flag the core sets.
        let (ty, authenticated) = unsafe { ((*(*raw).minor).type_, (*raw).authenticated) };
        OpenOptions {
            node: if ty == bindings::drm_minor_type_DRM_MINOR_RENDER as c_int {
                Node::Render
            } else {
                Node::Primary
            },
            authenticated,
            // SAFETY: The file is open.
            master: unsafe { gpukit_drm_is_current_master(raw) },
            // SAFETY: Asks about the current task.
            sys_admin: unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) },
        }
    }

    /// Returns whether the file was opened through the render node.
    pub fn is_render_client(&self) -> bool {
        self.options().node == Node::Render
    }

    /// The memory of the calling process (pointers inside ioctl arguments).
    pub fn user(&self) -> &dyn UserMemory {
        &KernelUserMemory
    }

    /// Closes a GEM handle (`drm_gem_handle_delete`, what `DRM_IOCTL_GEM_CLOSE` does);
    /// [`Error::Invalid`](crate::Error::Invalid) if the handle does not exist.
    pub fn close_handle(&self, handle: u32) -> Result {
        // SAFETY: The file is open.
        check(unsafe { bindings::drm_gem_handle_delete(self.as_raw(), handle) })
    }

    /// Creates a syncobj of this file holding `fence` (or none) and returns its handle, which
    /// userspace waits on with `DRM_IOCTL_SYNCOBJ_WAIT` (`drm_syncobj_create` and
    /// `drm_syncobj_get_handle`: the handle exists only once the syncobj is complete).
    pub fn create_syncobj(&self, fence: Option<&DmaFence>) -> Result<u32> {
        let mut handle = 0u32;
        let f = fence.map_or(core::ptr::null_mut(), DmaFence::as_raw);
        // SAFETY: The file is open; `f` is null or a live fence (the syncobj takes its own
        // reference).
        check(unsafe { gpukit_drm_syncobj_create(self.as_raw(), f, &mut handle) })?;
        Ok(handle)
    }

    /// A counted reference to the syncobj `handle` names now (`drm_syncobj_find`);
    /// [`Error::NotFound`](crate::Error::NotFound) (`ENOENT`) if it names none. See
    /// [`drm::syncobj`](crate::drm::syncobj).
    pub fn syncobj(&self, handle: u32) -> Result<Syncobj> {
        // SAFETY: The file is open.
        unsafe { Syncobj::find(self.as_raw(), handle) }
    }

    /// The fence of point `point` (0: the whole syncobj) of the syncobj `handle` names
    /// (`drm_syncobj_find_fence`). See [`drm::syncobj`](crate::drm::syncobj) for the errors and
    /// the flags.
    pub fn syncobj_fence(&self, handle: u32, point: u64, flags: u32) -> Result<DmaFence> {
        // SAFETY: The file is open.
        unsafe { super::syncobj::find_fence(self.as_raw(), handle, point, flags) }
    }
}
