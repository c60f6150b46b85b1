// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The crate's own DRM core bookkeeping of a device (reference counts, registration state,
//! mmap offset space): what `struct drm_device` holds in the kernel. Not built in the kernel,
//! where `crate::kernel::drm` puts the same API on `struct drm_device`.

use super::{AnyCtx, DeviceCtx, Registered};
use crate::drm::Driver;
use crate::{
    device,
    mem::{Allocator, MemOps},
    types::{ARef, AlwaysRefCounted, NotThreadSafe},
    Error, Result,
};
use core::{
    alloc::Layout,
    cell::UnsafeCell,
    marker::PhantomData,
    mem::{align_of, offset_of, size_of},
    ops::Deref,
    ptr::{addr_of_mut, NonNull},
    sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordering},
};

const STATE_UNREGISTERED: u8 = 0;
const STATE_REGISTERED: u8 = 1;
const STATE_UNPLUGGED: u8 = 2;

/// Page size of mmap offsets.
pub(crate) const PAGE_SHIFT: u32 = 12;
/// First page of the mmap offset space (right above 4 GiB, as on 64-bit Linux).
pub(crate) const MMAP_START_PAGE: u64 = (0xFFFF_FFFF >> PAGE_SHIFT) + 1;
/// Number of pages in the mmap offset space.
pub(crate) const MMAP_PAGES: u64 = (0xFFFF_FFFF >> PAGE_SHIFT) * 256;

/// A range of mmap offset space owned by a GEM object (what `struct drm_vma_offset_node` is to
/// the C core), linked into its device's list of ranges in use.
///
/// # Invariants
///
/// `links` is only accessed with the device's `mmap_lock` held.
pub(crate) struct MmapNode {
    links: UnsafeCell<Links>,
}

#[derive(Clone, Copy)]
struct Links {
    start: u64,
    pages: u64,
    linked: bool,
    prev: Option<NonNull<MmapNode>>,
    next: Option<NonNull<MmapNode>>,
}

impl MmapNode {
    /// A node owning no range.
    pub(crate) const fn new() -> Self {
        Self {
            links: UnsafeCell::new(Links {
                start: 0,
                pages: 0,
                linked: false,
                prev: None,
                next: None,
            }),
        }
    }
}

/// The links of a node.
///
/// # Safety
///
/// The node is alive, its device's `mmap_lock` is held, and no other reference to its links
/// exists while the returned one is used.
unsafe fn links_of<'a>(n: NonNull<MmapNode>) -> &'a mut Links {
    // SAFETY: The node is alive (caller's guarantee).
    let node = unsafe { n.as_ref() };
    // SAFETY: The lock is held and the reference is unique (caller's guarantee).
    unsafe { &mut *node.links.get() }
}

/// The ranges of mmap offset space in use, sorted by start (a doubly linked list through the
/// objects' [`MmapNode`]s).
struct MmapList {
    head: Option<NonNull<MmapNode>>,
    tail: Option<NonNull<MmapNode>>,
}

/// The DRM core's part of a device (what `struct drm_device` is to the C core).
///
/// # Invariants
///
/// - `strong` counts the owners of the driver data (`ARef<Device>`, files, the registration). It
///   is zero while the data is being built and after it has been dropped, and never goes up from
///   zero again.
/// - `weak` counts the owners of the memory block: one for all strong owners together, one per
///   GEM object, one for a device under construction. The block is freed when it reaches zero.
/// - `root` is the pointer the block was allocated at. Releasing goes through it rather than
///   through whichever reference happened to be the last, since references handed out as `&T`
///   only permit reading.
pub(crate) struct RawDevice {
    root: NonNull<RawDevice>,
    strong: AtomicUsize,
    weak: AtomicUsize,
    state: AtomicU8,
    active: AtomicUsize,
    mmap_lock: AtomicBool,
    mmap_list: UnsafeCell<MmapList>,
    parent: ARef<device::Device>,
    pub(crate) mem: MemOps,
    layout: Layout,
    drop_data: unsafe fn(NonNull<RawDevice>),
}

// SAFETY: `root` is only used to release the block once nothing else can reach it; the mmap list
// is only touched under `mmap_lock`, from whichever thread holds it; every other field is
// `Send + Sync` (atomics, an `ARef` to the thread-safe parent, fn pointers, a layout).
unsafe impl Send for RawDevice {}
// SAFETY: See `Send`: shared access only touches atomics, immutable fields and the mmap list
// under its lock.
unsafe impl Sync for RawDevice {}

