// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An allocation token cannot be made outside the crate's job preparation.

use core::marker::PhantomData;

use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{AllocToken, Allocator};

fn main() {
    let token = AllocToken { _scope: PhantomData, _not_send: PhantomData };
    let _fence: HostFence = HostAlloc::new().try_new_fence(&token).unwrap();
}
