// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The executor seam: the queue has no threads of its own.
//!
//! All of a queue's work happens in [`Queue::run`](crate::Queue::run), which the driver calls
//! from a work item it owns (kernel: a `work_struct` on an ordered workqueue; host:
//! [`TestExecutor`] or any thread). The queue asks for that work item to be scheduled in two
//! ways: by waking the executor's [`Waker`] (fences do this from their callbacks, on any thread,
//! and so does a commit), and by asking to be run again at a deadline for timeouts.
//!
#![cfg_attr(feature = "std", doc = "[`TestExecutor`]: crate::host::TestExecutor")]
#![cfg_attr(not(feature = "std"), doc = "[`TestExecutor`]: crate#features")]

use core::task::Waker;

use crate::time::Instant;

/// Schedules the work item that calls [`Queue::run`](crate::Queue::run).
pub trait Executor {
    /// A waker that schedules the work item. Waking it must not allocate or block, and must be
    /// safe from any thread and from interrupt-like contexts where fences signal.
    fn waker(&self) -> &Waker;

    /// Asks for the work item to run again no later than shortly after `deadline`.
    ///
    /// Calls may be repeated; an earlier request must not be lost by a later one.
    fn wake_at(&self, deadline: Instant);
}
