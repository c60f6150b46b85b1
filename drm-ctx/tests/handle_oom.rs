// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Defect 4 of issue 20: the per-file handle tables fail with `ENOMEM` when memory runs out,
//! instead of aborting the process in an infallible allocation.
//!
//! The process's allocator fails every allocation of the current thread while `FAIL` is set.

mod common;

use common::*;
use drm_ctx::drm::{gem, OpenOptions};
use drm_ctx::host::Client;
use drm_ctx::Error;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::Ordering::SeqCst;

struct Failing;

std::thread_local! {
    static FAIL: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: Forwards to `System`, or fails (null) while the thread asked for failures.
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if FAIL.try_with(Cell::get).unwrap_or(false) {
            return std::ptr::null_mut();
        }
        // SAFETY: The caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Failing = Failing;

fn failing<R>(f: impl FnOnce() -> R) -> R {
    FAIL.with(|c| c.set(true));
    let r = f();
    FAIL.with(|c| c.set(false));
    r
}

#[test]
fn handle_tables_report_out_of_memory() {
    let (_p, reg, counters) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let bo = gem::Object::<Bo>::new(reg.device(), 4096, counters.clone()).unwrap();
    let table = client.file().syncobjs();

    assert_eq!(failing(|| table.create(None)), Err(Error::NoMemory));
    assert!(table.is_empty());
    assert_eq!(
        failing(|| bo.create_handle(client.file())),
        Err(Error::NoMemory)
    );
    // Nothing half-done: no handle, the driver's open was undone.
    assert!(client.file().handles().is_empty());
    assert_eq!(bo.handle_count(), 0);
    assert_eq!(
        counters.handle_opens.load(SeqCst),
        counters.handle_closes.load(SeqCst)
    );
    // With memory back, both work.
    assert_eq!(table.create(None), Ok(1));
    assert_eq!(bo.create_handle(client.file()), Ok(1));
}