/// Holds a device's `mmap_lock`.
struct MmapGuard<'a>(&'a RawDevice);

impl Drop for MmapGuard<'_> {
    fn drop(&mut self) {
        self.0.mmap_lock.store(false, Ordering::Release);
    }
}

impl RawDevice {
    /// The pointer the block was allocated at.
    pub(crate) fn root(&self) -> NonNull<RawDevice> {
        self.root
    }

    /// Takes a strong reference if the data is alive.
    pub(crate) fn try_upgrade(&self) -> bool {
        let mut n = self.strong.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            match self
                .strong
                .compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(m) => n = m,
            }
        }
    }

    /// Takes a weak reference.
    pub(crate) fn weak_inc(&self) {
        self.weak.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives back a weak reference, freeing the block with the last one.
    ///
    /// # Safety
    ///
    /// The caller owns a weak reference on `raw` and does not use it afterwards.
    pub(crate) unsafe fn weak_dec(raw: NonNull<RawDevice>) {
        // SAFETY: The caller's weak reference keeps the block alive.
        let this = unsafe { raw.as_ref() };
        if this.weak.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let (mem, layout, root) = (this.mem, this.layout, this.root);
        // SAFETY: No reference of any kind is left: drop the header (the data is already gone).
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block was allocated by `mem` with `layout` at `root`.
        unsafe { (mem.free)(root.cast(), layout) };
    }

    fn lock_mmap(&self) -> MmapGuard<'_> {
        while self
            .mmap_lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            crate::sync::relax();
        }
        MmapGuard(self)
    }

    /// Gives `node` a range of `pages` pages of mmap offset space (the lowest that fits above
    /// the ranges in use, or failing that the first gap that fits, as `drm_mm` would find) and
    /// returns its first page; if the node has a range already, returns that one.
    /// [`Error::NoSpace`] if no gap is large enough.
    ///
    /// # Safety
    ///
    /// `node` must stay at its address until [`mmap_remove`](Self::mmap_remove) has been called
    /// for it, and be used with no other device.
    pub(crate) unsafe fn mmap_insert(&self, node: &MmapNode, pages: u64) -> Result<u64> {
        let _guard = self.lock_mmap();
        let me = NonNull::from(node);
        // SAFETY: We hold `mmap_lock`, which protects every node's links (type invariant).
        let links = unsafe { &mut *node.links.get() };
        if links.linked {
            return Ok(links.start);
        }
        // SAFETY: We hold `mmap_lock`.
        let list = unsafe { &mut *self.mmap_list.get() };
        let end = MMAP_START_PAGE + MMAP_PAGES;
        let fits = |from: u64, to: u64| from.checked_add(pages).is_some_and(|e| e <= to);
        let get = |n: NonNull<MmapNode>| {
            // SAFETY: Nodes in the list are alive (type invariant) and we hold `mmap_lock`.
            unsafe { *links_of(n) }
        };
        let set = |n: NonNull<MmapNode>, f: &dyn Fn(&mut Links)| {
            // SAFETY: As for `get`; the reference ends with the call.
            f(unsafe { links_of(n) })
        };
        let tail_end = list
            .tail
            .map_or(MMAP_START_PAGE, |t| get(t).start + get(t).pages);
        let (start, after) = if fits(tail_end, end) {
            (tail_end, list.tail)
        } else {
            let mut prev_end = MMAP_START_PAGE;
            let mut prev = None;
            let mut cur = list.head;
            loop {
                let Some(c) = cur else {
                    return Err(Error::NoSpace);
                };
                let l = get(c);
                if fits(prev_end, l.start) {
                    break (prev_end, prev);
                }
                prev_end = l.start + l.pages;
                prev = Some(c);
                cur = l.next;
            }
        };
        let next = match after {
            Some(a) => get(a).next,
            None => list.head,
        };
        *links = Links {
            start,
            pages,
            linked: true,
            prev: after,
            next,
        };
        match after {
            Some(a) => set(a, &|l| l.next = Some(me)),
            None => list.head = Some(me),
        }
        match next {
            Some(n) => set(n, &|l| l.prev = Some(me)),
            None => list.tail = Some(me),
        }
        Ok(start)
    }

    /// Gives the range of `node` back, if it has one.
    ///
    /// # Safety
    ///
    /// `node` is only ever used with this device.
    pub(crate) unsafe fn mmap_remove(&self, node: &MmapNode) {
        let _guard = self.lock_mmap();
        // SAFETY: We hold `mmap_lock`.
        let links = unsafe { &mut *node.links.get() };
        if !links.linked {
            return;
        }
        // SAFETY: We hold `mmap_lock`.
        let list = unsafe { &mut *self.mmap_list.get() };
        match links.prev {
            // SAFETY: The neighbours are in the list, hence alive, and we hold `mmap_lock`.
            Some(p) => unsafe { links_of(p) }.next = links.next,
            None => list.head = links.next,
        }
        match links.next {
            // SAFETY: As above.
            Some(n) => unsafe { links_of(n) }.prev = links.prev,
            None => list.tail = links.prev,
        }
        *links = Links {
            linked: false,
            prev: None,
            next: None,
            ..*links
        };
    }

    /// Returns whether `page` lies in offset space in use.
    #[cfg(feature = "std")]
    pub(crate) fn mmap_page_allocated(&self, page: u64) -> bool {
        let _guard = self.lock_mmap();
        // SAFETY: We hold `mmap_lock`.
        let mut cur = unsafe { &*self.mmap_list.get() }.head;
        while let Some(c) = cur {
            // SAFETY: Nodes in the list are alive, and we hold `mmap_lock`.
            let l = unsafe { *links_of(c) };
            if (l.start..l.start + l.pages).contains(&page) {
                return true;
            }
            cur = l.next;
        }
        false
    }

    /// Starts a userspace entry point ("drm_dev_enter"): fails with [`Error::NoDevice`] unless
    /// the device is registered and not unplugged.
    pub(crate) fn enter(&self) -> Result<EntryGuard<'_>> {
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) != STATE_REGISTERED {
            self.active.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::NoDevice);
        }
        entry_tracking::push(self);
        Ok(EntryGuard {
            raw: self,
            _thread: NotThreadSafe::new(),
        })
    }

    /// Unplugs the device; whether this call did (not an earlier one).
    fn unplug(&self) -> bool {
        if self.state.swap(STATE_UNPLUGGED, Ordering::SeqCst) == STATE_UNPLUGGED {
            return false;
        }
        // Wait for entry points in flight on other threads; those of the current thread (an
        // ioctl handler unplugging its own device) cannot finish before we return.
        let own = entry_tracking::count(self);
        while self.active.load(Ordering::SeqCst) > own {
            crate::sync::relax();
        }
        true
    }
}

