// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Files on the crate's own DRM core (not built in the kernel, where `crate::kernel::file` puts
//! the same API on `struct drm_file`).

use super::{DriverFile, Node, OpenOptions};
use crate::{
    drm::{
        gem::{self, DriverObject},
        syncobj::{Syncobj, SyncobjTable},
        Device, Driver, SyncobjFence,
    },
    idr::Idr,
    sync::{SpinGuard, SpinLock},
    types::ARef,
    uaccess::UserMemory,
    Error, Result,
};

/// The GEM object type of the driver of file data `F`, in the `Registered` context.
pub(crate) type ObjectOf<F> = gem::Object<<<F as DriverFile>::Driver as Driver>::Object>;

/// How a file holds the memory of its client: shared with the host's [`Client`] on a host,
/// borrowed for good elsewhere.
///
/// [`Client`]: crate::host::Client
#[cfg(feature = "std")]
type UserRef = std::sync::Arc<dyn UserMemory>;
#[cfg(not(feature = "std"))]
type UserRef = &'static dyn UserMemory;

/// An open DRM file.
///
/// Ioctl handlers receive it; [`inner`](Self::inner) is the driver's per-file data. It owns
/// the client's GEM handles and syncobjs, in memory from its device's
/// [`mem::Allocator`](crate::mem::Allocator).
pub struct File<F: DriverFile> {
    dev: ARef<Device<F::Driver>>,
    opts: OpenOptions,
    inner: F,
    handles: SpinLock<Idr<ARef<ObjectOf<F>>>>,
    syncobjs: SyncobjTable,
    user: UserRef,
}

impl<F: DriverFile> File<F> {
    /// The device this file was opened on.
    pub fn device(&self) -> &Device<F::Driver> {
        &self.dev
    }

    /// The driver's per-file data.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// How the file was opened.
    pub fn options(&self) -> OpenOptions {
        self.opts
    }

    /// Returns whether the file was opened through the render node.
    pub fn is_render_client(&self) -> bool {
        self.opts.node == Node::Render
    }

    /// Opens a file on `dev` for a client whose memory is `user`.
    fn open_with(dev: &Device<F::Driver>, opts: OpenOptions, user: UserRef) -> Result<Self> {
        if opts.node == Node::Render && !F::Driver::FEAT_RENDER {
            return Err(Error::NoDevice);
        }
        let inner = F::open(dev)?;
        let mem = dev.raw().mem;
        Ok(File {
            dev: ARef::from(dev),
            opts,
            inner,
            handles: SpinLock::new(Idr::new(mem)),
            syncobjs: SyncobjTable::with_mem(mem),
            user,
        })
    }

    /// Opens a file on `dev` for a client whose memory is `user` (what the host core's
    /// [`Client`](crate::host::Client) does).
    #[cfg(feature = "std")]
    pub(crate) fn open(
        dev: &Device<F::Driver>,
        opts: OpenOptions,
        user: std::sync::Arc<dyn UserMemory>,
    ) -> Result<Self> {
        Self::open_with(dev, opts, user)
    }

    /// Opens a file on `dev` for a client whose memory is `user`: what an environment without
    /// `std` that serves the device's node calls on `open()` ([`Error::NoDevice`] for a render
    /// client of a driver without a render node; the driver's open callback may fail too).
    #[cfg(not(feature = "std"))]
    pub fn open(
        dev: &Device<F::Driver>,
        opts: OpenOptions,
        user: &'static dyn UserMemory,
    ) -> Result<Self> {
        Self::open_with(dev, opts, user)
    }

    fn table(&self) -> SpinGuard<'_, Idr<ARef<ObjectOf<F>>>> {
        self.handles.lock()
    }

    /// The file's syncobjs (what the `DRM_IOCTL_SYNCOBJ_*` calls and drivers' submissions
    /// work on).
    pub fn syncobjs(&self) -> &SyncobjTable {
        &self.syncobjs
    }

    /// Creates a syncobj of this file holding `fence` (or none) and returns its handle (what a
    /// driver's submit ioctl hands back for its job's done fence).
    pub fn create_syncobj(&self, fence: Option<&SyncobjFence>) -> Result<u32> {
        self.syncobjs.create(fence.cloned())
    }

    /// A counted reference to the syncobj `handle` names now (`drm_syncobj_find`);
    /// [`Error::NotFound`] (`ENOENT`) if it names none. See
    /// [`drm::syncobj`](crate::drm::syncobj).
    pub fn syncobj(&self, handle: u32) -> Result<Syncobj> {
        self.syncobjs
            .lookup(handle)
            .map(Syncobj::new)
            .ok_or(Error::NotFound)
    }

    /// The fence of point `point` (0: the whole syncobj) of the syncobj `handle` names
    /// (`drm_syncobj_find_fence`, [`SyncobjTable::find_fence`]). See
    /// [`drm::syncobj`](crate::drm::syncobj) for the errors and the flags.
    pub fn syncobj_fence(&self, handle: u32, point: u64, flags: u32) -> Result<SyncobjFence> {
        self.syncobjs.find_fence(handle, point, flags)
    }

    /// The memory of the client that opened the file (for pointers inside ioctl arguments).
    pub fn user(&self) -> &dyn UserMemory {
        core::ops::Deref::deref(&self.user)
    }

    /// Closes a GEM handle (what `DRM_IOCTL_GEM_CLOSE` does). [`Error::Invalid`] if the
    /// handle does not exist.
    pub fn close_handle(&self, handle: u32) -> Result {
        let obj = self.table().remove(handle).ok_or(Error::Invalid)?;
        obj.handle_closed();
        <F::Driver as Driver>::Object::close(&obj, self);
        Ok(())
    }

    /// The handles of this file, in increasing order.
    #[cfg(feature = "std")]
    pub fn handles(&self) -> std::vec::Vec<u32> {
        self.table().iter().map(|(h, _)| h).collect()
    }

    /// Inserts `obj` under the lowest free handle (from 1), like the kernel's IDR:
    /// [`Error::NoSpace`] past `INT_MAX`, [`Error::NoMemory`] if the table cannot grow.
    pub(crate) fn insert_handle(&self, obj: &ObjectOf<F>) -> Result<u32> {
        <F::Driver as Driver>::Object::open(obj, self)?;
        let mut table = self.table();
        // Counted before the handle is visible: a concurrent close of it decrements after.
        obj.handle_opened();
        match table.alloc(ARef::from(obj)) {
            Ok(handle) => Ok(handle),
            Err(e) => {
                drop(table);
                obj.handle_closed();
                <F::Driver as Driver>::Object::close(obj, self);
                Err(e)
            }
        }
    }

    pub(crate) fn lookup_handle(&self, handle: u32) -> Option<ARef<ObjectOf<F>>> {
        self.table().get(handle).cloned()
    }

    /// Finds the object of this file whose mmap offset is `offset`.
    #[cfg(feature = "std")]
    pub(crate) fn lookup_mmap(&self, offset: u64) -> Option<ARef<ObjectOf<F>>> {
        self.table()
            .iter()
            .find(|(_, o)| o.mmap_offset() == Some(offset))
            .map(|(_, o)| o.clone())
    }
}

impl<F: DriverFile> Drop for File<F> {
    fn drop(&mut self) {
        let table = self.table().take_all();
        for (_, obj) in table {
            obj.handle_closed();
            <F::Driver as Driver>::Object::close(&obj, self);
        }
        self.inner.close(&self.dev);
    }
}
