// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Timeline points: a syncobj's chain of `(point, fence)` links, the core's `dma_fence_chain`.
//!
//! A timeline syncobj holds the newest link. Each link ([`ChainNode`]) holds the fence of its
//! point (the *contained* fence) and the link before it (`prev`), which may also be a plain fence
//! (what the syncobj held before its first point was added). A link is itself a fence: it has
//! signalled once its contained fence and those of every earlier link have.
//!
//! Walking the chain from a link removes the links whose contained fence has signalled (they
//! no longer tell anything a wait needs), so a timeline whose points keep signalling does not
//! grow. Links of one timeline share a *context*; a point added that is not above the newest
//! one starts a new context (it then carries the newest point's number), which is how queries
//! and point lookups tell an out-of-order timeline apart.
//!
//! A link is a block from the allocator it was set aside with ([`ChainPoint::new_in`]),
//! counting its own references.

use core::alloc::Layout;
use core::any::Any;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use core::task::Waker;

use super::fence::{Fence, FenceRef, Waiter};
use crate::{
    mem::{Allocator, MemOps},
    sync::{SpinGuard, SpinLock},
    vec::MemVec,
    Error, Result,
};

/// Live chain links (allocated and not yet freed), for leak checks.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Fence contexts handed out so far (a new timeline, or an out-of-order point, takes one).
static CONTEXTS: AtomicU64 = AtomicU64::new(1);

/// Number of chain links alive in the process (set aside with [`ChainPoint::new_in`] and not
/// yet freed), for tests that check that waits and garbage collection leave none behind.
pub fn live_chain_links() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// What a link waits for.
pub(crate) enum Contained {
    /// One fence.
    One(FenceRef),
    /// Several fences, all of which must signal (a flattened chain, as a transfer installs it).
    Many(MemVec<FenceRef>),
}

impl Contained {
    fn fences(&self) -> &[FenceRef] {
        match self {
            Contained::One(f) => core::slice::from_ref(f),
            Contained::Many(v) => v.as_slice(),
        }
    }

    fn done(&self) -> bool {
        self.fences().iter().all(|f| f.status().is_some())
    }
}

/// One link of a timeline: a point, its fence, and the link before it.
///
/// It is a [`Fence`] that has signalled once its point and every earlier one have; drivers
/// meet it as the fence a timeline syncobj holds or as the fence of a point.
///
/// # Invariants
///
/// - `root` is the block the link was allocated at, from `mem`, with the layout of `Self`;
///   `refs` counts the references to it, and it is dropped and freed with the last.
/// - `seqno`, `prev_seqno`, `context` and `contained` change only before the link is
///   published (while a [`ChainPoint`] owns it alone).
pub struct ChainNode {
    root: NonNull<ChainNode>,
    refs: AtomicUsize,
    mem: MemOps,
    seqno: u64,
    prev_seqno: u64,
    context: u64,
    contained: Contained,
    prev: SpinLock<Option<FenceRef>>,
    /// Set once the link has been seen signalled (signalling is final).
    signalled: AtomicBool,
}

// SAFETY: `root` only points to the link itself (used to free it once); the other fields are
// `Send + Sync`.
unsafe impl Send for ChainNode {}
// SAFETY: As for `Send`: shared use never writes through `root`.
unsafe impl Sync for ChainNode {}

impl ChainNode {
    /// The point of this link.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The point of the link before it in the same context (0 if it starts a context).
    pub fn prev_seqno(&self) -> u64 {
        self.prev_seqno
    }

    fn prev(&self) -> SpinGuard<'_, Option<FenceRef>> {
        self.prev.lock()
    }
}

impl Drop for ChainNode {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        // Unlink the earlier links this one alone keeps alive one by one, so that dropping a
        // long chain does not recurse once per link.
        let mut prev = self.prev.get_mut().take();
        while let Some(p) = prev {
            let Some(c) = as_chain(&p) else { break };
            if c.refs.load(Ordering::Acquire) > 1 {
                break;
            }
            prev = c.prev().take();
        }
    }
}