/// A section that must not overlap with unplug (from [`Device::enter`]); the device cannot
/// finish unplugging while it exists.
pub struct EntryGuard<'a> {
    raw: &'a RawDevice,
    // Entries are tracked per thread: the guard must be dropped where it was created.
    _thread: NotThreadSafe,
}

impl Drop for EntryGuard<'_> {
    fn drop(&mut self) {
        entry_tracking::pop(self.raw);
        self.raw.active.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(feature = "std")]
mod entry_tracking {
    use super::RawDevice;
    use std::{cell::RefCell, vec::Vec};

    std::thread_local! {
        static ENTERED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    fn key(raw: &RawDevice) -> usize {
        raw as *const RawDevice as usize
    }

    // `try_with`: during thread teardown the list may be gone; entries are then simply not
    // tracked, which only makes an unplug from that thread wait for them too.
    pub(super) fn push(raw: &RawDevice) {
        let _ = ENTERED.try_with(|e| e.borrow_mut().push(key(raw)));
    }

    pub(super) fn pop(raw: &RawDevice) {
        let k = key(raw);
        let _ = ENTERED.try_with(|e| {
            let mut e = e.borrow_mut();
            if let Some(i) = e.iter().rposition(|x| *x == k) {
                e.remove(i);
            }
        });
    }

    pub(super) fn count(raw: &RawDevice) -> usize {
        let k = key(raw);
        ENTERED
            .try_with(|e| e.borrow().iter().filter(|x| **x == k).count())
            .unwrap_or(0)
    }
}

#[cfg(not(feature = "std"))]
mod entry_tracking {
    use super::RawDevice;

    pub(super) fn push(_: &RawDevice) {}

