// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Timeline points: a syncobj's chain of `(point, fence)` links, the host's `dma_fence_chain`.
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

use core::any::Any;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use core::task::Waker;
use std::sync::{Arc, Mutex, MutexGuard};
use std::vec::Vec;

use super::{signalled, FenceRef, Registration, SyncFence};
use crate::{Error, Result};

/// Live chain links (allocated and not yet freed), for leak checks.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Fence contexts handed out so far (a new timeline, or an out-of-order point, takes one).
static CONTEXTS: AtomicU64 = AtomicU64::new(1);

/// Number of chain links alive in the process (allocated with [`ChainPoint::new`] and not yet
/// freed), for tests that check that waits and garbage collection leave none behind.
pub fn live_chain_links() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// What a link waits for.
pub(super) enum Contained {
    /// One fence.
    One(FenceRef),
    /// Several fences, all of which must signal (a flattened chain, as a transfer installs it).
    Many(Vec<FenceRef>),
}

impl Contained {
    fn fences(&self) -> &[FenceRef] {
        match self {
            Contained::One(f) => core::slice::from_ref(f),
            Contained::Many(v) => v,
        }
    }

    fn done(&self) -> bool {
        self.fences().iter().all(|f| f.status().is_some())
    }
}

/// One link of a timeline: a point, its fence, and the link before it.
///
/// It is a [`SyncFence`] that has signalled once its point and every earlier one have; drivers
/// meet it as the fence a timeline syncobj holds ([`SyncobjTable::fence`]) or as the fence of
/// a point ([`SyncobjTable::find_fence`]).
///
/// [`SyncobjTable::fence`]: super::SyncobjTable::fence
/// [`SyncobjTable::find_fence`]: super::SyncobjTable::find_fence
pub struct ChainNode {
    seqno: u64,
    prev_seqno: u64,
    context: u64,
    contained: Contained,
    prev: Mutex<Option<FenceRef>>,
    /// Set once the link has been seen signalled (signalling is final).
    signalled: AtomicBool,
}

impl ChainNode {
    /// The point of this link.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The point of the link before it in the same context (0 if it starts a context).
    pub fn prev_seqno(&self) -> u64 {
        self.prev_seqno
    }

    fn prev(&self) -> MutexGuard<'_, Option<FenceRef>> {
        self.prev.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ChainNode {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        // Unlink the earlier links this one alone keeps alive one by one, so that dropping a
        // long chain does not recurse once per link.
        let mut prev = self
            .prev
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        while let Some(p) = prev {
            if Arc::strong_count(&p) > 1 {
                break;
            }
            let Some(c) = as_chain(&p) else { break };
            prev = c.prev().take();
        }
    }
}

impl SyncFence for ChainNode {
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

    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        if self.status().is_some() {
            waker.wake_by_ref();
            return Registration::done();
        }
        // Queue the waker on every fence of the chain still pending: the last of them to
        // signal wakes it with the whole chain signalled.
        let mut regs: Vec<Registration> = Vec::new();
        let mut ok = true;
        for_each_contained(self, |f| {
            if ok && f.status().is_none() {
                if regs.try_reserve(1).is_err() {
                    ok = false;
                } else {
                    regs.push(f.wake_on_signal(waker));
                }
            }
        });
        if !ok {
            // Out of memory: wake the waiter now; it looks again and queues itself again.
            drop(regs);
            waker.wake_by_ref();
            return Registration::done();
        }
        Registration::many(regs)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The link `f` is, if it is one.
pub(super) fn as_chain(f: &FenceRef) -> Option<&ChainNode> {
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
            if slot.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, &prev)) {
                core::mem::replace(&mut *slot, replacement)
            } else {
                // Someone else unlinked it meanwhile: look again.
                replacement
            }
        };
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
/// its own fences depends on these instead of the link (what `drm_sched_job_add_syncobj_dependency`
/// does with an unwrapped chain).
///
/// # Examples
///
/// ```
/// use drm_ctx::host::syncobj::{for_each_unwrapped, FenceRef, SignalledFence, SyncobjTable};
/// use std::sync::Arc;
///
/// let t = SyncobjTable::default();
/// let h = t.create(None).unwrap();
/// let mine: FenceRef = Arc::new(SignalledFence);
/// t.add_point(h, t.alloc_point().unwrap(), mine.clone(), 1).unwrap();
/// let mut parts = Vec::new();
/// for_each_unwrapped(&t.find_fence(h, 0, 0).unwrap(), |f| parts.push(f.clone()));
/// assert_eq!(parts.len(), 1);
/// assert!(Arc::ptr_eq(&parts[0], &mine));
/// ```
pub fn for_each_unwrapped(fence: &FenceRef, mut f: impl FnMut(&FenceRef)) {
    match as_chain(fence) {
        Some(c) => for_each_contained(c, f),
        None => f(fence),
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
pub(super) fn find_seqno(head: FenceRef, seqno: u64) -> Result<Option<FenceRef>> {
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
pub(super) fn query(head: Option<&FenceRef>, last_submitted: bool) -> u64 {
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
/// becomes the contained fences of its chain still pending (a signalled fence if none is).
/// [`Error::NoMemory`] if they cannot be collected.
pub(super) fn flatten(fence: FenceRef) -> Result<Contained> {
    let Some(c) = as_chain(&fence) else {
        return Ok(Contained::One(fence));
    };
    let mut pending: Vec<FenceRef> = Vec::new();
    let mut res = Ok(());
    for_each_contained(c, |f| {
        if res.is_ok() && f.status().is_none() {
            match pending.try_reserve(1) {
                Ok(()) => pending.push(f.clone()),
                Err(_) => res = Err(Error::NoMemory),
            }
        }
    });
    res?;
    Ok(match pending.len() {
        0 => Contained::One(signalled()),
        1 => Contained::One(pending.swap_remove(0)),
        _ => Contained::Many(pending),
    })
}

/// A chain link set aside for a point (`dma_fence_chain_alloc`): allocating it is the part of
/// adding a point that can fail, so a driver allocates its links while it prepares a job and
/// adds the points ([`SyncobjTable::add_point`]) in its commit step, where nothing fails.
///
/// [`SyncobjTable::add_point`]: super::SyncobjTable::add_point
pub struct ChainPoint(Arc<ChainNode>);

impl core::fmt::Debug for ChainPoint {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.write_str("ChainPoint")
    }
}

impl ChainPoint {
    /// Sets a link aside.
    ///
    /// The link is an `Arc`, and Rust's `Arc` has no fallible constructor: if the process is
    /// out of memory here it aborts (the one allocation of the timeline code that does).
    pub fn new() -> Result<Self> {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Ok(ChainPoint(Arc::new(ChainNode {
            seqno: 0,
            prev_seqno: 0,
            context: 0,
            contained: Contained::One(signalled()),
            prev: Mutex::new(None),
            signalled: AtomicBool::new(false),
        })))
    }

    /// Makes this link the point `seqno` after `prev` holding `contained`
    /// (`dma_fence_chain_init`), and returns it as a fence.
    pub(super) fn init(self, prev: Option<FenceRef>, contained: Contained, seqno: u64) -> FenceRef {
        let mut arc = self.0;
        let prev_chain = prev
            .as_ref()
            .and_then(as_chain)
            .map(|c| (c.context, c.seqno));
        // A `ChainPoint` is never cloned: its link has no other owner yet.
        if let Some(n) = Arc::get_mut(&mut arc) {
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
            *n.prev.get_mut().unwrap_or_else(|e| e.into_inner()) = prev;
        }
        arc
    }
}