// SAFETY: `refs` counts the references (type invariant): the link is freed only when the last
// one is given back. A link never hands out tokens of its own: the waiters of `add_waker` are
// those of the fences it is made of.
unsafe impl Fence for ChainNode {
    fn get(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn put(this: NonNull<Self>) {
        let (root, mem) = {
            // SAFETY: The caller owns a reference, so the link is alive.
            let n = unsafe { this.as_ref() };
            if n.refs.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            (n.root, n.mem)
        };
        // Every other reference's use happened before this point.
        fence(Ordering::Acquire);
        // SAFETY: That was the last reference: nothing else reaches the link, which was
        // initialised at `root` (type invariant); it is dropped once, here.
        unsafe { core::ptr::drop_in_place(root.as_ptr()) };
        // SAFETY: The block came from `mem` with the layout of `Self` (type invariant).
        unsafe { (mem.free)(root.cast(), Layout::new::<Self>()) };
    }

    fn status(&self) -> Option<core::result::Result<(), i32>> {
        if self.signalled.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        if !self.contained.done() || walk(self).is_some() {
            return None;
        }
        self.signalled.store(true, Ordering::Release);
        Some(Ok(()))
    }

    fn add_waker(&self, waker: &Waker) -> Option<Waiter> {
        // Queue the waker on a fence of the chain still pending: when it signals, the waiter
        // looks again and queues itself on the next one, until the whole chain has.
        let mut queued = None;
        for_each_contained(self, |f| {
            if queued.is_none() && f.status().is_none() {
                queued = f.add_waker(waker);
            }
        });
        if queued.is_none() {
            // Everything has signalled, or the last pending fence just did: look again.
            waker.wake_by_ref();
        }
        queued
    }

    unsafe fn remove_waker(&self, _token: *mut ()) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The link `f` is, if it is one.
pub(crate) fn as_chain(f: &FenceRef) -> Option<&ChainNode> {
    f.as_any().downcast_ref::<ChainNode>()
}

/// Whether what `f` itself stands for (its contained fences if it is a link) has signalled.
fn own_done(f: &FenceRef) -> bool {
    match as_chain(f) {
        Some(c) => c.contained.done(),
        None => f.status().is_some(),
    }
}

/// The first link (or plain fence) before `node` whose own fence has not signalled, unlinking
/// the signalled ones in between; `None` if every earlier fence has signalled.
fn walk(node: &ChainNode) -> Option<FenceRef> {
    loop {
        let prev = node.prev().clone()?;
        if !own_done(&prev) {
            return Some(prev);
        }
        let replacement = as_chain(&prev).and_then(|c| c.prev().clone());
        let old = {
            let mut slot = node.prev();
            if slot
                .as_ref()
                .is_some_and(|cur| FenceRef::ptr_eq(cur, &prev))
            {
                core::mem::replace(&mut *slot, replacement)
            } else {
                // Someone else unlinked it meanwhile: look again.
                replacement
            }
        };
        // Dropped unlocked: it may be the last reference to a link.
        drop(old);
    }
}

/// Calls `f` on every contained fence of `head` and of the links and plain fences still before
/// it (collecting garbage on the way).
fn for_each_contained(head: &ChainNode, mut f: impl FnMut(&FenceRef)) {
    for c in head.contained.fences() {
        f(c);
    }
    let mut cur = walk(head);
    while let Some(n) = cur {
        match as_chain(&n) {
            Some(c) => {
                for x in c.contained.fences() {
                    f(x);
                }
                cur = walk(c);
            }
            None => {
                f(&n);
                cur = None;
            }
        }
    }
}

/// Calls `f` on each fence `fence` is made of (`dma_fence_unwrap_for_each`): for a link, the
/// contained fences of it and of every earlier link or plain fence still in its chain (links
/// whose fence has signalled are unlinked on the way, so mostly pending ones); any other fence
/// is its own single part.
///
/// A link has signalled once every fence visited has, so a driver whose jobs can only wait for
/// its own fences depends on these instead of the link (what
/// `drm_sched_job_add_syncobj_dependency` does with an unwrapped chain).
pub(super) fn for_each_unwrapped(fence: &FenceRef, f: impl FnMut(&FenceRef)) {
    match as_chain(fence) {
        Some(c) => for_each_contained(c, f),
        None => {
            let mut f = f;
            f(fence)
        }
    }
}

/// Walks the whole chain from `f` once, collecting garbage (what adding a point does to the
/// chain it extends).
pub(super) fn collect(f: &FenceRef) {
    if let Some(c) = as_chain(f) {
        for_each_contained(c, |_| ());
    }
}

/// The fence of point `seqno` of the chain `head` (`dma_fence_chain_find_seqno`): `head` itself
/// for point 0, the earliest link at or above `seqno` in `head`'s context otherwise, `None` if
/// that point has signalled already. [`Error::Invalid`] if `head` is not a link or the point is
/// above its newest one.
pub(crate) fn find_seqno(head: FenceRef, seqno: u64) -> Result<Option<FenceRef>> {
    if seqno == 0 {
        return Ok(Some(head));
    }
    let (context, top) = match as_chain(&head) {
        Some(c) => (c.context, c.seqno),
        None => return Err(Error::Invalid),
    };
    if top < seqno {
        return Err(Error::Invalid);
    }
    let mut cur = head;
    loop {
        let next = match as_chain(&cur) {
            Some(c) if c.context == context && c.prev_seqno >= seqno => walk(c),
            _ => return Ok(Some(cur)),
        };
        match next {
            Some(n) => cur = n,
            None => return Ok(None),
        }
    }
}

/// The point a query reports for a syncobj holding `head` (0 unless it is a link): the newest
/// point with `last_submitted`, otherwise the newest point known to have signalled.
pub(crate) fn query(head: Option<&FenceRef>, last_submitted: bool) -> u64 {
    let Some(head) = head else { return 0 };
    let Some(hc) = as_chain(head) else { return 0 };
    if last_submitted {
        return hc.seqno;
    }
    // The earliest link of the head's context still in the chain.
    let mut last = head.clone();
    let mut cur = walk(hc);
    while let Some(n) = cur {
        match as_chain(&n) {
            Some(c) if c.context == hc.context => {
                cur = walk(c);
                last = n;
            }
            _ => break,
        }
    }
    match as_chain(&last) {
        Some(c) if last.status().is_some() => c.seqno,
        Some(c) => c.prev_seqno,
        None => 0,
    }
}

/// The fences `fence` stands for, with no link among them (`dma_fence_unwrap_merge`): a link
/// becomes the contained fences of its chain still pending (a signalled fence if none is), in
/// memory from `mem`. [`Error::NoMemory`] if they cannot be collected.
pub(crate) fn flatten(fence: FenceRef, mem: MemOps) -> Result<Contained> {
    let Some(c) = as_chain(&fence) else {
        return Ok(Contained::One(fence));
    };
    let mut pending: MemVec<FenceRef> = MemVec::new(mem);
    let mut res = Ok(());
    for_each_contained(c, |f| {
        if res.is_ok() && f.status().is_none() {
            res = pending.try_push(f.clone());
        }
    });
    res?;
    Ok(match pending.len() {
        0 => Contained::One(FenceRef::signalled()),
        1 => match pending.pop() {
            Some(f) => Contained::One(f),
            None => Contained::One(FenceRef::signalled()),
        },
        _ => Contained::Many(pending),
    })
}

/// A chain link set aside for a point (`dma_fence_chain_alloc`): allocating it is the part of
/// adding a point that can fail, so a driver allocates its links while it prepares a job and
/// adds the points in its commit step, where nothing fails.
///
/// # Invariants
///
/// `0` is a link with one reference, owned by this value alone and not published yet.
pub struct ChainPoint(NonNull<ChainNode>);

// SAFETY: The point owns its link alone; a link is `Send`.
unsafe impl Send for ChainPoint {}
// SAFETY: Shared access to a `ChainPoint` gives nothing.
unsafe impl Sync for ChainPoint {}

impl core::fmt::Debug for ChainPoint {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.write_str("ChainPoint")
    }
}

impl ChainPoint {
    /// Sets a link aside in the host's global memory.
    #[cfg(feature = "std")]
    pub fn new() -> Result<Self> {
        Self::new_in::<crate::mem::Global>()
    }

