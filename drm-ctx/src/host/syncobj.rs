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
//! The syncobjs themselves are the crate's own core, which builds without `std`:
//! [`SyncobjTable`], [`ChainNode`], [`FenceRef`] and the rest are re-exported from
//! [`crate::drm::syncobj`], and their memory (syncobjs, chain links, handle tables, waiter lists)
//! comes from the file's device allocator. This module adds what needs the host: the ioctls,
//! the waits that sleep ([`monotonic_ns`] deadlines, threads parked until a fence or a
//! submission wakes them) and host fences ([`SyncFence`], shared in an `Arc` as a [`FenceRef`]
//! with [`FenceRef::from_arc`]).
//!
//! Allocations report `ENOMEM` except a few `Arc`s and `Box`es (Rust's have no fallible
//! constructor): the `Arc` of [`FenceRef::from_arc`], the waker of a blocking wait, and the box
//! a [`Registration`] is kept in while its waker is queued.

use core::any::Any;
use core::ptr::NonNull;
use core::task::Waker;
use std::{
    boxed::Box,
    sync::{Arc, OnceLock},
    task::Wake,
    thread::{self, Thread},
    time::{Duration, Instant},
    vec::Vec,
};

pub use crate::drm::syncobj::{
    for_each_unwrapped, live_chain_links, ChainNode, ChainPoint, FenceRef, SignalledFence,
    SyncobjKey, SyncobjTable, Waiter, ETIME,
};
use crate::{
    drm::{
        ioctl::{IoctlArg, IOWR},
        syncobj::{core_impl, Fence},
    },
    types::ARef,
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

/// A host fence in an `Arc`, as a [`Fence`] (what [`FenceRef::from_arc`] makes).
///
/// # Invariants
///
/// The value lives in an `Arc` whose pointer, from `Arc::into_raw`, is `root`; its strong
/// count is the fence's reference count.
struct ArcFence {
    root: NonNull<ArcFence>,
    fence: Arc<dyn SyncFence>,
}

// SAFETY: `root` only points to the value itself (used to give references back); the fence is
// `Send + Sync`.
unsafe impl Send for ArcFence {}
// SAFETY: As for `Send`.
unsafe impl Sync for ArcFence {}

// SAFETY: The count is the `Arc`'s (type invariant), which frees the value with its last
// reference, through `root`, a pointer that may free it. The tokens are boxed `Registration`s
// of this fence, each taken back once.
unsafe impl Fence for ArcFence {
    fn get(&self) {
        // SAFETY: `root` is the pointer of a live `Arc` (type invariant; we are alive).
        unsafe { Arc::increment_strong_count(self.root.as_ptr()) }
    }

    unsafe fn put(this: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the value is alive.
        let root = unsafe { this.as_ref() }.root;
        // SAFETY: `root` came from `Arc::into_raw` (type invariant) and the caller gives back
        // one strong reference.
        unsafe { Arc::decrement_strong_count(root.as_ptr()) }
    }

    fn status(&self) -> Option<core::result::Result<(), i32>> {
        self.fence.status()
    }

    fn add_waker(&self, waker: &Waker) -> Option<Waiter> {
        let r = self.fence.wake_on_signal(waker);
        if !r.is_queued() {
            return None;
        }
        // A box, as Rust's `Arc` and closures are: this aborts rather than failing when the host
        // is out of memory (as the waker of a blocking wait does).
        let token = Box::into_raw(Box::new(r)).cast::<()>();
        // SAFETY: `remove_waker` takes back exactly such boxes.
        Some(unsafe { Waiter::new(self, token) })
    }

    unsafe fn remove_waker(&self, token: *mut ()) {
        // SAFETY: The caller passes a token of `add_waker`, once: a boxed registration.
        drop(unsafe { Box::from_raw(token.cast::<Registration>()) });
    }

    fn as_any(&self) -> &dyn Any {
        self.fence.as_any()
    }
}

impl FenceRef {
    /// The host fence `fence` as a syncobj holds it: a [`FenceRef`] counting its references in
    /// an `Arc` of its own, through which [`as_any`](Fence::as_any) still finds the driver's
    /// type. Like every `Arc`, it aborts rather than failing when the host is out of memory.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::host::syncobj::{FenceRef, SignalledFence};
    /// use std::sync::Arc;
    ///
    /// let f = FenceRef::from_arc(Arc::new(SignalledFence));
    /// assert_eq!(f.status(), Some(Ok(())));
    /// assert!(f.as_any().is::<SignalledFence>());
    /// let g: FenceRef = Arc::new(SignalledFence).into();
    /// assert!(!FenceRef::ptr_eq(&f, &g));
    /// assert!(FenceRef::ptr_eq(&f, &f.clone()));
    /// ```
    pub fn from_arc(fence: Arc<dyn SyncFence>) -> FenceRef {
        let raw = Arc::into_raw(Arc::new(ArcFence {
            root: NonNull::dangling(),
            fence,
        }))
        .cast_mut();
        // SAFETY: `Arc::into_raw` never returns a null pointer.
        let root = unsafe { NonNull::new_unchecked(raw) };
        // SAFETY: `root` is the pointer of the `Arc` just made, which nothing else reaches yet:
        // writing through it is writing to a value we own alone.
        unsafe { (*root.as_ptr()).root = root };
        // SAFETY: The value lives in an `Arc` whose strong reference we hand over; `root` is
        // its pointer (the invariant of `ArcFence` holds from here).
        unsafe { FenceRef::from_raw(root) }
    }
}

impl<T: SyncFence> From<Arc<T>> for FenceRef {
    fn from(fence: Arc<T>) -> FenceRef {
        FenceRef::from_arc(fence)
    }
}

/// Waits for a fence to be attached to point `point` of `s` (`WAIT_FOR_SUBMIT` of
/// [`SyncobjTable::find_fence`]), up to [`WAIT_FOR_SUBMIT_TIMEOUT_NS`], then fails with
/// `ETIME`.
pub(crate) fn wait_for_submit(s: &core_impl::SyncobjCell, point: u64) -> Result<FenceRef> {
    let deadline = monotonic_ns().saturating_add(WAIT_FOR_SUBMIT_TIMEOUT_NS);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let _entry = s.waiters.add(&waker)?;
    loop {
        // Its handle may be gone meanwhile: whoever still holds the syncobj may attach a fence,
        // otherwise the deadline passes, as in the kernel.
        if let Some(f) = s.fence_at(point) {
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
fn lookup_all(table: &SyncobjTable, handles: &[u32]) -> Result<Vec<ARef<core_impl::SyncobjCell>>> {
    let mut out = Vec::new();
    out.try_reserve_exact(handles.len())
        .map_err(|_| Error::NoMemory)?;
    for h in handles {
        out.push(table.lookup(*h).ok_or(Error::NotFound)?);
    }
    Ok(out)
}

pub(super) fn create(table: &SyncobjTable, arg: &mut DrmSyncobjCreate) -> Result<u32> {
    if arg.flags & !DRM_SYNCOBJ_CREATE_SIGNALED != 0 {
        return Err(Error::Invalid);
    }
    let fence: Option<FenceRef> = if arg.flags & DRM_SYNCOBJ_CREATE_SIGNALED != 0 {
        Some(FenceRef::signalled())
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
    if signal {
        table.signal(&handles)?;
    } else {
        table.reset(&handles)?;
    }
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
    table.timeline_signal(&handles, &points)?;
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
        let point = s.query(last);
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
    table.transfer(
        arg.src_handle,
        arg.src_point,
        arg.dst_handle,
        arg.dst_point,
        arg.flags,
    )?;
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
    found: &[ARef<core_impl::SyncobjCell>],
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
        match s.fence_at(*point) {
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
    let mut armed: Vec<Option<Waiter>> = Vec::new();
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
                if let Some(f) = found[i].fence_at(points[i]) {
                    *slot = Slot::Fence(f);
                }
            }
            let Slot::Fence(fence) = slot else { continue };
            // Whether the point was ready before this pass queued anything on it: a fence
            // that signals between queueing the waker and the check after it was not signalled
            // on entry (the kernel decides `first_signaled` before it adds its callbacks).
            let was_ready = available || fence.status().is_some();
            let mut ready = was_ready;
            if !ready
                && armed[i]
                    .as_ref()
                    .is_none_or(|w| w.fence().status().is_some())
            {
                // Not queued yet, or the fence could not queue the waker and woke it instead,
                // or (a timeline's chain) the part of it the waker was queued on has signalled
                // and another is pending: queue it (again).
                armed[i] = None;
                armed[i] = fence.add_waker(&waker);
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