    pub(super) fn pop(_: &RawDevice) {}

    pub(super) fn count(_: &RawDevice) -> usize {
        0
    }
}

/// A DRM device of driver `T`, known to have reached context `C`.
///
/// It dereferences to the driver's data, `T::Data`, and is always reference counted: own one
/// through [`ARef<Device<T, C>>`], whatever the context.
///
/// # Invariants
///
/// - The layout is the same for every `C`: `repr(C)`, the context is a zero-sized marker (checked
///   at compile time by [`Device::SAME_LAYOUT`]).
/// - `data` is initialised and `raw.strong` is non-zero while a reference to the device exists.
/// - The guarantees of `C` hold for the device.
#[repr(C)]
pub struct Device<T: Driver, C: DeviceCtx = Registered> {
    raw: RawDevice,
    data: T::Data,
    _ctx: PhantomData<C>,
}

impl<T: Driver, C: DeviceCtx> Device<T, C> {
    /// Compile-time proof that every context shares one layout (evaluated by every context
    /// conversion).
    pub const SAME_LAYOUT: () = {
        assert!(size_of::<Device<T, C>>() == size_of::<Device<T, AnyCtx>>());
        assert!(size_of::<Device<T, C>>() == size_of::<Device<T, Registered>>());
        assert!(align_of::<Device<T, C>>() == align_of::<Device<T, AnyCtx>>());
        assert!(offset_of!(Device<T, C>, raw) == offset_of!(Device<T, AnyCtx>, raw));
        assert!(offset_of!(Device<T, C>, data) == offset_of!(Device<T, AnyCtx>, data));
        assert!(offset_of!(Device<T, C>, raw) == 0);
    };

    /// # Safety
    ///
    /// The device must satisfy the guarantees of `N`.
    unsafe fn cast_ctx<N: DeviceCtx>(&self) -> &Device<T, N> {
        let () = Self::SAME_LAYOUT;
        let () = Device::<T, N>::SAME_LAYOUT;
        // SAFETY: Both types have the same layout (checked above), so the pointee is a valid
        // `Device<T, N>`; the caller guarantees the context.
        unsafe { &*(self as *const Self).cast::<Device<T, N>>() }
    }

    pub(crate) fn raw(&self) -> &RawDevice {
        &self.raw
    }

    /// The parent (bus) device.
    pub fn parent(&self) -> &device::Device {
        &self.raw.parent
    }

    /// Returns whether the device is currently registered and not unplugged.
    pub fn is_registered(&self) -> bool {
        self.raw.state.load(Ordering::SeqCst) == STATE_REGISTERED
    }

    /// Returns whether the device has been unplugged.
    pub fn is_unplugged(&self) -> bool {
        self.raw.state.load(Ordering::SeqCst) == STATE_UNPLUGGED
    }

    /// Returns whether `self` and `other` are the same device.
    pub fn same_device<C2: DeviceCtx>(&self, other: &Device<T, C2>) -> bool {
        core::ptr::eq(&self.raw, &other.raw)
    }
}

impl<T: Driver> Device<T, AnyCtx> {
    /// Returns the device in the [`Registered`] context if it has been registered.
    ///
    /// This is the checked way up: a device that was registered and unplugged since is still
    /// `Registered` (its userspace-facing operations fail with `ENODEV`).
    pub fn as_registered(&self) -> Option<&Device<T, Registered>> {
        if self.raw.state.load(Ordering::SeqCst) == STATE_UNREGISTERED {
            return None;
        }
        // SAFETY: The device has been registered: the invariant of `Registered` holds.
        Some(unsafe { self.cast_ctx() })
    }

    /// Assumes the device has been registered with userspace.
    ///
    /// # Safety
    ///
    /// The device must have been registered (through a [`Registration`](crate::drm::Registration))
    /// before this call.
    pub unsafe fn assume_registered(&self) -> &Device<T, Registered> {
        // SAFETY: The caller guarantees the device has been registered.
        unsafe { self.cast_ctx() }
    }
}

impl<T: Driver> Device<T, Registered> {
    /// Unplugs the device ("hot-unplug"): from now on every userspace entry point (open, ioctl,
    /// mmap) fails with [`Error::NoDevice`].
    ///
    /// Waits, as the kernel's `drm_dev_unplug` does, for the sections entered with
    /// [`enter`](Self::enter) on other threads to end; not for ioctls as such, so a client
    /// blocked in `SYNCOBJ_WAIT` does not hold it up (its wait goes on until its fences signal
    /// or its deadline passes). Open files, GEM objects and the driver data stay valid until
    /// their last reference goes. Unplugging twice is a no-op; dropping the
    /// [`Registration`](crate::drm::Registration) unplugs too. The first unplug calls the
    /// driver's [`Driver::unplugged`] before it returns.
    pub fn unplug(&self) {
        if self.raw.unplug() {
            T::unplugged(self);
        }
    }