    /// Sets a link aside in memory from `A`; [`Error::NoMemory`] if there is none.
    pub fn new_in<A: Allocator>() -> Result<Self> {
        Self::with_mem(MemOps::of::<A>())
    }

    /// Sets a link aside in memory from `mem`.
    pub(crate) fn with_mem(mem: MemOps) -> Result<Self> {
        let ptr = (mem.alloc)(Layout::new::<ChainNode>())?.cast::<ChainNode>();
        LIVE.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `ptr` is a fresh block with the size and alignment of a `ChainNode`.
        unsafe {
            ptr.as_ptr().write(ChainNode {
                root: ptr,
                refs: AtomicUsize::new(1),
                mem,
                seqno: 0,
                prev_seqno: 0,
                context: 0,
                contained: Contained::One(FenceRef::signalled()),
                prev: SpinLock::new(None),
                signalled: AtomicBool::new(false),
            })
        };
        // INVARIANT: The link is initialised with one reference, ours alone.
        Ok(ChainPoint(ptr))
    }

    /// Makes this link the point `seqno` after `prev` holding `contained`
    /// (`dma_fence_chain_init`), and returns it as a fence.
    pub(crate) fn init(self, prev: Option<FenceRef>, contained: Contained, seqno: u64) -> FenceRef {
        let prev_chain = prev
            .as_ref()
            .and_then(as_chain)
            .map(|c| (c.context, c.seqno));
        let ptr = self.0;
        core::mem::forget(self);
        // SAFETY: The link is ours alone and not published (type invariant): nothing else
        // reads or writes it while we set it up.
        let n = unsafe { &mut *ptr.as_ptr() };
        match prev_chain {
            Some((context, top)) if seqno > top => {
                n.context = context;
                n.prev_seqno = top;
                n.seqno = seqno;
            }
            Some((_, top)) => {
                n.context = CONTEXTS.fetch_add(1, Ordering::Relaxed);
                n.prev_seqno = 0;
                n.seqno = seqno.max(top);
            }
            None => {
                n.context = CONTEXTS.fetch_add(1, Ordering::Relaxed);
                n.prev_seqno = 0;
                n.seqno = seqno;
            }
        }
        n.contained = contained;
        *n.prev.get_mut() = prev;
        // SAFETY: The link is initialised and we hand over its one reference.
        unsafe { FenceRef::from_raw(ptr) }
    }
}

impl Drop for ChainPoint {
    fn drop(&mut self) {
        // SAFETY: We own the one reference of the link (type invariant), given back here.
        unsafe { ChainNode::put(self.0) }
    }
}
