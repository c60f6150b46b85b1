// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM synchronisation objects (syncobjs) of the host core.
//!
//! A syncobj is a per-file handle that holds at most one fence. Drivers replace the fence when
//! a job that signals the syncobj is submitted, and read it when a job waits on the syncobj;
//! userspace creates and destroys syncobjs, waits on them and signals them through the core
//! ioctls below.
//!
//! A syncobj is also a timeline: adding a point ([`SyncobjTable::add_point`], or the
//! `TIMELINE_SIGNAL` and `TRANSFER` ioctls) makes it hold a chain of `(point, fence)` links
//! ([`ChainNode`], the kernel's `dma_fence_chain`), the newest one first. A point has signalled
//! once its fence and those of every earlier point have; links whose fence has signalled are
//! unlinked as the chain is walked, so a timeline does not grow while its points signal. The
//! fence a timeline syncobj holds (what [`SyncobjTable::fence`] returns and a binary wait waits
//! for) is its newest link. A binary reset or signal replaces the chain as a whole, as in the
//! kernel.
//!
//! | ioctl                              | number | what it does                                  |
//! |------------------------------------|--------|-----------------------------------------------|
//! | `DRM_IOCTL_SYNCOBJ_CREATE`         | `0xBF` | new handle, empty or already signalled        |
//! | `DRM_IOCTL_SYNCOBJ_DESTROY`        | `0xC0` | drops the handle (its fence lives on where used) |
//! | `DRM_IOCTL_SYNCOBJ_WAIT`           | `0xC3` | waits for all or any, with an absolute deadline |
//! | `DRM_IOCTL_SYNCOBJ_RESET`          | `0xC4` | removes the fences (and timelines)            |
//! | `DRM_IOCTL_SYNCOBJ_SIGNAL`         | `0xC5` | replaces the fences with signalled ones       |
//! | `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`  | `0xCA` | waits for points, or for them to be submitted |
//! | `DRM_IOCTL_SYNCOBJ_QUERY`          | `0xCB` | newest signalled (or submitted) point         |
//! | `DRM_IOCTL_SYNCOBJ_TRANSFER`       | `0xCC` | copies a point's fence to a syncobj or point  |
//! | `DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`| `0xCD` | adds signalled points                         |
//!
//! Deadlines are absolute times of [`monotonic_ns`], the host's `CLOCK_MONOTONIC`. A wait that
//! runs out of time fails with `ETIME` (`-62`); one on a point without a fence (no fence, a
//! binary syncobj asked for a point, or a point above the newest) fails with `EINVAL` unless
//! `WAIT_FOR_SUBMIT` or `WAIT_AVAILABLE` asks to wait for one; `WAIT_AVAILABLE` is satisfied by
//! the fence being there. A wait with no handles succeeds at once; `WAIT_DEADLINE` is accepted
//! and its hint ignored. An error a fence signalled with is not reported by the wait (as in the
//! kernel: the wait only tells that fences signalled). A wait is about the syncobjs its handles
//! named when it started (it holds a reference to each): destroying a handle does not end it,
//! and a driver that holds the syncobj ([`Syncobj`](crate::drm::syncobj::Syncobj)) may still
//! attach a fence. A wait for submission sleeps until a fence is attached. As in the
//! kernel, a handle that names no syncobj is `ENOENT` for every call but destroy (`EINVAL`), and
//! unplugging the device does not end a wait that has started: it ends when its fences signal or
//! its deadline passes (the driver signals every fence of an unplugged device, with an error).
//! Calls that change several syncobjs change all or none of them. At most [`MAX_HANDLES`]
//! handles per call (`EINVAL` beyond).
//!
//! Syncobjs are reference counted like the kernel's `struct drm_syncobj` (the handle table holds
//! one reference, and so does every wait and every driver's
//! [`Syncobj`](crate::drm::syncobj::Syncobj)); [`crate::drm::syncobj`] is the API a driver's
//! submit path uses, the same in the kernel.
//!
//! Allocations report `ENOMEM` except two `Arc`s (Rust's `Arc` has no fallible constructor):
//! a chain link ([`ChainPoint::new`], set aside before anything changes) and the waker of a
//! blocking wait.

use core::alloc::Layout;
use core::any::Any;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::Waker;
use std::{
    boxed::Box,
    sync::{Arc, Mutex, MutexGuard, OnceLock},
    task::Wake,
    thread::{self, Thread},
    time::{Duration, Instant},
    vec::Vec,
};

mod chain;

use chain::Contained;
pub use chain::{for_each_unwrapped, live_chain_links, ChainNode, ChainPoint};

use super::{idr::Idr, WakerList};
use crate::{
    drm::ioctl::{IoctlArg, IOWR},
    mem::{Allocator, Global},
    types::{ARef, AlwaysRefCounted},
    uaccess::UserMemory,
    Error, Result,
};

/// A fence as a syncobj holds it.
///
/// The driver's own fence type implements this (usually through a small wrapper) so that the
/// core can wait on it; drivers get their type back with [`SyncFence::as_any`].
pub trait SyncFence: Send + Sync + 'static {
    /// `None` while pending; `Some(Ok(()))` or `Some(Err(errno))` (negative) once signalled.
    fn status(&self) -> Option<core::result::Result<(), i32>>;

    /// Arranges for `waker` to be woken once the fence signals (at once if it has).
    ///
    /// The returned [`Registration`] takes the waker back off the fence when it is dropped, so
    /// that a wait that gives up (a timeout, or `SYNCOBJ_WAIT` polled with a deadline in the
    /// past, as Vulkan's fence status queries do) leaves nothing queued on a fence that may
    /// stay pending for a long time.
    fn wake_on_signal(&self, waker: &Waker) -> Registration;

    /// The fence as `Any`, for drivers to downcast to their own type.
    fn as_any(&self) -> &dyn Any;
}

