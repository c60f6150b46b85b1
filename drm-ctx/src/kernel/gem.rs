// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GEM objects in the kernel: [`Object`] is a `kernel::drm::gem::shmem::Object`, a
//! `struct drm_gem_shmem_object` whose pages come from shmem, so userspace can `mmap` it through
//! the fake offset [`Object::create_mmap_offset`] returns (`drm_gem_mmap` and the shmem fault
//! handler), and PRIME export works as the shmem helpers provide it.
//!
//! Unlike the crate's own core, a kernel GEM object holds a reference on its DRM device
//! (`drm_gem_object_init` takes one): driver data that keeps GEM objects of its own device must
//! drop them when the driver unbinds, or the device is never released.

use core::{
    ffi::{c_int, c_void},
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{AtomicUsize, Ordering},
};

use ::kernel::{
    bindings,
    drm::{
        self as kdrm,
        gem::{shmem, BaseObject as _, IntoGEMObject as _},
    },
    sync::aref::{self as karef, AlwaysRefCounted as KRefCounted},
    types::Opaque,
};

use super::drm::{from_kernel, KDriver};
use crate::{
    drm::{gem::DriverObject, AnyCtx, Device, DeviceCtx, DeviceInit, Driver, File, Registered},
    types::{ARef, AlwaysRefCounted},
    Error, Result,
};

const PAGE_SIZE: usize = 4096;

/// The kernel-side driver data of a GEM object of a driver written against this crate.
///
/// # Invariants
///
/// `funcs` is written once, right after the object is made and before anything else can
/// reach it, and only if `O::MAPS_OWN_PAGES`; from then on the object's `funcs` pointer names
/// it. The object is pinned (the kernel's shmem objects live in a `Pin<KBox<_>>`), so the
/// pointer stays valid until the object is freed.
pub struct KObject<O: DriverObject> {
    data: O,
    /// The object's own GEM vtable: the shmem helpers' with `mmap` and `vm_ops` replaced by
    /// ones that map the driver's pages ([`DriverObject::cpu_page`]).
    funcs: Opaque<bindings::drm_gem_object_funcs>,
}

// SAFETY: `funcs` is written only while the object is being made, before it is shared; after
// that it is only read (by the DRM core, through the object's vtable pointer). The vtable's
// pointers name static functions and a static `vm_operations_struct`. `data` is `Send`.
unsafe impl<O: DriverObject> Send for KObject<O> {}
// SAFETY: As above: shared references only ever read `funcs`; `data` is `Sync`.
unsafe impl<O: DriverObject> Sync for KObject<O> {}

/// GEM objects of drivers written against this crate that are alive, all devices together:
/// a leak counter for tests (a driver's objects must all be gone once its device is released).
static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// How many GEM objects of drivers written against this crate are alive, all devices together.
pub fn live_objects() -> usize {
    LIVE_OBJECTS.load(Ordering::Relaxed)
}

