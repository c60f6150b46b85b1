// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GEM objects on the crate's own DRM core (not built in the kernel, where `crate::kernel::gem`
//! puts the same API on `struct drm_gem_object` with shmem backing).

use super::DriverObject;
use crate::drm::{
    device::{
        core_impl::{MmapNode, PAGE_SHIFT},
        AnyCtx, DeviceCtx, DeviceInit, RawDevice, Registered,
    },
    Device,
};
use crate::drm::{Driver, File};
use crate::{
    types::{ARef, AlwaysRefCounted},
    Error, Result,
};
use core::{
    alloc::Layout,
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering},
};

const PAGE_SIZE: usize = 1 << PAGE_SHIFT;

/// The core's part of a GEM object (what `struct drm_gem_object` is to the C core).
///
/// # Invariants
///
/// - `dev` is the root pointer of the device the object was created with, on which the object
///   owns a weak reference.
/// - `root` is the pointer the object was allocated at (used to release it).
struct RawObject {
    root: NonNull<()>,
    refs: AtomicUsize,
    size: usize,
    dev: NonNull<RawDevice>,
    /// Byte offset for mmap, 0 until one is created.
    mmap: AtomicU64,
    /// The range of mmap offset space, given back when the object is freed.
    mmap_node: MmapNode,
    handles: AtomicUsize,
}

/// A GEM object with driver data `T`, created with a device in context `C`.
///
/// # Invariants
///
/// - The layout is the same for every `C` (`repr(C)`, zero-sized context marker).
/// - The device it was created with was in context `C` then.
#[repr(C)]
pub struct Object<T: DriverObject, C: DeviceCtx = Registered> {
    raw: RawObject,
    data: T,
    _ctx: PhantomData<C>,
}

// SAFETY: `dev` is only used to reach the device header, which is `Sync`, and `root` only to
// release the object; the data is `Send + Sync` by the `DriverObject` bound; the rest are
// atomics.
unsafe impl<T: DriverObject, C: DeviceCtx> Send for Object<T, C> {}
// SAFETY: See `Send`.
unsafe impl<T: DriverObject, C: DeviceCtx> Sync for Object<T, C> {}

impl<T: DriverObject, C: DeviceCtx> Object<T, C> {
    /// Creates an object of at least `size` bytes (rounded up to whole pages) with the device
    /// `dev`. A zero size is [`Error::Invalid`].
    pub fn new(dev: &Device<T::Driver, C>, size: usize, args: T::Args) -> Result<ARef<Self>> {
        Self::create(dev.raw(), size, args)
    }

    fn create(dev: &RawDevice, size: usize, args: T::Args) -> Result<ARef<Self>> {
        if size == 0 {
            return Err(Error::Invalid);
        }
        let size = size.checked_add(PAGE_SIZE - 1).ok_or(Error::Invalid)? & !(PAGE_SIZE - 1);
        let data = T::new(size, args)?;
        let layout = Layout::new::<Self>();
        let ptr = (dev.mem.alloc)(layout)?.cast::<Self>();
        dev.weak_inc();
        let root = ptr.cast::<()>();
        // INVARIANT: We took a weak reference on `dev` for the object.
        // SAFETY: `ptr` is a fresh block for `Self`.
        unsafe {
            ptr.as_ptr().write(Object {
                raw: RawObject {
                    root,
                    refs: AtomicUsize::new(1),
                    size,
                    dev: dev.root(),
                    mmap: AtomicU64::new(0),
                    mmap_node: MmapNode::new(),
                    handles: AtomicUsize::new(0),
                },
                data,
                _ctx: PhantomData,
            })
        };
        // SAFETY: The object is initialised with one reference, which we hand over.
        Ok(unsafe { ARef::from_raw(ptr) })
    }

    /// The size in bytes (a multiple of the page size).
    pub fn size(&self) -> usize {
        self.raw.size
    }

    /// The number of file handles naming this object.
    pub fn handle_count(&self) -> usize {
        self.raw.handles.load(Ordering::Relaxed)
    }

    fn dev_raw(&self) -> &RawDevice {
        // SAFETY: The object owns a weak reference on the device header (type invariant).
        unsafe { self.raw.dev.as_ref() }
    }

    /// The device the object was created with, if its driver data is still alive
    /// ([`Error::NoDevice`] otherwise).
    pub fn device(&self) -> Result<ARef<Device<T::Driver, C>>> {
        let raw = self.dev_raw();
        if !raw.try_upgrade() {
            return Err(Error::NoDevice);
        }
        let ptr = self.raw.dev.cast::<Device<T::Driver, C>>();
        // SAFETY: We took a strong reference, so the device and its data are alive; the header
        // is at offset 0 of `Device` and the device was in context `C` (type invariant).
        Ok(unsafe { ARef::from_raw(ptr) })
    }

