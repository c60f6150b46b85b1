// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The syncobjs of a file: reference-counted cells holding a fence, in a handle table.

use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::chain::{self, ChainPoint, Contained};
use super::fence::FenceRef;
#[cfg(not(feature = "std"))]
use super::ETIME;
use crate::drm::syncobj::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT;
use crate::{
    idr::Idr,
    mem::{Allocator, MemOps},
    sync::{SpinGuard, SpinLock, WakerList},
    types::{ARef, AlwaysRefCounted},
    vec::MemVec,
    Error, Result,
};

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
///   from `mem` with the layout of `Self`, and is freed when `refs` drops to zero.
/// - `root` is the pointer the block was allocated at (an [`ARef`] made from a shared
///   reference may only read through its pointer; the object is dropped and freed through this
///   one).
pub(crate) struct SyncobjCell {
    root: NonNull<SyncobjCell>,
    refs: AtomicUsize,
    mem: MemOps,
    id: u64,
    fence: SpinLock<Option<FenceRef>>,
    /// Waits for submission on this syncobj, woken whenever a fence is attached.
    pub(crate) waiters: WakerList,
}

impl SyncobjCell {
    /// A new syncobj holding `fence`, with one reference, in memory from `mem`;
    /// [`Error::NoMemory`] if it cannot be allocated.
    fn new(mem: MemOps, id: u64, fence: Option<FenceRef>) -> Result<ARef<Self>> {
        let ptr = (mem.alloc)(Layout::new::<Self>())?.cast::<Self>();
        // SAFETY: `ptr` is a fresh block with the size and alignment of `Self`.
        unsafe {
            ptr.as_ptr().write(SyncobjCell {
                root: ptr,
                refs: AtomicUsize::new(1),
                mem,
                id,
                fence: SpinLock::new(fence),
                waiters: WakerList::new(mem),
            })
        };
        // SAFETY: The object is initialised and the one reference it counts is handed over.
        Ok(unsafe { ARef::from_raw(ptr) })
    }

    fn slot(&self) -> SpinGuard<'_, Option<FenceRef>> {
        self.fence.lock()
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

    /// The point `SYNCOBJ_QUERY` reports for it (see [`SyncobjTable::query`]).
    pub(crate) fn query(&self, last_submitted: bool) -> u64 {
        chain::query(self.get().as_ref(), last_submitted)
    }

    /// The fence it has for `point` now, if it has one: a signalled fence if the point has
    /// signalled already.
    pub(crate) fn fence_at(&self, point: u64) -> Option<FenceRef> {
        fence_at(self.get(), point)
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
        let (root, mem) = {
            // SAFETY: The caller owns a reference, so the object is alive.
            let this = unsafe { obj.as_ref() };
            if this.refs.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            (this.root, this.mem)
        };
        // Every other reference's use happened before this point.
        core::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: That was the last reference: nothing else can reach the object, which `new`
        // initialised at `root` (type invariant); it is dropped once, here.
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block came from `mem` at `root` with the layout of `Self` (type
        // invariant) and nothing uses it any more.
        unsafe { (mem.free)(root.cast(), Layout::new::<Self>()) };
    }
}

/// The fence a syncobj holding `fence` has for `point`, if it has one: a signalled fence if
/// the point has signalled already.
pub(crate) fn fence_at(fence: Option<FenceRef>, point: u64) -> Option<FenceRef> {
    match chain::find_seqno(fence?, point) {
        Ok(Some(f)) => Some(f),
        Ok(None) => Some(FenceRef::signalled()),
        Err(_) => None,
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
/// Handles are numbered like the kernel's IDR (lowest free from 1, `O(log n)`). The syncobjs,
/// their chain links and the table itself take their memory from one allocator (a file's from
/// its device's [`mem::Allocator`](crate::mem::Allocator)); running out of it is
/// [`Error::NoMemory`], never an abort.
pub struct SyncobjTable {
    objects: SpinLock<Objects>,
    mem: MemOps,
}

#[cfg(feature = "std")]
impl Default for SyncobjTable {
    /// A table in memory from the host's global allocator.
    fn default() -> Self {
        Self::new_in::<crate::mem::Global>()
    }
}

/// The handles of a table, printed as a list.
struct Handles<'a>(&'a Idr<ARef<SyncobjCell>>);

impl core::fmt::Debug for Handles<'_> {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_list()
            .entries(self.0.iter().map(|(h, _)| h))
            .finish()
    }
}

