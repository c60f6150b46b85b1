// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Files on the crate's own DRM core (not built in the kernel, where `crate::kernel::file` puts
//! the same API on `struct drm_file`).

use super::{DriverFile, Node, OpenOptions};
#[cfg(feature = "std")]
use crate::drm::gem;
use crate::drm::Device;
#[cfg(feature = "std")]
use crate::drm::Driver;
use crate::types::ARef;

/// The GEM object type of the driver of file data `F`, in the `Registered` context.
#[cfg(feature = "std")]
pub(crate) type ObjectOf<F> = gem::Object<<<F as DriverFile>::Driver as Driver>::Object>;

/// An open DRM file.
///
/// Ioctl handlers receive it; [`inner`](Self::inner) is the driver's per-file data.
pub struct File<F: DriverFile> {
    dev: ARef<Device<F::Driver>>,
    opts: OpenOptions,
    inner: F,
    #[cfg(feature = "std")]
    host: host::FileState<F>,
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
}

#[cfg(feature = "std")]
mod host {
    use super::{DriverFile, File, ObjectOf, OpenOptions};
    use crate::{
        drm::{gem::DriverObject, Device, Driver},
        host::idr::Idr,
        types::ARef,
        uaccess::UserMemory,
        Error, Result,
    };
    use std::{
        sync::{Arc, Mutex, MutexGuard},
        vec::Vec,
    };

    pub(crate) struct FileState<F: DriverFile> {
        handles: Mutex<Idr<ARef<ObjectOf<F>>>>,
        syncobjs: crate::host::syncobj::SyncobjTable,
        user: Arc<dyn UserMemory>,
    }

    impl<F: DriverFile> File<F> {
        /// Opens a file on `dev` for a client whose memory is `user`.
        pub(crate) fn open(
            dev: &Device<F::Driver>,
            opts: OpenOptions,
            user: Arc<dyn UserMemory>,
        ) -> Result<Self> {
            if opts.node == super::Node::Render && !F::Driver::FEAT_RENDER {
                return Err(Error::NoDevice);
            }
            let inner = F::open(dev)?;
            Ok(File {
                dev: ARef::from(dev),
                opts,
                inner,
                host: FileState {
                    handles: Mutex::new(Idr::default()),
                    syncobjs: Default::default(),
                    user,
                },
            })
        }

        fn table(&self) -> MutexGuard<'_, Idr<ARef<ObjectOf<F>>>> {
            self.host.handles.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// The file's syncobjs (what the `DRM_IOCTL_SYNCOBJ_*` calls and drivers' submissions
        /// work on).
        pub fn syncobjs(&self) -> &crate::host::syncobj::SyncobjTable {
            &self.host.syncobjs
        }

        /// Creates a syncobj of this file holding `fence` (or none) and returns its handle (what a
        /// driver's submit ioctl hands back for its job's done fence).
        pub fn create_syncobj(&self, fence: Option<&super::super::SyncobjFence>) -> Result<u32> {
            self.host.syncobjs.create(fence.cloned())
        }

        /// A counted reference to the syncobj `handle` names now (`drm_syncobj_find`);
        /// [`Error::NotFound`] (`ENOENT`) if it names none. See
        /// [`drm::syncobj`](crate::drm::syncobj).
        pub fn syncobj(&self, handle: u32) -> Result<crate::drm::syncobj::Syncobj> {
            self.host
                .syncobjs
                .lookup(handle)
                .map(crate::drm::syncobj::Syncobj::new)
                .ok_or(Error::NotFound)
        }

        /// The fence of point `point` (0: the whole syncobj) of the syncobj `handle` names
        /// (`drm_syncobj_find_fence`, [`SyncobjTable::find_fence`]). See
        /// [`drm::syncobj`](crate::drm::syncobj) for the errors and the flags.
        ///
        /// [`SyncobjTable::find_fence`]: crate::host::syncobj::SyncobjTable::find_fence
        pub fn syncobj_fence(
            &self,
            handle: u32,
            point: u64,
            flags: u32,
        ) -> Result<super::super::SyncobjFence> {
            self.host.syncobjs.find_fence(handle, point, flags)
        }

        /// The memory of the client that opened the file (for pointers inside ioctl arguments).
        pub fn user(&self) -> &dyn UserMemory {
            &*self.host.user
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
        pub fn handles(&self) -> Vec<u32> {
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
}

#[cfg(not(feature = "std"))]
impl<F: DriverFile> Drop for File<F> {
    fn drop(&mut self) {
        self.inner.close(&self.dev);
    }
}
