// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A job's cost and its room for dependencies are two numbers of their own types: handing them
//! to `PreparedJob::new` the wrong way round does not build.

use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{Cost, MaxDeps, PreparedJob, QueueConfig};

fn main() {
    let alloc = HostAlloc::new();
    let config = QueueConfig::new(8);
    let _ = PreparedJob::<HostFence, HostAlloc, u32>::new(&alloc, &config, MaxDeps(4), Cost(2), 0);
}