impl core::fmt::Debug for SyncobjTable {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let o = self.lock();
        out.debug_struct("SyncobjTable")
            .field("handles", &Handles(&o.idr))
            .finish()
    }
}

impl SyncobjTable {
    /// An empty table whose memory comes from `A`.
    pub fn new_in<A: Allocator>() -> Self {
        Self::with_mem(MemOps::of::<A>())
    }

    /// An empty table whose memory comes from `mem`.
    pub(crate) fn with_mem(mem: MemOps) -> Self {
        Self {
            objects: SpinLock::new(Objects {
                idr: Idr::new(mem),
                next_id: 0,
            }),
            mem,
        }
    }

    fn lock(&self) -> SpinGuard<'_, Objects> {
        self.objects.lock()
    }

    /// Creates a syncobj holding `fence` under the lowest free handle (from 1).
    ///
    /// [`Error::NoSpace`] past handle `INT_MAX`, [`Error::NoMemory`] if the table cannot grow.
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::drm::syncobj::{FenceRef, SyncobjTable};
    /// use drm_ctx::mem::Global;
    ///
    /// let t = SyncobjTable::new_in::<Global>();
    /// assert_eq!(t.create(None), Ok(1));
    /// assert_eq!(t.create(Some(FenceRef::signalled())), Ok(2));
    /// t.destroy(1).unwrap();
    /// assert_eq!(t.create(None), Ok(1));
    /// assert!(t.fence(2).unwrap().is_some());
    /// ```
    pub fn create(&self, fence: Option<FenceRef>) -> Result<u32> {
        let mut o = self.lock();
        let id = o.next_id;
        let cell = SyncobjCell::new(self.mem, id, fence)?;
        match o.idr.alloc(cell) {
            Ok(h) => {
                o.next_id += 1;
                Ok(h)
            }
            Err(e) => {
                // The new syncobj (and its fence) goes unlocked.
                drop(o);
                Err(e)
            }
        }
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
    /// [`ChainNode`](super::ChainNode) that signals with every point); [`Error::NotFound`] for
    /// an unknown handle.
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

    /// Removes the fences (and timelines) of several syncobjs (`SYNCOBJ_RESET`): all or none
    /// ([`Error::NotFound`] if a handle is unknown, [`Error::NoMemory`]).
    pub fn reset(&self, handles: &[u32]) -> Result {
        self.replace_all(handles, None)
    }

    /// Replaces the fences of several syncobjs with a signalled one (`SYNCOBJ_SIGNAL`): all or
    /// none ([`Error::NotFound`] if a handle is unknown, [`Error::NoMemory`]).
    pub fn signal(&self, handles: &[u32]) -> Result {
        self.replace_all(handles, Some(FenceRef::signalled()))
    }

    /// Adds signalled point `points[i]` to the syncobj `handles[i]`, for each `i`
    /// (`SYNCOBJ_TIMELINE_SIGNAL`): all or none ([`Error::NotFound`] if a handle is unknown,
    /// [`Error::Invalid`] if the slices differ in length, [`Error::NoMemory`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use drm_ctx::drm::syncobj::SyncobjTable;
    /// use drm_ctx::{mem::Global, Error};
    ///
    /// let t = SyncobjTable::new_in::<Global>();
    /// let (a, b) = (t.create(None).unwrap(), t.create(None).unwrap());
    /// t.timeline_signal(&[a, b, a], &[1, 5, 2]).unwrap();
    /// assert_eq!((t.query(a, false), t.query(b, false)), (Ok(2), Ok(5)));
    /// assert_eq!(t.timeline_signal(&[a, 9], &[3, 3]), Err(Error::NotFound));
    /// assert_eq!(t.query(a, true), Ok(2)); // nothing changed
    /// t.reset(&[a]).unwrap();
    /// assert!(t.fence(a).unwrap().is_none());
    /// t.signal(&[a, b]).unwrap();
    /// assert_eq!(t.fence(a).unwrap().unwrap().status(), Some(Ok(())));
    /// ```
    pub fn timeline_signal(&self, handles: &[u32], points: &[u64]) -> Result {
        if points.len() != handles.len() {
            return Err(Error::Invalid);
        }
        let mut links = MemVec::new(self.mem);
        links.try_reserve(handles.len())?;
        for _ in handles {
            links.try_push(self.alloc_point()?)?;
        }
        self.signal_points(handles, points, links)
    }

    /// Puts the fence of point `src_point` of the syncobj `src` (0: its fence as a whole) into
    /// the syncobj `dst` (`SYNCOBJ_TRANSFER`): as its fence if `dst_point` is 0, otherwise as
    /// its point `dst_point` (a point holding the leaf fences still pending of a source
    /// timeline). `flags` as for [`find_fence`](Self::find_fence). [`Error::NotFound`] for an
    /// unknown handle, [`Error::Invalid`] for a source point without a fence,
    /// [`Error::NoMemory`].
    pub fn transfer(
        &self,
        src: u32,
        src_point: u64,
        dst: u32,
        dst_point: u64,
        flags: u32,
    ) -> Result {
        if !self.contains(dst) {
            return Err(Error::NotFound);
        }
        let fence = self.find_fence(src, src_point, flags)?;
        if dst_point == 0 {
            self.replace(dst, Some(fence))
        } else {
            let contained = chain::flatten(fence, self.mem)?;
            let link = self.alloc_point()?;
            self.add_contained(dst, None, link, contained, dst_point)
        }
    }

    /// Runs `change` on the syncobj of each of `handles`, in order, under the table's lock, all
    /// or none ([`Error::NotFound`] if a handle is unknown, before anything changes), then
    /// wakes their waiters.
    fn change_all(&self, handles: &[u32], mut change: impl FnMut(usize, &SyncobjCell)) -> Result {
        let mut cells: MemVec<ARef<SyncobjCell>> = MemVec::new(self.mem);
        cells.try_reserve(handles.len())?;
        {
            let o = self.lock();
            if handles.iter().any(|h| o.idr.get(*h).is_none()) {
                return Err(Error::NotFound);
            }
            for (i, h) in handles.iter().enumerate() {
                if let Some(s) = o.idr.get(*h) {
                    change(i, s);
                    // Room was made for every handle: this cannot fail.
                    let _ = cells.push_within_capacity(s.clone());
                }
            }
        }
        for s in cells.iter() {
            s.waiters.wake_all();
        }
        Ok(())
    }

    /// Replaces the fences of several syncobjs, all or none ([`Error::NotFound`] if a handle is
    /// unknown).
    fn replace_all(&self, handles: &[u32], fence: Option<FenceRef>) -> Result {
        // The fences replaced are dropped once the table is unlocked (a timeline's chain may be
        // long, and a driver's fence may do anything when it goes).
        let mut old: MemVec<Option<FenceRef>> = MemVec::new(self.mem);
        old.try_reserve(handles.len())?;
        self.change_all(handles, |_, s| {
            // Room was made for every handle: this cannot fail.
            let _ = old.push_within_capacity(core::mem::replace(&mut *s.slot(), fence.clone()));
        })
    }

    /// Sets a chain link aside for [`add_point`](Self::add_point) (`dma_fence_chain_alloc`),
    /// in the table's memory.
    pub fn alloc_point(&self) -> Result<ChainPoint> {
        ChainPoint::with_mem(self.mem)
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
    /// use drm_ctx::drm::syncobj::{FenceRef, SyncobjTable};
    /// use drm_ctx::mem::Global;
    ///
    /// let t = SyncobjTable::new_in::<Global>();
    /// let h = t.create(None).unwrap();
    /// let link = t.alloc_point().unwrap(); // while preparing: may fail
    /// t.add_point(h, link, FenceRef::signalled(), 3).unwrap(); // at commit
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
    /// use drm_ctx::drm::syncobj::{FenceRef, SyncobjTable};
    /// use drm_ctx::{mem::Global, Error};
    ///
    /// let t = SyncobjTable::new_in::<Global>();
    /// let key = t.key(t.create(None).unwrap()).unwrap(); // while preparing
    /// let link = t.alloc_point().unwrap();
    /// t.destroy(key.handle()).unwrap();
    /// let again = t.create(None).unwrap(); // the same handle, another syncobj
    /// assert_eq!(again, key.handle());
    /// let r = t.add_point_keyed(key, link, FenceRef::signalled(), 1); // at commit
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

    /// Adds a signalled point to each syncobj of `handles` (`TIMELINE_SIGNAL`), in the links
    /// `links` (one per handle): all or none ([`Error::NotFound`] if a handle is unknown,
    /// [`Error::Invalid`] if the counts differ).
    fn signal_points(&self, handles: &[u32], points: &[u64], links: MemVec<ChainPoint>) -> Result {
        if links.len() != handles.len() || points.len() != handles.len() {
            return Err(Error::Invalid);
        }
        let mut prevs: MemVec<Option<FenceRef>> = MemVec::new(self.mem);
        prevs.try_reserve(handles.len())?;
        // One link per handle, taken in the order `change_all` visits them.
        let mut links = links.into_iter();
        self.change_all(handles, |i, s| {
            let Some(link) = links.next() else { return };
            let mut slot = s.slot();
            let prev = slot.take();
            *slot = Some(link.init(
                prev.clone(),
                Contained::One(FenceRef::signalled()),
                points[i],
            ));
            drop(slot);
            // Room was made for every handle: this cannot fail.
            let _ = prevs.push_within_capacity(prev);
        })?;
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
    /// to be attached instead (with feature `std`; without it the core cannot sleep and the
    /// wait times out at once), then fails with `ETIME`.
    pub fn find_fence(&self, handle: u32, point: u64, flags: u32) -> Result<FenceRef> {
        let s = self.lookup(handle).ok_or(Error::NotFound)?;
        find_fence_in(&s, point, flags)
    }

    /// The point `SYNCOBJ_QUERY` reports for a syncobj: 0 unless it holds a timeline; the
    /// newest point with `last_submitted`, otherwise the newest signalled one.
    /// [`Error::NotFound`] for an unknown handle.
    pub fn query(&self, handle: u32, last_submitted: bool) -> Result<u64> {
        self.lookup(handle)
            .map(|s| s.query(last_submitted))
            .ok_or(Error::NotFound)
    }

    /// Number of syncobjs.
    pub fn len(&self) -> usize {
        self.lock().idr.len()
    }

    /// Whether the table has no syncobj.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`SyncobjTable::find_fence`] on a syncobj already looked up.
pub(crate) fn find_fence_in(s: &SyncobjCell, point: u64, flags: u32) -> Result<FenceRef> {
    if flags & !DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT != 0 {
        return Err(Error::Invalid);
    }
    if let Some(f) = s.fence_at(point) {
        return Ok(f);
    }
    if flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT == 0 {
        return Err(Error::Invalid);
    }
    #[cfg(feature = "std")]
    return crate::host::syncobj::wait_for_submit(s, point);
    #[cfg(not(feature = "std"))]
    Err(Error::Other(ETIME))
}
