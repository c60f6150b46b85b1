// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The signalling context stays on the thread that runs the queue.

use jobqueue::SignalCtx;

fn assert_send<T: Send>() {}

fn main() {
    assert_send::<SignalCtx<'static>>();
}