    /// Enters a section that must not overlap with unplug (the kernel's `drm_dev_enter`): fails
    /// with [`Error::NoDevice`] once the device is unplugged; otherwise [`unplug`](Self::unplug)
    /// waits until the returned guard is dropped.
    ///
    /// Every userspace entry point of the host core runs inside one; drivers use it around
    /// hardware access that must stop at unplug.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::{drm, Error};
    /// # use drm_ctx::doc_driver::DocDriver;
    ///
    /// let parent = drm_ctx::device::Device::new("gpu").unwrap();
    /// let reg = drm::Registration::new(drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap(), 0)
    ///     .unwrap();
    /// let dev: drm_ctx::types::ARef<drm::Device<DocDriver>> = reg.device().into();
    /// drop(dev.enter().unwrap());
    /// drop(reg); // unplugs
    /// assert_eq!(dev.enter().err(), Some(Error::NoDevice));
    /// ```
    pub fn enter(&self) -> Result<EntryGuard<'_>> {
        self.raw.enter()
    }
}

impl<T: Driver, C: DeviceCtx> AsRef<Device<T, AnyCtx>> for Device<T, C> {
    fn as_ref(&self) -> &Device<T, AnyCtx> {
        // SAFETY: `AnyCtx` makes no guarantee.
        unsafe { self.cast_ctx() }
    }
}

impl<T: Driver, C: DeviceCtx> AsRef<device::Device> for Device<T, C> {
    fn as_ref(&self) -> &device::Device {
        self.parent()
    }
}

impl<T: Driver, C: DeviceCtx> Deref for Device<T, C> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

// SAFETY: `raw.strong` counts the references; the data is dropped with the last one and the
// block freed once no GEM object needs it either (`raw.weak`).
unsafe impl<T: Driver, C: DeviceCtx> AlwaysRefCounted for Device<T, C> {
    fn inc_ref(&self) {
        self.raw.strong.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the device is valid.
        let raw = unsafe { &obj.as_ref().raw };
        if raw.strong.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let (drop_data, root) = (raw.drop_data, raw.root);
        // SAFETY: That was the last strong reference: the data is unreachable and initialised.
        unsafe { drop_data(root) };
        // SAFETY: The strong owners together hold one weak reference, given back now.
        unsafe { RawDevice::weak_dec(root) };
    }
}

/// Drops the driver data of a `Device<T, _>`.
///
/// # Safety
///
/// `raw` must be the header of a `Device<T, _>` with initialised data nobody can reach any more.
unsafe fn drop_data<T: Driver>(raw: NonNull<RawDevice>) {
    let dev = raw.cast::<Device<T, AnyCtx>>().as_ptr();
    // SAFETY: `dev` points to a valid `Device<T, AnyCtx>` (caller's guarantee).
    let data = unsafe { addr_of_mut!((*dev).data) };
    // SAFETY: Guaranteed by the caller; the header stays untouched.
    unsafe { core::ptr::drop_in_place(data) };
}

/// A device under construction, handed to the initialiser of
/// [`UnregisteredDevice::new_with`].
///
/// The driver data does not exist yet, so this does not dereference to it. What it offers is what
/// building the data needs: the parent device and GEM object creation
/// ([`gem::Object::new_for_init`](crate::drm::gem::Object::new_for_init)).
#[cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "[`UnregisteredDevice::new_with`]: crate#features"
)]
pub struct DeviceInit<'a, T: Driver> {
    raw: &'a RawDevice,
    _p: PhantomData<(fn() -> T, NotThreadSafe)>,
}

impl<T: Driver> DeviceInit<'_, T> {
    /// The parent (bus) device.
    pub fn parent(&self) -> &device::Device {
        &self.raw.parent
    }

    pub(crate) fn raw(&self) -> &RawDevice {
        self.raw
    }
}

