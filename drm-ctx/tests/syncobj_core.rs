// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The syncobj core without `std`'s help: a file's syncobjs, chain links and handle tables come
//! from its device's allocator (and fail with `ENOMEM` when it has nothing left), and a fence is
//! any object that counts its own references.

use drm_ctx::doc_driver::{Bo, DocDriver};
use drm_ctx::drm::syncobj::{for_each_unwrapped, ChainLink, Fence, FenceRef, SyncobjTable, Waiter};
use drm_ctx::drm::{self, gem, OpenOptions};
use drm_ctx::host::Client;
use drm_ctx::{mem::Allocator, Error, Result};
use std::alloc::Layout;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::task::Waker;

/// Blocks each test's allocator has handed out and not got back, and whether it fails.
static LIVE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static FAIL: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// The host heap, counted per test (`N`), failing while `FAIL[N]` is set.
struct Counting<const N: usize>;

// SAFETY: Blocks come from the global allocator with the caller's layout and go back to it.
unsafe impl<const N: usize> Allocator for Counting<N> {
    fn alloc(layout: Layout) -> Result<NonNull<u8>> {
        if FAIL[N].load(SeqCst) {
            return Err(Error::NoMemory);
        }
        // SAFETY: The trait promises a non-zero size.
        let p = NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or(Error::NoMemory)?;
        LIVE[N].fetch_add(1, SeqCst);
        Ok(p)
    }

    unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
        LIVE[N].fetch_sub(1, SeqCst);
        // SAFETY: `ptr` came from `alloc` with `layout`.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

#[test]
fn a_files_syncobjs_and_handles_use_its_devices_allocator() {
    let parent = drm_ctx::device::Device::new("gpu").unwrap();
    let unreg = drm::UnregisteredDevice::<DocDriver>::new_in::<Counting<0>>(&parent, 0).unwrap();
    let reg = drm::Registration::new(unreg, 0).unwrap();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let file = client.file();
    let bo = gem::Object::<Bo>::new(reg.device(), 4096, ()).unwrap();
    let base = LIVE[0].load(SeqCst);

    // A syncobj, its handle table and a timeline point all come from the device's allocator.
    let h = file.create_syncobj(None).unwrap();
    let after_create = LIVE[0].load(SeqCst);
    assert!(after_create > base);
    let link = ChainLink::new_in(file).unwrap();
    assert_eq!(LIVE[0].load(SeqCst), after_create + 1);
    file.syncobj(h)
        .unwrap()
        .add_point(link, &FenceRef::signalled(), 1);
    assert_eq!(file.syncobjs().query(h, false), Ok(1));

    // With nothing left, every step that needs memory fails with ENOMEM and changes nothing.
    FAIL[0].store(true, SeqCst);
    assert_eq!(file.create_syncobj(None).err(), Some(Error::NoMemory));
    assert_eq!(ChainLink::new_in(file).err(), Some(Error::NoMemory));
    assert_eq!(
        file.syncobjs().timeline_signal(&[h], &[2]),
        Err(Error::NoMemory)
    );
    assert_eq!(file.syncobjs().query(h, true), Ok(1));
    assert_eq!(bo.create_handle(file), Err(Error::NoMemory));
    assert_eq!(bo.handle_count(), 0);
    // What needs no memory still works: a binary signal replaces the timeline.
    file.syncobj(h)
        .unwrap()
        .replace_fence(Some(&FenceRef::signalled()));
    FAIL[0].store(false, SeqCst);
    assert_eq!(bo.create_handle(file), Ok(1));
    file.syncobjs().timeline_signal(&[h, h], &[3, 4]).unwrap();
    assert_eq!(file.syncobjs().query(h, false), Ok(4));

    // Everything goes back: the file's tables with the file, the device with its last owner.
    drop(client);
    drop(bo);
    drop(reg);
    assert_eq!(LIVE[0].load(SeqCst), 0);
}

/// A fence in a `Box` that counts its own references and wakers (no `Arc`).
struct Counted {
    root: NonNull<Counted>,
    refs: AtomicUsize,
    signalled: AtomicBool,
    wakers: Mutex<Vec<(usize, Waker)>>,
    next: AtomicUsize,
    freed: &'static AtomicBool,
}

// SAFETY: `root` is only used to free the fence once.
unsafe impl Send for Counted {}
// SAFETY: As above.
unsafe impl Sync for Counted {}

impl Counted {
    /// A pending fence and the one reference it starts with.
    fn make(freed: &'static AtomicBool) -> FenceRef {
        let raw = Box::into_raw(Box::new(Counted {
            root: NonNull::dangling(),
            refs: AtomicUsize::new(1),
            signalled: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            freed,
        }));
        // SAFETY: `Box::into_raw` is never null.
        let root = unsafe { NonNull::new_unchecked(raw) };
        // SAFETY: We own the new box alone.
        unsafe { (*raw).root = root };
        // SAFETY: A live fence with one reference, handed over.
        unsafe { FenceRef::from_raw(root) }
    }

