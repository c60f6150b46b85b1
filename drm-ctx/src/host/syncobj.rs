// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM synchronisation objects (syncobjs) of the host core.
//!
//! A syncobj is a per-file handle that holds at most one fence. Drivers replace the fence when
//! a job that signals the syncobj is submitted, and read it when a job waits on the syncobj;
//! userspace creates and destroys syncobjs, waits on them and signals them through the core
//! ioctls below. Only binary syncobjs exist here (no timeline points).
//!
//! | ioctl                      | number | what it does                                       |
//! |----------------------------|--------|----------------------------------------------------|
//! | `DRM_IOCTL_SYNCOBJ_CREATE` | `0xBF` | new handle, empty or already signalled             |
//! | `DRM_IOCTL_SYNCOBJ_DESTROY`| `0xC0` | drops the handle (its fence lives on where used)   |
//! | `DRM_IOCTL_SYNCOBJ_WAIT`   | `0xC3` | waits for all or any, with an absolute deadline    |
//! | `DRM_IOCTL_SYNCOBJ_RESET`  | `0xC4` | removes the fences                                 |
//! | `DRM_IOCTL_SYNCOBJ_SIGNAL` | `0xC5` | replaces the fences with signalled ones            |
//!
//! Deadlines are absolute times of [`monotonic_ns`], the host's `CLOCK_MONOTONIC`. A wait that
//! runs out of time fails with `ETIME` (`-62`); one on a syncobj without a fence fails with
//! `EINVAL` unless `WAIT_FOR_SUBMIT` asks to wait for one; an error a fence signalled with
//! is not reported by the wait (as in the kernel: the wait only tells that fences signalled).
//! A wait is about the syncobjs its handles named when it started: destroying a handle does not
//! end it (nothing can attach a fence to that syncobj any more). A wait for submission sleeps
//! until a fence is attached. As in the kernel, a handle that names no syncobj is `ENOENT` for
//! wait, reset and signal, and unplugging the device does not end a wait that has started: it
//! ends when its fences signal or its deadline passes (the driver signals every fence of an
//! unplugged device, with an error).

use core::any::Any;
use core::task::Waker;
use std::{
    boxed::Box,
    sync::{Arc, Mutex, MutexGuard, OnceLock},
    task::Wake,
    thread::{self, Thread},
    time::{Duration, Instant},
    vec::Vec,
};

use super::{idr::Idr, WakerList};
use crate::{
    drm::ioctl::{IoctlArg, IOWR},
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
pub struct Registration(Option<Box<dyn FnOnce() + Send>>);

impl Registration {
    /// A registration whose drop runs `remove`, which takes the waker off the fence.
    pub fn new(remove: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(remove)))
    }

    /// A registration with nothing to take back: the waker was woken at once, or the fence
    /// keeps nothing queued.
    pub fn done() -> Self {
        Self(None)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(remove) = self.0.take() {
            remove();
        }
    }
}

