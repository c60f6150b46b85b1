// SPDX-License-Identifier: GPL-2.0 OR MIT

// The parent-device contexts are sealed too.
use drm_ctx::device::DeviceContext;

struct AlwaysBound;

impl DeviceContext for AlwaysBound {}

fn main() {}