    fn of(f: &FenceRef) -> &Counted {
        f.as_any().downcast_ref::<Counted>().unwrap()
    }

    fn signal(&self) {
        self.signalled.store(true, SeqCst);
        let woken: Vec<_> = self.wakers.lock().unwrap().drain(..).collect();
        for (_, w) in woken {
            w.wake();
        }
    }

    fn queued(&self) -> usize {
        self.wakers.lock().unwrap().len()
    }
}

// SAFETY: `refs` counts the references; the box is freed with the last, through `root`.
// Tokens are the numbers of queued wakers, each removed once.
unsafe impl Fence for Counted {
    fn get(&self) {
        self.refs.fetch_add(1, SeqCst);
    }

    unsafe fn put(this: NonNull<Self>) {
        let root = {
            // SAFETY: The caller owns a reference.
            let me = unsafe { this.as_ref() };
            if me.refs.fetch_sub(1, SeqCst) != 1 {
                return;
            }
            me.freed.store(true, SeqCst);
            me.root
        };
        // SAFETY: The last reference is gone; the box was made at `root`.
        drop(unsafe { Box::from_raw(root.as_ptr()) });
    }

    fn status(&self) -> Option<core::result::Result<(), i32>> {
        self.signalled.load(SeqCst).then_some(Ok(()))
    }

    fn add_waker(&self, waker: &Waker) -> Option<Waiter> {
        let mut w = self.wakers.lock().unwrap();
        if self.signalled.load(SeqCst) {
            waker.wake_by_ref();
            return None;
        }
        let token = self.next.fetch_add(1, SeqCst);
        w.push((token, waker.clone()));
        // SAFETY: `remove_waker` takes back any token queued here.
        Some(unsafe { Waiter::new(self, std::ptr::without_provenance_mut(token)) })
    }

    unsafe fn remove_waker(&self, token: *mut ()) {
        self.wakers
            .lock()
            .unwrap()
            .retain(|(t, _)| *t != token.addr());
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[test]
fn fences_count_their_own_references_through_syncobjs_and_chains() {
    static FREED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
    let t = SyncobjTable::new_in::<Counting<1>>();
    let (a, b) = (Counted::make(&FREED[0]), Counted::make(&FREED[1]));
    let h = t.create(None).unwrap();
    t.add_point(h, t.alloc_point().unwrap(), a.clone(), 1)
        .unwrap();
    t.add_point(h, t.alloc_point().unwrap(), b.clone(), 2)
        .unwrap();
    assert_eq!(Counted::of(&a).refs.load(SeqCst), 2);

    // The leaves of the timeline are the fences themselves.
    let mut leaves = Vec::new();
    for_each_unwrapped(&t.fence(h).unwrap().unwrap(), |f| leaves.push(f.clone()));
    assert_eq!(leaves.len(), 2);
    assert!(leaves.iter().any(|f| FenceRef::ptr_eq(f, &a)));
    assert!(leaves.iter().any(|f| FenceRef::ptr_eq(f, &b)));
    drop(leaves);

    // A waker queued on the chain waits on a pending leaf, and goes when the waiter drops.
    let head = t.find_fence(h, 2, 0).unwrap();
    let w = head.add_waker(Waker::noop()).unwrap();
    let leaf = Counted::of(w.fence());
    assert_eq!(leaf.queued(), 1);
    drop(w);
    assert_eq!(Counted::of(&a).queued() + Counted::of(&b).queued(), 0);

    // Point 1 signals; the chain walk unlinks it and gives its fence back.
    Counted::of(&a).signal();
    assert!(t.find_fence(h, 1, 0).unwrap().status().is_some());
    assert_eq!(t.query(h, false), Ok(1));
    let w = head.add_waker(Waker::noop()).unwrap();
    assert!(FenceRef::ptr_eq(w.fence(), &b));
    drop(w);
    drop(a);
    assert!(FREED[0].load(SeqCst));
    Counted::of(&b).signal();
    assert_eq!(head.status(), Some(Ok(())));
    assert!(head.add_waker(Waker::noop()).is_none());

    // The table, its chain and the last references go: the fence is freed, and so is every
    // block of the table's allocator.
    drop(head);
    drop(t);
    assert!(!FREED[1].load(SeqCst));
    drop(b);
    assert!(FREED[1].load(SeqCst));
    assert_eq!(LIVE[1].load(SeqCst), 0);
}