/// A waker queued on a fence by [`SyncFence::wake_on_signal`]; dropping it takes the waker
/// off the fence if the fence has not woken it yet.
///
/// # Examples
///
/// ```
/// use drm_ctx::host::syncobj::Registration;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let removed = Arc::new(AtomicBool::new(false));
/// let r = {
///     let removed = removed.clone();
///     Registration::new(move || removed.store(true, Ordering::SeqCst))
/// };
/// assert!(!removed.load(Ordering::SeqCst));
/// drop(r);
/// assert!(removed.load(Ordering::SeqCst));
/// drop(Registration::done()); // nothing to take back
/// ```
#[must_use = "dropping the registration takes the waker off the fence again"]
pub struct Registration {
    remove: Option<Box<dyn FnOnce() + Send>>,
    /// Registrations on the fences a composite fence (a timeline's chain) is made of.
    parts: Vec<Registration>,
}

impl Registration {
    /// A registration whose drop runs `remove`, which takes the waker off the fence.
    pub fn new(remove: impl FnOnce() + Send + 'static) -> Self {
        Self {
            remove: Some(Box::new(remove)),
            parts: Vec::new(),
        }
    }

    /// A registration with nothing to take back: the waker was woken at once, or the fence
    /// keeps nothing queued.
    pub fn done() -> Self {
        Self {
            remove: None,
            parts: Vec::new(),
        }
    }

    /// A registration made of others (a fence made of several fences): dropping it drops them.
    pub fn many(parts: Vec<Registration>) -> Self {
        Self {
            remove: None,
            parts,
        }
    }

    /// Whether anything is still queued (false for [`done`](Self::done)).
    pub fn is_queued(&self) -> bool {
        self.remove.is_some() || self.parts.iter().any(Registration::is_queued)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(remove) = self.remove.take() {
            remove();
        }
    }
}

impl core::fmt::Debug for Registration {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("Registration")
            .field("queued", &self.is_queued())
            .finish()
    }
}

/// A fence that was signalled when it was made (what `SYNCOBJ_SIGNAL` installs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalledFence;

impl SyncFence for SignalledFence {
    fn status(&self) -> Option<core::result::Result<(), i32>> {
        Some(Ok(()))
    }

    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        waker.wake_by_ref();
        Registration::done()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The fence a syncobj holds.
pub type FenceRef = Arc<dyn SyncFence>;

/// A shared [`SignalledFence`] (what `SYNCOBJ_CREATE` with `SIGNALED` and `SYNCOBJ_SIGNAL`
/// install), so that installing one allocates nothing.
fn signalled() -> FenceRef {
    static SIGNALLED: OnceLock<FenceRef> = OnceLock::new();
    SIGNALLED.get_or_init(|| Arc::new(SignalledFence)).clone()
}

/// One syncobj: the fence it holds, a number telling it apart from a syncobj created later
/// under the same handle, and the waits for a fence to be attached to it.
///
/// It is reference counted like the kernel's `struct drm_syncobj`: the handle table holds one
/// reference while the handle exists, and every [`Syncobj`](crate::drm::syncobj::Syncobj) (and
/// every wait) one more, so a syncobj outlives its handle as long as someone uses it.
///
/// # Invariants
///
/// - `refs` is the number of [`ARef`]s to this object; it was allocated by [`SyncobjCell::new`]
///   from [`Global`] with the layout of `Self`, and is freed when `refs` drops to zero.
/// - `root` is the pointer the block was allocated at (an [`ARef`] made from a shared
///   reference may only read through its pointer; the object is dropped and freed through this
///   one).
pub(crate) struct SyncobjCell {
    root: NonNull<SyncobjCell>,
    refs: AtomicUsize,
    id: u64,
    fence: Mutex<Option<FenceRef>>,
    /// Waits for submission on this syncobj, woken whenever a fence is attached.
    waiters: WakerList,
}

impl SyncobjCell {
    /// A new syncobj holding `fence`, with one reference; [`Error::NoMemory`] if it cannot be
    /// allocated.
    fn new(id: u64, fence: Option<FenceRef>) -> Result<ARef<Self>> {
        let ptr = Global::alloc(Layout::new::<Self>())?.cast::<Self>();
        // SAFETY: `ptr` is a fresh block with the size and alignment of `Self`.
        unsafe {
            ptr.as_ptr().write(SyncobjCell {
                root: ptr,
                refs: AtomicUsize::new(1),
                id,
                fence: Mutex::new(fence),
                waiters: WakerList::default(),
            })
        };
        // SAFETY: The object is initialised and the one reference it counts is handed over.
        Ok(unsafe { ARef::from_raw(ptr) })
    }

    fn slot(&self) -> MutexGuard<'_, Option<FenceRef>> {
        self.fence.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fence it holds now (`drm_syncobj_fence_get`).
    pub(crate) fn get(&self) -> Option<FenceRef> {
        self.slot().clone()
    }