    /// Returns whether the object was created with `dev`.
    pub fn belongs_to<C2: DeviceCtx>(&self, dev: &Device<T::Driver, C2>) -> bool {
        core::ptr::eq(self.dev_raw(), dev.raw())
    }

    pub(crate) fn handle_opened(&self) {
        self.raw.handles.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handle_closed(&self) {
        self.raw.handles.fetch_sub(1, Ordering::Relaxed);
    }

    /// The mmap offset, if one was created.
    pub fn mmap_offset(&self) -> Option<u64> {
        match self.raw.mmap.load(Ordering::Acquire) {
            0 => None,
            o => Some(o),
        }
    }
}

impl<T: DriverObject> Object<T, AnyCtx> {
    /// Creates an object while the device's driver data is being built
    /// ([`UnregisteredDevice::new_with`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::drm::{self, gem, AnyCtx};
    /// # use drm_ctx::doc_driver::{Bo, DocDriver};
    ///
    /// let parent = drm_ctx::device::Device::new("gpu").unwrap();
    /// let unreg = drm::UnregisteredDevice::<DocDriver>::new_with(&parent, |init| {
    ///     let fw = gem::Object::<Bo, AnyCtx>::new_for_init(init, 8192, ())?;
    ///     Ok(fw.size() as u32)
    /// })
    /// .unwrap();
    /// assert_eq!(**unreg, 8192);
    /// ```
    ///
    #[cfg_attr(
        feature = "std",
        doc = "[`UnregisteredDevice::new_with`]: crate::drm::UnregisteredDevice::new_with"
    )]
    #[cfg_attr(
        not(feature = "std"),
        doc = "[`UnregisteredDevice::new_with`]: crate#features"
    )]
    pub fn new_for_init(
        dev: &DeviceInit<'_, T::Driver>,
        size: usize,
        args: T::Args,
    ) -> Result<ARef<Self>> {
        Self::create(dev.raw(), size, args)
    }
}

impl<T: DriverObject> Object<T, Registered> {
    /// Creates a handle to the object for `file` (a new one on every call, the lowest free
    /// number from 1). [`Error::Invalid`] if the file belongs to another device.
    pub fn create_handle(&self, file: &File<<T::Driver as Driver>::File>) -> Result<u32> {
        if !self.belongs_to(file.device()) {
            return Err(Error::Invalid);
        }
        file.insert_handle(self)
    }

    /// Looks up the object `handle` names in `file`; [`Error::NotFound`] if none.
    pub fn lookup_handle(
        file: &File<<T::Driver as Driver>::File>,
        handle: u32,
    ) -> Result<ARef<Self>> {
        file.lookup_handle(handle).ok_or(Error::NotFound)
    }

    /// Creates the fake offset userspace passes to `mmap()` to map the object (or returns the
    /// existing one). [`Error::NoSpace`] when the device's offset space is exhausted.
    pub fn create_mmap_offset(&self) -> Result<u64> {
        if let Some(o) = self.mmap_offset() {
            return Ok(o);
        }
        let pages = (self.raw.size >> PAGE_SHIFT) as u64;
        // SAFETY: The node lives inside the object, which does not move, is used with its own
        // device only, and is removed before the object is freed (`dec_ref`).
        let page = unsafe { self.dev_raw().mmap_insert(&self.raw.mmap_node, pages) }?;
        let offset = page << PAGE_SHIFT;
        // A racing call got the same range (the insert is idempotent per node).
        self.raw.mmap.store(offset, Ordering::Release);
        Ok(offset)
    }
}

impl<T: DriverObject, C: DeviceCtx> Deref for Object<T, C> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

// SAFETY: `refs` counts the references; the object is dropped and freed with the last one.
unsafe impl<T: DriverObject, C: DeviceCtx> AlwaysRefCounted for Object<T, C> {
    fn inc_ref(&self) {
        self.raw.refs.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the object is valid.
        let this = unsafe { obj.as_ref() };
        if this.raw.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let (dev, root) = (this.raw.dev, this.raw.root.cast::<Self>());
        // SAFETY: The object's weak reference keeps the device header alive.
        let dev_ref = unsafe { dev.as_ref() };
        let mem = dev_ref.mem;
        // The mmap offset range goes back to the device (`drm_gem_free_mmap_offset`).
        // SAFETY: The node was only ever used with this device.
        unsafe { dev_ref.mmap_remove(&this.raw.mmap_node) };
        // SAFETY: The last reference is gone: nobody can reach the object; drop it in place
        // through the allocation pointer.
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block came from the device's allocator with the layout of `Self`.
        unsafe { (mem.free)(root.cast(), Layout::new::<Self>()) };
        // SAFETY: The object's weak reference on the device is given back and not used again.
        unsafe { RawDevice::weak_dec(dev) };
    }
}