impl core::fmt::Debug for Registration {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("Registration")
            .field("queued", &self.0.is_some())
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

/// One syncobj: the fence it holds, and a number telling it apart from a syncobj created later
/// under the same handle.
struct Syncobj {
    id: u64,
    fence: Option<FenceRef>,
}

struct Objects {
    idr: Idr<Syncobj>,
    next_id: u64,
}

/// The syncobjs of one file.
///
/// Handles are numbered like the kernel's IDR (lowest free from 1, `O(log n)`), and creating
/// one fails with [`Error::NoMemory`] rather than aborting when memory runs out.
pub struct SyncobjTable {
    objects: Mutex<Objects>,
    /// Waits for submission, woken whenever a fence is attached or a syncobj destroyed.
    waiters: WakerList,
}

impl Default for SyncobjTable {
    fn default() -> Self {
        Self {
            objects: Mutex::new(Objects {
                idr: Idr::default(),
                next_id: 0,
            }),
            waiters: WakerList::default(),
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
        let h = o.idr.alloc(Syncobj { id, fence })?;
        o.next_id += 1;
        Ok(h)
    }

    /// Destroys a syncobj; [`Error::Invalid`] if there is none with this handle.
    ///
    /// Waits already in progress on it go on with the fence they found (as in Linux, where a
    /// wait holds a reference to the syncobj): nothing can attach a new one any more.
    pub fn destroy(&self, handle: u32) -> Result {
        let gone = self.lock().idr.remove(handle).ok_or(Error::Invalid)?;
        drop(gone);
        self.waiters.wake_all();
        Ok(())
    }

    /// The fence of a syncobj (`None` if it holds none); [`Error::NotFound`] for an unknown
    /// handle.
    pub fn fence(&self, handle: u32) -> Result<Option<FenceRef>> {
        self.lock()
            .idr
            .get(handle)
            .map(|s| s.fence.clone())
            .ok_or(Error::NotFound)
    }

    /// The identity and fence of a syncobj.
    fn lookup(&self, handle: u32) -> Option<(u64, Option<FenceRef>)> {
        self.lock().idr.get(handle).map(|s| (s.id, s.fence.clone()))
    }

    /// Whether `handle` names a syncobj.
    pub fn contains(&self, handle: u32) -> bool {
        self.lock().idr.get(handle).is_some()
    }

    /// Replaces the fence of a syncobj; [`Error::NotFound`] for an unknown handle.
    pub fn replace(&self, handle: u32, fence: Option<FenceRef>) -> Result {
        let old = match self.lock().idr.get_mut(handle) {
            Some(s) => core::mem::replace(&mut s.fence, fence),
            None => return Err(Error::NotFound),
        };
        drop(old);
        self.waiters.wake_all();
        Ok(())
    }

    /// Replaces the fences of several syncobjs, all or none ([`Error::NotFound`] if a handle is
    /// unknown).
    fn replace_all(&self, handles: &[u32], fence: Option<FenceRef>) -> Result {
        {
            let mut o = self.lock();
            if handles.iter().any(|h| o.idr.get(*h).is_none()) {
                return Err(Error::NotFound);
            }
            for h in handles {
                if let Some(s) = o.idr.get_mut(*h) {
                    s.fence = fence.clone();
                }
            }
        }
        self.waiters.wake_all();
        Ok(())
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
    /// Out: index of the first signalled syncobj (wait-any).
    pub first_signaled: u32,
    /// Must be zero.
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

// SAFETY: All four are `repr(C)` integers without padding; any bit pattern is valid.
unsafe impl IoctlArg for DrmSyncobjCreate {}
// SAFETY: As above.
unsafe impl IoctlArg for DrmSyncobjDestroy {}
// SAFETY: As above (8 + 8 + 4 * 4 + 8 bytes, naturally aligned).
unsafe impl IoctlArg for DrmSyncobjWait {}
// SAFETY: As above.
unsafe impl IoctlArg for DrmSyncobjArray {}

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

/// Largest number of handles one call takes (keeps the kernel copy bounded).
pub const MAX_HANDLES: u32 = 1 << 16;

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
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
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

/// How many times `SYNCOBJ_WAIT`s of this process have looked at their syncobjs (a diagnostic:
/// a wait looks once on entry and once per wake-up).
pub fn wait_passes() -> u64 {
    WAIT_PASSES.load(core::sync::atomic::Ordering::Relaxed)
}

/// What a wait knows about one of its syncobjs.
enum Slot {
    /// It holds this fence.
    Fence(FenceRef),
    /// It held no fence when last looked at; the syncobj is the one with this identity.
    Empty(u64),
    /// It held no fence and was destroyed (or its handle reused): no fence can come any more.
    Gone,
}

pub(super) fn wait(
    table: &SyncobjTable,
    user: &dyn UserMemory,
    arg: &mut DrmSyncobjWait,
) -> Result<u32> {
    let known = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT;
    if arg.flags & !known != 0 || arg.pad != 0 {
        return Err(Error::Invalid);
    }
    let handles = read_handles(user, arg.handles, arg.count_handles)?;
    let all = arg.flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL != 0;
    let for_submit = arg.flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT != 0;
    // Every handle must exist, and without WAIT_FOR_SUBMIT hold a fence, before waiting. From
    // then on the wait is about these syncobjs, whatever happens to their handles.
    let mut slots: Vec<Slot> = Vec::new();
    slots
        .try_reserve_exact(handles.len())
        .map_err(|_| Error::NoMemory)?;
    for h in &handles {
        match table.lookup(*h) {
            None => return Err(Error::NotFound),
            Some((_, Some(f))) => slots.push(Slot::Fence(f)),
            Some((id, None)) if for_submit => slots.push(Slot::Empty(id)),
            Some((_, None)) => return Err(Error::Invalid),
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    // While a syncobj has no fence, woken by every fence attached to the table's syncobjs;
    // taken back on every way out.
    let _submit = if slots.iter().any(|s| matches!(s, Slot::Empty(_))) {
        Some(table.waiters.add(&waker)?)
    } else {
        None
    };
    // Dropped on every way out, taking the wakers back off the fences still pending.
    let mut armed: Vec<Option<Registration>> = Vec::new();
    armed
        .try_reserve_exact(slots.len())
        .map_err(|_| Error::NoMemory)?;
    armed.resize_with(slots.len(), || None);
    loop {
        WAIT_PASSES.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let mut first = None;
        let mut done = 0usize;
        for (i, slot) in slots.iter_mut().enumerate() {
            if let Slot::Empty(id) = *slot {
                *slot = match table.lookup(handles[i]) {
                    Some((same, Some(f))) if same == id => Slot::Fence(f),
                    Some((same, None)) if same == id => Slot::Empty(id),
                    _ => Slot::Gone,
                };
            }
            let Slot::Fence(fence) = slot else { continue };
            if fence.status().is_some() {
                done += 1;
                first.get_or_insert(i);
            } else if armed[i].is_none() {
                armed[i] = Some(fence.wake_on_signal(&waker));
                if fence.status().is_some() {
                    done += 1;
                    first.get_or_insert(i);
                }
            }
        }
        if (all && done == slots.len()) || (!all && first.is_some()) {
            arg.first_signaled = if all { 0 } else { first.unwrap_or(0) as u32 };
            return Ok(0);
        }
        let now = monotonic_ns();
        if now >= arg.timeout_nsec {
            return Err(Error::Other(ETIME));
        }
        thread::park_timeout(Duration::from_nanos((arg.timeout_nsec - now) as u64));
    }
}