impl<O: DriverObject> Drop for KObject<O> {
    fn drop(&mut self) {
        LIVE_OBJECTS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<O: DriverObject> kdrm::gem::DriverObject for KObject<O> {
    type Driver = KDriver<O::Driver>;
    type Args = O::Args;

    fn new<Ctx: kdrm::DeviceContext>(
        _dev: &kdrm::Device<Self::Driver, Ctx>,
        size: usize,
        args: O::Args,
    ) -> impl ::kernel::prelude::PinInit<Self, ::kernel::error::Error> {
        let made = O::new(size, args).map(|data| {
            LIVE_OBJECTS.fetch_add(1, Ordering::Relaxed);
            KObject {
                data,
                funcs: Opaque::uninit(),
            }
        });
        made.map_err(::kernel::error::Error::from)
    }

    fn open(
        obj: &kdrm::gem::DriverAllocImpl<Self>,
        file: &kdrm::gem::DriverFile<Self>,
    ) -> ::kernel::error::Result {
        O::open(Object::from_kernel(obj), File::from_kernel(file)).map_err(Into::into)
    }

    fn close(obj: &kdrm::gem::DriverAllocImpl<Self>, file: &kdrm::gem::DriverFile<Self>) {
        O::close(Object::from_kernel(obj), File::from_kernel(file))
    }
}

/// The kernel's object type behind `Object<T, C>`.
type Inner<T, C> = shmem::Object<KObject<T>, <C as DeviceCtx>::Kernel>;

/// A GEM object with driver data `T`, created with a device in context `C`: a shmem-backed
/// `struct drm_gem_object`.
///
/// # Invariants
///
/// - Transparent over the kernel's shmem object, whatever `C`.
/// - The device it was created with was in context `C` then.
#[repr(transparent)]
pub struct Object<T: DriverObject, C: DeviceCtx = Registered>(Inner<T, C>);

/// Turns a kernel reference into one of ours.
fn adopt<T: DriverObject, C: DeviceCtx>(obj: karef::ARef<Inner<T, C>>) -> ARef<Object<T, C>> {
    let ptr = karef::ARef::into_raw(obj).cast::<Object<T, C>>();
    // SAFETY: The reference is transferred; the layout is transparent.
    unsafe { ARef::from_raw(ptr) }
}

/// A zero size is refused, others are rounded up to whole pages.
fn page_size(size: usize) -> Result<usize> {
    if size == 0 {
        return Err(Error::Invalid);
    }
    Ok(size.checked_add(PAGE_SIZE - 1).ok_or(Error::Invalid)? & !(PAGE_SIZE - 1))
}

impl<T: DriverObject, C: DeviceCtx> Object<T, C> {
    /// Creates an object of at least `size` bytes (rounded up to whole pages). A zero size is
    /// [`Error::Invalid`].
    pub fn new(dev: &Device<T::Driver, C>, size: usize, args: T::Args) -> Result<ARef<Self>> {
        let size = page_size(size)?;
        let config = shmem::ObjectConfig {
            map_wc: false,
            parent_resv_obj: None,
        };
        shmem::Object::new(dev.as_kernel(), size, config, args)
            .map(adopt)
            .map(Self::own_mmap)
            .map_err(from_kernel)
    }

    /// Gives a new object its own vtable when its driver maps its own pages
    /// ([`DriverObject::MAPS_OWN_PAGES`]): a copy of the shmem helpers' whose `mmap` inserts
    /// the pages [`DriverObject::cpu_page`] names and whose `vm_ops` only hold the object while
    /// a mapping exists (no fault handler: every page is there from the start).
    fn own_mmap(this: ARef<Self>) -> ARef<Self> {
        if T::MAPS_OWN_PAGES {
            let raw = this.as_raw();
            let funcs = this.0.funcs.get();
            // SAFETY: The object was made just now and nothing else can reach it yet (no handle,
            // no mmap offset, no other reference), so reading its vtable pointer races with
            // nothing; the shmem helpers set it to their static vtable.
            let shmem_funcs = unsafe { (*raw).funcs };
            // SAFETY: `shmem_funcs` points to the shmem helpers' static vtable.
            let copy = unsafe { shmem_funcs.read() };
            // SAFETY: `funcs` is the object's own uninitialised slot, written only here.
            unsafe { funcs.write(copy) };
            // SAFETY: Just initialised; nothing else reaches it yet.
            let own = unsafe { &mut *funcs };
            own.mmap = Some(mmap_own_pages::<T>);
            own.vm_ops = &raw const gpukit_drm_gem_own_vm_ops;
            // SAFETY: As above, no one else reaches the object yet. INVARIANT: from now on the
            // object's vtable is its own slot, which lives as long as the object.
            unsafe { (*raw).funcs = funcs };
        }
        this
    }

    pub(crate) fn from_kernel(obj: &Inner<T, C>) -> &Self {
        // CAST: Transparent wrapper.
        // SAFETY: The reference bounds the lifetime.
        unsafe { &*core::ptr::from_ref(obj).cast::<Self>() }
    }

    /// The kernel's object.
    pub fn as_kernel(&self) -> &shmem::Object<KObject<T>, C::Kernel> {
        &self.0
    }

    fn as_raw(&self) -> *mut bindings::drm_gem_object {
        self.0.as_raw()
    }

    /// The size in bytes (a multiple of the page size).
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// The number of file handles naming this object.
    pub fn handle_count(&self) -> usize {
        // SAFETY: The object is alive; `handle_count` is an integer the DRM core updates under
        // its lock: a racy read only sees an older or newer count.
        let n = unsafe { core::ptr::addr_of!((*self.as_raw()).handle_count).read_volatile() };
        n as usize
    }

    /// The device the object was created with ([`Error::NoDevice`] while its driver data is
    /// still being built).
    pub fn device(&self) -> Result<ARef<Device<T::Driver, C>>> {
        let kdev = self.0.dev();
        let data: &super::drm::DevData<T::Driver> = kdev;
        if !data.is_built() {
            return Err(Error::NoDevice);
        }
        // SAFETY: The data is built; the object was made with the device in context `C`.
        let dev = unsafe { Device::<T::Driver, C>::from_kernel(kdev) };
        Ok(ARef::from(dev))
    }

    /// Returns whether the object was created with `dev`.
    pub fn belongs_to<C2: DeviceCtx>(&self, dev: &Device<T::Driver, C2>) -> bool {
        // SAFETY: The object is alive, and so is its device.
        unsafe { (*self.as_raw()).dev == dev.as_raw() }
    }

    /// The mmap offset, if one was created.
    pub fn mmap_offset(&self) -> Option<u64> {
        // SAFETY: The object is alive; the node's start is 0 until an offset is created.
        match unsafe { bindings::drm_vma_node_offset_addr(&raw mut (*self.as_raw()).vma_node) } {
            0 => None,
            o => Some(o),
        }
    }
}

impl<T: DriverObject> Object<T, AnyCtx> {
    /// Creates an object while the device's driver data is being built.
    pub fn new_for_init(
        dev: &DeviceInit<'_, T::Driver>,
        size: usize,
        args: T::Args,
    ) -> Result<ARef<Self>> {
        let size = page_size(size)?;
        let config = shmem::ObjectConfig {
            map_wc: false,
            parent_resv_obj: None,
        };
        shmem::Object::new(dev.dev, size, config, args)
            .map(adopt)
            .map(Self::own_mmap)
            .map_err(from_kernel)
    }
}

impl<T: DriverObject> Object<T, Registered> {
    /// Creates a handle to the object for `file` (`drm_gem_handle_create`).
    /// [`Error::Invalid`] if the file belongs to another device.
    pub fn create_handle(&self, file: &File<<T::Driver as Driver>::File>) -> Result<u32> {
        if !self.belongs_to(file.device()) {
            return Err(Error::Invalid);
        }
        self.0.create_handle(file.as_kernel()).map_err(from_kernel)
    }

    /// Looks up the object `handle` names in `file`; [`Error::NotFound`] if none.
    pub fn lookup_handle(
        file: &File<<T::Driver as Driver>::File>,
        handle: u32,
    ) -> Result<ARef<Self>> {
        Inner::<T, Registered>::lookup_handle(file.as_kernel(), handle)
            .map(adopt)
            .map_err(from_kernel)
    }

    /// Creates the fake offset userspace passes to `mmap()` (or returns the existing one).
    pub fn create_mmap_offset(&self) -> Result<u64> {
        self.0.create_mmap_offset().map_err(from_kernel)
    }
}

impl<T: DriverObject, C: DeviceCtx> Deref for Object<T, C> {
    type Target = T;

    fn deref(&self) -> &T {
        &(*self.0).data
    }
}

// SAFETY: `drm_gem_object_get`/`put` (the kernel's implementation) count the references; the
// object is freed with the last one.
unsafe impl<T: DriverObject, C: DeviceCtx> AlwaysRefCounted for Object<T, C> {
    fn inc_ref(&self) {
        self.0.inc_ref();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference; the layout is transparent.
        unsafe { Inner::<T, C>::dec_ref(obj.cast()) }
    }
}

extern "C" {
    /// `vm_operations_struct` of an object mapping its driver's pages: `open`/`close` take and
    /// drop the mapping's reference to the object (`drm_gem_vm_open`/`close`).
    static gpukit_drm_gem_own_vm_ops: bindings::vm_operations_struct;
    /// Checks a new mapping `vma` of `obj` against the object's size, makes it non-expandable
    /// and not dumped, and gives the first page of the object it maps and how many pages.
    /// (`struct drm_gem_object` and `struct vm_area_struct` pass untyped: the bindings see
    /// parts of the latter as opaque.)
    fn gpukit_drm_gem_mmap_prepare(
        obj: *mut c_void,
        vma: *mut c_void,
        first: *mut usize,
        count: *mut usize,
    ) -> c_int;
    /// Maps the page at kernel address `kaddr` (direct map or `vmalloc` space) as page `index`
    /// of the mapping, by its frame number (`remap_pfn_range`: no reference to the page is
    /// taken, the mapping's reference to the object keeps it).
    fn gpukit_drm_gem_insert_page(vma: *mut c_void, index: usize, kaddr: *mut c_void) -> c_int;
}

/// `drm_gem_object_funcs.mmap` of an object whose driver maps its own pages: every page of the
/// mapping is inserted now.
///
/// # Safety
///
/// Called by the DRM core (`drm_gem_mmap_obj`) with a live object whose vtable
/// [`Object::own_mmap`] installed, so an object of driver data `T`, and the mapping being set
/// up, which already holds a reference to the object.
unsafe extern "C" fn mmap_own_pages<T: DriverObject>(
    raw: *mut bindings::drm_gem_object,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: As the caller guarantees, `raw` is a live object of driver data `T` (the context
    // does not change the layout).
    let obj = unsafe { <Inner<T, Registered> as kdrm::gem::IntoGEMObject>::from_raw(raw) };
    let data: &T = &obj.data;
    let (mut first, mut count) = (0usize, 0usize);
    // SAFETY: `raw` and `vma` are valid, as the caller guarantees.
    let ret =
        unsafe { gpukit_drm_gem_mmap_prepare(raw.cast(), vma.cast(), &mut first, &mut count) };
    if ret != 0 {
        return ret;
    }
    for i in 0..count {
        let Some(page) = first.checked_add(i).and_then(|index| data.cpu_page(index)) else {
            return -(bindings::EINVAL as c_int);
        };
        // SAFETY: `vma` is valid; by `CpuPage`'s invariants the page is a whole page of kernel
        // memory that stays allocated while the object lives, and the mapping holds a
        // reference to the object until it is unmapped.
        let ret = unsafe { gpukit_drm_gem_insert_page(vma.cast(), i, page.as_ptr().cast()) };
        if ret != 0 {
            return ret;
        }
    }
    0
}