/// A freshly allocated device that has never been registered with userspace.
///
/// It is owned and single-threaded (neither `Send` nor `Sync`), so nothing can register the
/// device behind its back. It dereferences to [`Device<T, AnyCtx>`]: GEM objects can be created
/// with it. [`Registration::new`](crate::drm::Registration::new) consumes it and yields the
/// [`Registered`] device.
///
/// # Invariants
///
/// The device in `self.0` has not been registered, and nothing else can register it.
pub struct UnregisteredDevice<T: Driver>(ARef<Device<T, AnyCtx>>, NotThreadSafe);

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T, AnyCtx>;

    fn deref(&self) -> &Device<T, AnyCtx> {
        &self.0
    }
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates a device for `parent` with driver data `data`, in memory from `A`.
    pub fn new_in<A: Allocator>(parent: &device::Device, data: T::Data) -> Result<Self> {
        Self::new_with_in::<A>(parent, |_| Ok(data))
    }

    /// Allocates a device for `parent`, in memory from `A`, and builds its driver data with
    /// `init`, which may already create GEM objects with the device.
    ///
    /// If `init` fails, the device is released and the error returned; objects `init` created
    /// stay valid until their last reference goes.
    pub fn new_with_in<A: Allocator>(
        parent: &device::Device,
        init: impl FnOnce(&DeviceInit<'_, T>) -> Result<T::Data>,
    ) -> Result<Self> {
        let layout = Layout::new::<Device<T, AnyCtx>>();
        let mem = MemOps::of::<A>();
        let ptr = (mem.alloc)(layout)?.cast::<Device<T, AnyCtx>>();
        let raw_ptr = ptr.cast::<RawDevice>();
        // INVARIANT: No strong owner yet (the data does not exist); the builder holds the only
        // weak reference.
        // SAFETY: `ptr` is a fresh block for a `Device<T, AnyCtx>`, whose header is at offset 0.
        unsafe {
            raw_ptr.as_ptr().write(RawDevice {
                root: raw_ptr,
                strong: AtomicUsize::new(0),
                weak: AtomicUsize::new(1),
                state: AtomicU8::new(STATE_UNREGISTERED),
                active: AtomicUsize::new(0),
                mmap_lock: AtomicBool::new(false),
                mmap_list: UnsafeCell::new(MmapList {
                    head: None,
                    tail: None,
                }),
                parent: ARef::from(parent),
                mem,
                layout,
                drop_data: drop_data::<T>,
            })
        };

        /// Gives the builder's weak reference back if `init` fails or panics.
        struct Unwind(Option<NonNull<RawDevice>>);
        impl Drop for Unwind {
            fn drop(&mut self) {
                if let Some(raw) = self.0 {
                    // SAFETY: The builder's weak reference is still owned and not used after.
                    unsafe { RawDevice::weak_dec(raw) };
                }
            }
        }
        let mut unwind = Unwind(Some(raw_ptr));

        // SAFETY: The header was initialised above and stays alive while we hold our weak
        // reference, which outlives `handle`.
        let raw: &RawDevice = unsafe { raw_ptr.as_ref() };
        let handle = DeviceInit {
            raw,
            _p: PhantomData,
        };
        let data = init(&handle)?;
        // SAFETY: `ptr` points to the block, which is large enough for a `Device<T, AnyCtx>`.
        let data_ptr = unsafe { addr_of_mut!((*ptr.as_ptr()).data) };
        // SAFETY: The data field of the block is uninitialised and not aliased (the header
        // reference covers only the header).
        unsafe { data_ptr.write(data) };
        // INVARIANT: The data is initialised; the builder's weak reference becomes the one of
        // the strong owners, and this is the first strong reference.
        raw.strong.store(1, Ordering::Release);
        unwind.0 = None;
        // SAFETY: We own the single strong reference and transfer it.
        Ok(UnregisteredDevice(
            unsafe { ARef::from_raw(ptr) },
            NotThreadSafe::new(),
        ))
    }

    /// Allocates a device for `parent` with driver data `data` on the host heap.
    #[cfg(feature = "std")]
    pub fn new(parent: &device::Device, data: T::Data) -> Result<Self> {
        Self::new_in::<crate::mem::Global>(parent, data)
    }

    /// Allocates a device on the host heap and builds its driver data with `init`; see
    /// [`new_with_in`](Self::new_with_in).
    #[cfg(feature = "std")]
    pub fn new_with(
        parent: &device::Device,
        init: impl FnOnce(&DeviceInit<'_, T>) -> Result<T::Data>,
    ) -> Result<Self> {
        Self::new_with_in::<crate::mem::Global>(parent, init)
    }

    /// Marks the device registered and gives back its reference in the `Registered` context.
    pub(crate) fn register(self) -> ARef<Device<T, Registered>> {
        // By the type invariant nothing registered the device yet.
        self.0.raw.state.store(STATE_REGISTERED, Ordering::SeqCst);
        let ptr = ARef::into_raw(self.0);
        let () = Device::<T, Registered>::SAME_LAYOUT;
        // SAFETY: We own this reference; the layouts are identical and the device has just been
        // registered, which is the invariant of `Registered`.
        unsafe { ARef::from_raw(ptr.cast::<Device<T, Registered>>()) }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::doc_driver::DocDriver;

    #[test]
    fn every_context_has_the_same_layout() {
        let () = Device::<DocDriver, Registered>::SAME_LAYOUT;
        let () = Device::<DocDriver, AnyCtx>::SAME_LAYOUT;
        assert_eq!(
            size_of::<Device<DocDriver, Registered>>(),
            size_of::<Device<DocDriver, AnyCtx>>()
        );
        assert_eq!(
            offset_of!(Device<DocDriver, Registered>, data),
            offset_of!(Device<DocDriver, AnyCtx>, data)
        );
    }

    #[test]
    fn mmap_space_is_bounded() {
        let parent = device::Device::new("p").unwrap();
        let unreg = UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap();
        let raw = unreg.raw();
        let n: [MmapNode; 6] = core::array::from_fn(|_| MmapNode::new());
        let alloc = |i: usize, pages| {
            // SAFETY: The nodes outlive their use and belong to this device only.
            unsafe { raw.mmap_insert(&n[i], pages) }
        };
        assert_eq!(alloc(0, 1), Ok(MMAP_START_PAGE));
        assert_eq!(alloc(0, 1), Ok(MMAP_START_PAGE)); // already has one
        assert_eq!(alloc(1, MMAP_PAGES), Err(Error::NoSpace));
        assert_eq!(alloc(1, u64::MAX), Err(Error::NoSpace));
        assert_eq!(alloc(1, MMAP_PAGES - 1), Ok(MMAP_START_PAGE + 1));
        assert_eq!(alloc(2, 1), Err(Error::NoSpace));
        assert!(raw.mmap_page_allocated(MMAP_START_PAGE));
        assert!(!raw.mmap_page_allocated(MMAP_START_PAGE - 1));
        // Ranges given back are found again, first fit.
        // SAFETY: As above.
        unsafe { raw.mmap_remove(&n[0]) };
        assert!(!raw.mmap_page_allocated(MMAP_START_PAGE));
        assert_eq!(alloc(2, 2), Err(Error::NoSpace));
        assert_eq!(alloc(2, 1), Ok(MMAP_START_PAGE));
        // SAFETY: As above.
        unsafe { raw.mmap_remove(&n[1]) };
        assert_eq!(alloc(3, 10), Ok(MMAP_START_PAGE + 1));
        assert_eq!(alloc(4, 5), Ok(MMAP_START_PAGE + 11));
        // SAFETY: As above.
        unsafe { raw.mmap_remove(&n[3]) };
        // Above the ranges in use first, gaps only once the top is full.
        assert_eq!(alloc(5, 3), Ok(MMAP_START_PAGE + 16));
        assert_eq!(alloc(3, MMAP_PAGES - 19), Ok(MMAP_START_PAGE + 19));
        assert_eq!(alloc(1, 11), Err(Error::NoSpace));
        assert_eq!(alloc(1, 10), Ok(MMAP_START_PAGE + 1));
        for node in &n {
            // SAFETY: As above.
            unsafe { raw.mmap_remove(node) };
        }
        assert!(!raw.mmap_page_allocated(MMAP_START_PAGE + 1));
        assert_eq!(alloc(0, MMAP_PAGES), Ok(MMAP_START_PAGE));
        // SAFETY: As above.
        unsafe { raw.mmap_remove(&n[0]) };
    }
}