    /// Replaces its fence (`drm_syncobj_replace_fence`); allocates nothing.
    pub(crate) fn replace(&self, fence: Option<FenceRef>) {
        let old = core::mem::replace(&mut *self.slot(), fence);
        // Dropped unlocked: a timeline's chain may be long, and a driver's fence may do anything
        // when it goes.
        drop(old);
        self.waiters.wake_all();
    }

    /// Adds a point in `link` (`drm_syncobj_add_point`); allocates nothing.
    fn add(&self, link: ChainPoint, contained: Contained, point: u64) {
        let prev = {
            let mut slot = self.slot();
            let prev = slot.take();
            *slot = Some(link.init(prev.clone(), contained, point));
            prev
        };
        self.waiters.wake_all();
        if let Some(p) = prev {
            chain::collect(&p);
        }
    }

    /// Adds point `point` holding `fence` in `link`.
    pub(crate) fn add_point(&self, link: ChainPoint, fence: FenceRef, point: u64) {
        self.add(link, Contained::One(fence), point);
    }
}

// SAFETY: `root` only points to the object itself (used to free it once); the other fields are
// `Send + Sync`.
unsafe impl Send for SyncobjCell {}
// SAFETY: As for `Send`: shared use never touches `root`.
unsafe impl Sync for SyncobjCell {}

// SAFETY: `inc_ref` and `dec_ref` count the references in `refs`; the object is dropped and its
// block freed only when the last one is given back, and a `&SyncobjCell` exists only through a
// reference (`ARef`) someone holds.
unsafe impl AlwaysRefCounted for SyncobjCell {
    fn inc_ref(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        let root = {
            // SAFETY: The caller owns a reference, so the object is alive.
            let this = unsafe { obj.as_ref() };
            if this.refs.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            this.root
        };
        // Every other reference's use happened before this point.
        core::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: That was the last reference: nothing else can reach the object, which `new`
        // initialised at `root` (type invariant); it is dropped once, here.
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block came from `Global` at `root` with the layout of `Self` (type
        // invariant) and nothing uses it any more.
        unsafe { Global::free(root.cast(), Layout::new::<Self>()) };
    }
}

/// A syncobj as a driver names it between preparing a job and committing it (where the kernel
/// driver holds a reference to the syncobj): its handle, and an identity that a syncobj created
/// later under the same handle does not share ([`SyncobjTable::key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncobjKey {
    handle: u32,
    id: u64,
}

impl SyncobjKey {
    /// The handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

struct Objects {
    idr: Idr<ARef<SyncobjCell>>,
    next_id: u64,
}

/// The syncobjs of one file.
///
/// Handles are numbered like the kernel's IDR (lowest free from 1, `O(log n)`), and creating
/// one fails with [`Error::NoMemory`] rather than aborting when memory runs out.
pub struct SyncobjTable {
    objects: Mutex<Objects>,
}

impl Default for SyncobjTable {
    fn default() -> Self {
        Self {
            objects: Mutex::new(Objects {
                idr: Idr::default(),
                next_id: 0,
            }),
        }
    }
}

impl core::fmt::Debug for SyncobjTable {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("SyncobjTable")
            .field(
                "handles",
                &self.lock().idr.iter().map(|(h, _)| h).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SyncobjTable {
    fn lock(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a syncobj holding `fence` under the lowest free handle (from 1).
    ///
    /// [`Error::NoSpace`] past handle `INT_MAX`, [`Error::NoMemory`] if the table cannot grow.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use drm_ctx::host::syncobj::{SignalledFence, SyncobjTable};
    ///
    /// let t = SyncobjTable::default();
    /// assert_eq!(t.create(None), Ok(1));
    /// assert_eq!(t.create(Some(Arc::new(SignalledFence))), Ok(2));
    /// t.destroy(1).unwrap();
    /// assert_eq!(t.create(None), Ok(1));
    /// assert!(t.fence(2).unwrap().is_some());
    /// ```
    pub fn create(&self, fence: Option<FenceRef>) -> Result<u32> {
        let mut o = self.lock();
        let id = o.next_id;
        let h = o.idr.alloc(SyncobjCell::new(id, fence)?)?;
        o.next_id += 1;
        Ok(h)
    }

    /// Destroys a syncobj; [`Error::Invalid`] if there is none with this handle.
    ///
    /// The syncobj lives on as long as someone holds a reference to it (a wait in progress, a
    /// driver's [`Syncobj`](crate::drm::syncobj::Syncobj)), as in Linux: a wait goes on, and a
    /// driver that looked it up may still attach a fence, which only those holders see.
    pub fn destroy(&self, handle: u32) -> Result {
        let gone = self.lock().idr.remove(handle).ok_or(Error::Invalid)?;
        drop(gone);
        Ok(())
    }

    /// The fence of a syncobj (`None` if it holds none; for a timeline its newest link, a
    /// [`ChainNode`] that signals with every point); [`Error::NotFound`] for an unknown handle.
    pub fn fence(&self, handle: u32) -> Result<Option<FenceRef>> {
        self.lookup(handle).map(|s| s.get()).ok_or(Error::NotFound)
    }

    /// A reference to the syncobj `handle` names now (`drm_syncobj_find`).
    pub(crate) fn lookup(&self, handle: u32) -> Option<ARef<SyncobjCell>> {
        self.lock().idr.get(handle).cloned()
    }

    /// Whether `handle` names a syncobj.
    pub fn contains(&self, handle: u32) -> bool {
        self.lock().idr.get(handle).is_some()
    }

    /// Replaces the fence of a syncobj; [`Error::NotFound`] for an unknown handle.
    pub fn replace(&self, handle: u32, fence: Option<FenceRef>) -> Result {
        self.replace_if(handle, None, fence)
    }

    /// The syncobj `handle` names now, as a [`SyncobjKey`]; [`Error::NotFound`] for an unknown
    /// handle.
    pub fn key(&self, handle: u32) -> Result<SyncobjKey> {
        self.lookup(handle)
            .map(|s| SyncobjKey { handle, id: s.id })
            .ok_or(Error::NotFound)
    }

    /// [`replace`](Self::replace) on the syncobj of `key`: [`Error::NotFound`], changing
    /// nothing, once it has been destroyed (even if its handle names another syncobj since).
    pub fn replace_keyed(&self, key: SyncobjKey, fence: Option<FenceRef>) -> Result {
        self.replace_if(key.handle, Some(key.id), fence)
    }

    fn replace_if(&self, handle: u32, id: Option<u64>, fence: Option<FenceRef>) -> Result {
        let s = self
            .lookup(handle)
            .filter(|s| id.is_none_or(|id| id == s.id))
            .ok_or(Error::NotFound)?;
        s.replace(fence);
        Ok(())
    }

    /// Replaces the fences of several syncobjs, all or none ([`Error::NotFound`] if a handle is
    /// unknown).
    fn replace_all(&self, handles: &[u32], fence: Option<FenceRef>) -> Result {
        // The fences replaced are dropped once the table is unlocked (a timeline's chain may be
        // long, and a driver's fence may do anything when it goes).
        let mut old: Vec<Option<FenceRef>> = Vec::new();
        old.try_reserve_exact(handles.len())
            .map_err(|_| Error::NoMemory)?;
        let mut cells: Vec<ARef<SyncobjCell>> = Vec::new();
        cells
            .try_reserve_exact(handles.len())
            .map_err(|_| Error::NoMemory)?;
        {
            let o = self.lock();
            if handles.iter().any(|h| o.idr.get(*h).is_none()) {
                return Err(Error::NotFound);
            }
            for h in handles {
                if let Some(s) = o.idr.get(*h) {
                    old.push(core::mem::replace(&mut *s.slot(), fence.clone()));
                    cells.push(s.clone());
                }
            }
        }
        drop(old);
        for s in &cells {
            s.waiters.wake_all();
        }
        Ok(())
    }

    /// Sets a chain link aside for [`add_point`](Self::add_point) (`dma_fence_chain_alloc`).
    pub fn alloc_point(&self) -> Result<ChainPoint> {
        ChainPoint::new()
    }

    /// Adds point `point` holding `fence` to the timeline of a syncobj, in the link `link` set
    /// aside for it (`drm_syncobj_add_point`); [`Error::NotFound`] for an unknown handle (the
    /// link is then freed), nothing else fails.
    ///
    /// The syncobj then holds the new link, a fence that signals once `fence` and every earlier
    /// point have. As in the kernel a point not above the newest one is still added: it starts a
    /// new context and carries the newest point's number, so queries report 0 or that number
    /// for it and waits for points below it see only the new link.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::host::syncobj::{SyncobjTable, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT};
    /// use std::sync::Arc;
    /// # use drm_ctx::host::syncobj::SignalledFence;
    ///
    /// let t = SyncobjTable::default();
    /// let h = t.create(None).unwrap();
    /// let link = t.alloc_point().unwrap(); // while preparing: may fail
    /// t.add_point(h, link, Arc::new(SignalledFence), 3).unwrap(); // at commit
    /// assert_eq!(t.query(h, false), Ok(3));
    /// assert!(t.find_fence(h, 2, 0).unwrap().status().is_some());
    /// assert!(t.find_fence(h, 4, 0).is_err()); // not submitted
    /// ```
    pub fn add_point(&self, handle: u32, link: ChainPoint, fence: FenceRef, point: u64) -> Result {
        self.add_contained(handle, None, link, Contained::One(fence), point)
    }

    /// [`add_point`](Self::add_point) on the syncobj of `key`: [`Error::NotFound`] (the link
    /// is then freed) once it has been destroyed, even if its handle names another syncobj
    /// since.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::host::syncobj::{SignalledFence, SyncobjTable};
    /// use drm_ctx::Error;
    /// use std::sync::Arc;
    ///
    /// let t = SyncobjTable::default();
    /// let key = t.key(t.create(None).unwrap()).unwrap(); // while preparing
    /// let link = t.alloc_point().unwrap();
    /// t.destroy(key.handle()).unwrap();
    /// let again = t.create(None).unwrap(); // the same handle, another syncobj
    /// assert_eq!(again, key.handle());
    /// let r = t.add_point_keyed(key, link, Arc::new(SignalledFence), 1); // at commit
    /// assert_eq!(r, Err(Error::NotFound));
    /// assert!(t.fence(again).unwrap().is_none());
    /// ```
    pub fn add_point_keyed(
        &self,
        key: SyncobjKey,
        link: ChainPoint,
        fence: FenceRef,
        point: u64,
    ) -> Result {
        self.add_contained(key.handle, Some(key.id), link, Contained::One(fence), point)
    }

    fn add_contained(
        &self,
        handle: u32,
        id: Option<u64>,
        link: ChainPoint,
        contained: Contained,
        point: u64,
    ) -> Result {
        let s = self
            .lookup(handle)
            .filter(|s| id.is_none_or(|id| id == s.id))
            .ok_or(Error::NotFound)?;
        s.add(link, contained, point);
        Ok(())
    }

    /// Adds a signalled point to each syncobj of `handles` (`TIMELINE_SIGNAL`): all or none
    /// ([`Error::NotFound`] if a handle is unknown).
    fn signal_points(&self, handles: &[u32], points: &[u64], links: Vec<ChainPoint>) -> Result {
        let mut prevs: Vec<Option<FenceRef>> = Vec::new();
        prevs
            .try_reserve_exact(handles.len())
            .map_err(|_| Error::NoMemory)?;
        let mut cells: Vec<ARef<SyncobjCell>> = Vec::new();
        cells
            .try_reserve_exact(handles.len())
            .map_err(|_| Error::NoMemory)?;
        {
            let o = self.lock();
            if handles.iter().any(|h| o.idr.get(*h).is_none()) {
                return Err(Error::NotFound);
            }
            for ((h, p), link) in handles.iter().zip(points).zip(links) {
                if let Some(s) = o.idr.get(*h) {
                    let mut slot = s.slot();
                    let prev = slot.take();
                    *slot = Some(link.init(prev.clone(), Contained::One(signalled()), *p));
                    drop(slot);
                    prevs.push(prev);
                    cells.push(s.clone());
                }
            }
        }
        for s in &cells {
            s.waiters.wake_all();
        }
        for p in prevs.iter().flatten() {
            chain::collect(p);
        }
        Ok(())
    }

    /// The fence of point `point` of a syncobj (`drm_syncobj_find_fence`): for point 0 the
    /// fence it holds, otherwise the link of the earliest point at or above `point` (a
    /// signalled fence if that point has signalled).
    ///
    /// [`Error::NotFound`] for an unknown handle; [`Error::Invalid`] for flags other than
    /// [`DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT`], or if there is no such fence (none, or the
    /// point not submitted yet). With `WAIT_FOR_SUBMIT` it waits up to 5 seconds for the fence
    /// to be attached instead, then fails with `ETIME`.
    pub fn find_fence(&self, handle: u32, point: u64, flags: u32) -> Result<FenceRef> {
        let s = self.lookup(handle).ok_or(Error::NotFound)?;
        find_fence_in(&s, point, flags)
    }

    /// The point `SYNCOBJ_QUERY` reports for a syncobj: 0 unless it holds a timeline; the
    /// newest point with `last_submitted`, otherwise the newest signalled one.
    /// [`Error::NotFound`] for an unknown handle.
    pub fn query(&self, handle: u32, last_submitted: bool) -> Result<u64> {
        let f = self.fence(handle)?;
        Ok(chain::query(f.as_ref(), last_submitted))
    }

    /// Number of syncobjs.
    pub fn len(&self) -> usize {
        self.lock().idr.len()
    }

    /// Whether the file has no syncobj.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`SyncobjTable::find_fence`] on a syncobj already looked up.
pub(crate) fn find_fence_in(s: &SyncobjCell, point: u64, flags: u32) -> Result<FenceRef> {
    if flags & !DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT != 0 {
        return Err(Error::Invalid);
    }
    if let Some(f) = fence_at(s.get(), point) {
        return Ok(f);
    }
    if flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT == 0 {
        return Err(Error::Invalid);
    }
    let deadline = monotonic_ns().saturating_add(WAIT_FOR_SUBMIT_TIMEOUT_NS);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let _entry = s.waiters.add(&waker)?;
    loop {
        // Its handle may be gone meanwhile: whoever still holds the syncobj may attach a fence,
        // otherwise the deadline passes, as in the kernel.
        if let Some(f) = fence_at(s.get(), point) {
            return Ok(f);
        }
        let now = monotonic_ns();
        if now >= deadline {
            return Err(Error::Other(ETIME));
        }
        thread::park_timeout(Duration::from_nanos((deadline - now) as u64));
    }
}

/// Nanoseconds of the host's monotonic clock (the clock syncobj deadlines are expressed in),
/// counted from the first call in the process.
pub fn monotonic_ns() -> i64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    i64::try_from(epoch.elapsed().as_nanos()).unwrap_or(i64::MAX)
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// `ETIME`: a wait ran out of time.
pub const ETIME: i32 = -62;

/// Flag of `SYNCOBJ_CREATE`: the new syncobj is already signalled.
pub const DRM_SYNCOBJ_CREATE_SIGNALED: u32 = 1 << 0;
/// Flag of `SYNCOBJ_WAIT`: wait for every syncobj rather than any.
pub const DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL: u32 = 1 << 0;
/// Flag of `SYNCOBJ_WAIT`: a syncobj without a fence is waited on until one is attached.
pub const DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT: u32 = 1 << 1;
/// Flag of `SYNCOBJ_TIMELINE_WAIT`: a point counts as soon as it has a fence (submitted), not
/// when that signals; a point without one is waited for.
pub const DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE: u32 = 1 << 2;
/// Flag of the waits: `deadline_nsec` is a hint for the fences (accepted and ignored here).
pub const DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE: u32 = 1 << 3;
/// Flag of `SYNCOBJ_QUERY`: report the newest point submitted rather than signalled.
pub const DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED: u32 = 1 << 0;

/// Argument of `DRM_IOCTL_SYNCOBJ_CREATE`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjCreate {
    /// Out: the handle.
    pub handle: u32,
    /// [`DRM_SYNCOBJ_CREATE_SIGNALED`] or 0.
    pub flags: u32,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_DESTROY`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjDestroy {
    /// The handle.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_WAIT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjWait {
    /// User address of an array of `u32` handles.
    pub handles: u64,
    /// Absolute deadline in [`monotonic_ns`] time.
    pub timeout_nsec: i64,
    /// Number of handles.
    pub count_handles: u32,
    /// `DRM_SYNCOBJ_WAIT_FLAGS_*`.
    pub flags: u32,
    /// Out: the syncobj that ended a wait-any; for a wait-all the first one signalled on
    /// entry (`u32::MAX` if none was).
    pub first_signaled: u32,
    /// Not checked (as in the kernel).
    pub pad: u32,
    /// Deadline hint (ignored here).
    pub deadline_nsec: u64,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_RESET` and `DRM_IOCTL_SYNCOBJ_SIGNAL`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjArray {
    /// User address of an array of `u32` handles.
    pub handles: u64,
    /// Number of handles.
    pub count_handles: u32,
    /// Must be zero.
    pub pad: u32,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjTimelineWait {
    /// User address of an array of `u32` handles.
    pub handles: u64,
    /// User address of an array of `u64` points, one per handle (0: the whole syncobj); a
    /// null address reads as all zero.
    pub points: u64,
    /// Absolute deadline in [`monotonic_ns`] time.
    pub timeout_nsec: i64,
    /// Number of handles.
    pub count_handles: u32,
    /// `DRM_SYNCOBJ_WAIT_FLAGS_*`.
    pub flags: u32,
    /// Out: index of the first signalled syncobj (see [`DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`]).
    pub first_signaled: u32,
    /// Not checked (as in the kernel).
    pub pad: u32,
    /// Deadline hint (ignored here).
    pub deadline_nsec: u64,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_QUERY` and `DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjTimelineArray {
    /// User address of an array of `u32` handles.
    pub handles: u64,
    /// User address of an array of `u64` points: written by a query, read by a signal (a null
    /// address reads as all zero).
    pub points: u64,
    /// Number of handles.
    pub count_handles: u32,
    /// [`DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED`] or 0 for a query, 0 for a signal.
    pub flags: u32,
}

/// Argument of `DRM_IOCTL_SYNCOBJ_TRANSFER`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmSyncobjTransfer {
    /// The syncobj whose fence is transferred.
    pub src_handle: u32,
    /// The syncobj that receives it.
    pub dst_handle: u32,
    /// The point of the source (0: its fence as a whole).
    pub src_point: u64,
    /// The point added to the destination (0: the fence replaces the destination's).
    pub dst_point: u64,
    /// [`DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT`] or 0.
    pub flags: u32,
    /// Must be zero.
    pub pad: u32,
}

// SAFETY: These argument structures are `repr(C)` integers without padding; any bit pattern
// is valid.
unsafe impl IoctlArg for DrmSyncobjCreate {}
// SAFETY: As above.
unsafe impl IoctlArg for DrmSyncobjDestroy {}
// SAFETY: As above (8 + 8 + 4 * 4 + 8 bytes, naturally aligned).
unsafe impl IoctlArg for DrmSyncobjWait {}
// SAFETY: As above.
unsafe impl IoctlArg for DrmSyncobjArray {}
// SAFETY: As above (8 + 8 + 8 + 4 * 4 + 8 bytes, naturally aligned).
unsafe impl IoctlArg for DrmSyncobjTimelineWait {}
// SAFETY: As above (8 + 8 + 4 + 4 bytes).
unsafe impl IoctlArg for DrmSyncobjTimelineArray {}
// SAFETY: As above (4 + 4 + 8 + 8 + 4 + 4 bytes).
unsafe impl IoctlArg for DrmSyncobjTransfer {}

/// `DRM_IOCTL_SYNCOBJ_CREATE`.
pub const DRM_IOCTL_SYNCOBJ_CREATE: u32 = IOWR::<DrmSyncobjCreate>(0xBF);
/// `DRM_IOCTL_SYNCOBJ_DESTROY`.
pub const DRM_IOCTL_SYNCOBJ_DESTROY: u32 = IOWR::<DrmSyncobjDestroy>(0xC0);
/// `DRM_IOCTL_SYNCOBJ_WAIT`.
pub const DRM_IOCTL_SYNCOBJ_WAIT: u32 = IOWR::<DrmSyncobjWait>(0xC3);
/// `DRM_IOCTL_SYNCOBJ_RESET`.
pub const DRM_IOCTL_SYNCOBJ_RESET: u32 = IOWR::<DrmSyncobjArray>(0xC4);
/// `DRM_IOCTL_SYNCOBJ_SIGNAL`.
pub const DRM_IOCTL_SYNCOBJ_SIGNAL: u32 = IOWR::<DrmSyncobjArray>(0xC5);
/// `DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT`.
///
/// Waits for a point of each syncobj (`points`), all of them or any of them, until an absolute
/// deadline. `first_signaled` is, as the kernel reports it, the index of the syncobj that
/// ended a wait-any, and for a wait-all the first one already signalled on entry (`u32::MAX` if
/// none was).
pub const DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT: u32 = IOWR::<DrmSyncobjTimelineWait>(0xCA);
/// `DRM_IOCTL_SYNCOBJ_QUERY`.
pub const DRM_IOCTL_SYNCOBJ_QUERY: u32 = IOWR::<DrmSyncobjTimelineArray>(0xCB);
/// `DRM_IOCTL_SYNCOBJ_TRANSFER`.
pub const DRM_IOCTL_SYNCOBJ_TRANSFER: u32 = IOWR::<DrmSyncobjTransfer>(0xCC);
/// `DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`.
pub const DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL: u32 = IOWR::<DrmSyncobjTimelineArray>(0xCD);

/// Largest number of handles one call takes (keeps the kernel copy bounded).
pub const MAX_HANDLES: u32 = 1 << 16;

/// How long [`SyncobjTable::find_fence`] with `WAIT_FOR_SUBMIT` waits for a fence (5 s, as in
/// the kernel).
pub const WAIT_FOR_SUBMIT_TIMEOUT_NS: i64 = 5_000_000_000;

fn read_handles(user: &dyn UserMemory, addr: u64, count: u32) -> Result<Vec<u32>> {
    if count == 0 || count > MAX_HANDLES {
        return Err(Error::Invalid);
    }
    let n = count as usize;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(n * 4)
        .map_err(|_| Error::NoMemory)?;
    bytes.resize(n * 4, 0);
    user.read(addr, &mut bytes)?;
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| Error::NoMemory)?;
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(out)
}

/// Reads `count` points from `addr` (all zero for a null address, as the kernel reads them).
fn read_points(user: &dyn UserMemory, addr: u64, count: usize) -> Result<Vec<u64>> {
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(count * 8)
        .map_err(|_| Error::NoMemory)?;
    bytes.resize(count * 8, 0);
    if addr != 0 {
        user.read(addr, &mut bytes)?;
    }
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| Error::NoMemory)?;
    out.extend(bytes.chunks_exact(8).map(|c| {
        let mut b = [0; 8];
        b.copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
    Ok(out)
}

/// Looks every handle up; [`Error::NotFound`] if one is unknown.
fn lookup_all(table: &SyncobjTable, handles: &[u32]) -> Result<Vec<ARef<SyncobjCell>>> {
    let mut out = Vec::new();
    out.try_reserve_exact(handles.len())
        .map_err(|_| Error::NoMemory)?;
    for h in handles {
        out.push(table.lookup(*h).ok_or(Error::NotFound)?);
    }
    Ok(out)
}

/// The fence a syncobj holding `fence` has for `point`, if it has one: a signalled fence if
/// the point has signalled already.
fn fence_at(fence: Option<FenceRef>, point: u64) -> Option<FenceRef> {
    match chain::find_seqno(fence?, point) {
        Ok(Some(f)) => Some(f),
        Ok(None) => Some(signalled()),
        Err(_) => None,
    }
}

pub(super) fn create(table: &SyncobjTable, arg: &mut DrmSyncobjCreate) -> Result<u32> {
    if arg.flags & !DRM_SYNCOBJ_CREATE_SIGNALED != 0 {
        return Err(Error::Invalid);
    }
    let fence: Option<FenceRef> = if arg.flags & DRM_SYNCOBJ_CREATE_SIGNALED != 0 {
        Some(signalled())
    } else {
        None
    };
    arg.handle = table.create(fence)?;
    Ok(0)
}

pub(super) fn destroy(table: &SyncobjTable, arg: &DrmSyncobjDestroy) -> Result<u32> {
    if arg.pad != 0 {
        return Err(Error::Invalid);
    }
    table.destroy(arg.handle)?;
    Ok(0)
}

pub(super) fn reset_or_signal(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &DrmSyncobjArray,
    signal: bool,
) -> Result<u32> {
    if arg.pad != 0 {
        return Err(Error::Invalid);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    let fence: Option<FenceRef> = if signal { Some(signalled()) } else { None };
    table.replace_all(&handles, fence)?;
    Ok(0)
}

/// `DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL`: a signalled point on each syncobj.
pub(super) fn timeline_signal(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &DrmSyncobjTimelineArray,
) -> Result<u32> {
    if arg.flags != 0 {
        return Err(Error::Invalid);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    lookup_all(table, &handles)?;
    let points = read_points(user, arg.points, handles.len())?;
    let mut links = Vec::new();
    links
        .try_reserve_exact(handles.len())
        .map_err(|_| Error::NoMemory)?;
    for _ in &handles {
        links.push(table.alloc_point()?);
    }
    table.signal_points(&handles, &points, links)?;
    Ok(0)
}

/// `DRM_IOCTL_SYNCOBJ_QUERY`: the newest signalled (or submitted) point of each syncobj.
pub(super) fn query(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &DrmSyncobjTimelineArray,
) -> Result<u32> {
    if arg.flags & !DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED != 0 {
        return Err(Error::Invalid);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    let found = lookup_all(table, &handles)?;
    let last = arg.flags & DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED != 0;
    for (i, s) in found.iter().enumerate() {
        let point = chain::query(s.get().as_ref(), last);
        let at = arg.points.checked_add(i as u64 * 8).ok_or(Error::Fault)?;
        user.write(at, &point.to_le_bytes())?;
    }
    Ok(0)
}

/// `DRM_IOCTL_SYNCOBJ_TRANSFER`: the fence of a point (or of a binary syncobj) becomes
/// another syncobj's fence (`dst_point == 0`) or a point of its timeline.
pub(super) fn transfer(table: &SyncobjTable, arg: &DrmSyncobjTransfer) -> Result<u32> {
    if arg.pad != 0 {
        return Err(Error::Invalid);
    }
    if !table.contains(arg.dst_handle) {
        return Err(Error::NotFound);
    }
    let fence = table.find_fence(arg.src_handle, arg.src_point, arg.flags)?;
    if arg.dst_point == 0 {
        table.replace(arg.dst_handle, Some(fence))?;
    } else {
        let contained = chain::flatten(fence)?;
        let link = table.alloc_point()?;
        table.add_contained(arg.dst_handle, None, link, contained, arg.dst_point)?;
    }
    Ok(0)
}

/// Wakes the waiting thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

static WAIT_PASSES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// How many times `SYNCOBJ_WAIT`s and `SYNCOBJ_TIMELINE_WAIT`s of this process have looked at
/// their syncobjs (a diagnostic: a wait looks once on entry and once per wake-up).
pub fn wait_passes() -> u64 {
    WAIT_PASSES.load(core::sync::atomic::Ordering::Relaxed)
}

/// What a wait knows about one of its syncobjs.
enum Slot {
    /// The fence of its point.
    Fence(FenceRef),
    /// It had no fence for the point when last looked at.
    Pending,
}

pub(super) fn wait(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &mut DrmSyncobjWait,
) -> Result<u32> {
    let known = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL
        | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
        | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE;
    if arg.flags & !known != 0 {
        return Err(Error::Invalid);
    }
    if arg.count_handles == 0 {
        return Ok(0);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    let found = lookup_all(table, &handles)?;
    let points = read_points(user, 0, handles.len())?;
    arg.first_signaled = wait_points(&found, &points, arg.flags, arg.timeout_nsec)?;
    Ok(0)
}

pub(super) fn timeline_wait(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &mut DrmSyncobjTimelineWait,
) -> Result<u32> {
    let known = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL
        | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
        | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE
        | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE;
    if arg.flags & !known != 0 {
        return Err(Error::Invalid);
    }
    if arg.count_handles == 0 {
        return Ok(0);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    let found = lookup_all(table, &handles)?;
    let points = read_points(user, arg.points, handles.len())?;
    arg.first_signaled = wait_points(&found, &points, arg.flags, arg.timeout_nsec)?;
    Ok(0)
}

/// Waits for the points of the syncobjs `found`; returns the index the kernel reports in
/// `first_signaled`: for wait-any the syncobj that ended the wait, for wait-all the first one
/// already signalled on entry (`u32::MAX` if none was).
fn wait_points(
    found: &[ARef<SyncobjCell>],
    points: &[u64],
    flags: u32,
    timeout_nsec: i64,
) -> Result<u32> {
    let all = flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL != 0;
    let available = flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE != 0;
    let for_submit = flags
        & (DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE)
        != 0;
    // Every point must have a fence before waiting, unless the wait is for submission. From
    // then on the wait is about these syncobjs (it holds them), whatever happens to their
    // handles.
    let mut slots: Vec<Slot> = Vec::new();
    slots
        .try_reserve_exact(found.len())
        .map_err(|_| Error::NoMemory)?;
    for (s, point) in found.iter().zip(points) {
        match fence_at(s.get(), *point) {
            Some(f) => slots.push(Slot::Fence(f)),
            None if for_submit => slots.push(Slot::Pending),
            None => return Err(Error::Invalid),
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    // While a point has no fence, woken by every fence attached to its syncobj; taken back on
    // every way out.
    let mut submit = Vec::new();
    for (s, slot) in found.iter().zip(&slots) {
        if matches!(slot, Slot::Pending) {
            submit.try_reserve(1).map_err(|_| Error::NoMemory)?;
            submit.push(s.waiters.add(&waker)?);
        }
    }
    // Dropped on every way out, taking the wakers back off the fences still pending.
    let mut armed: Vec<Option<Registration>> = Vec::new();
    armed
        .try_reserve_exact(slots.len())
        .map_err(|_| Error::NoMemory)?;
    armed.resize_with(slots.len(), || None);
    let mut first = u32::MAX;
    let mut entry = true;
    loop {
        WAIT_PASSES.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let mut done = 0usize;
        for (i, slot) in slots.iter_mut().enumerate() {
            if let Slot::Pending = *slot {
                if let Some(f) = fence_at(found[i].get(), points[i]) {
                    *slot = Slot::Fence(f);
                }
            }
            let Slot::Fence(fence) = slot else { continue };
            // Whether the point was ready before this pass queued anything on it: a fence
            // that signals between queueing the waker and the check after it was not signalled
            // on entry (the kernel decides `first_signaled` before it adds its callbacks).
            let was_ready = available || fence.status().is_some();
            let mut ready = was_ready;
            if !ready && !armed[i].as_ref().is_some_and(Registration::is_queued) {
                // Not queued yet, or the fence could not queue the waker and woke it instead:
                // queue it (again).
                armed[i] = None;
                armed[i] = Some(fence.wake_on_signal(&waker));
                ready = fence.status().is_some();
            }
            if ready {
                if !all {
                    return Ok(i as u32);
                }
                if entry && was_ready && first == u32::MAX {
                    first = i as u32;
                }
                done += 1;
            }
        }
        entry = false;
        if done == slots.len() {
            return Ok(first);
        }
        let now = monotonic_ns();
        if now >= timeout_nsec {
            return Err(Error::Other(ETIME));
        }
        thread::park_timeout(Duration::from_nanos((timeout_nsec - now) as u64));
    }
}
