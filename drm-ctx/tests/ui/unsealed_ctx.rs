// SPDX-License-Identifier: GPL-2.0 OR MIT

// The DRM contexts are sealed: a driver cannot invent one.
use drm_ctx::drm::DeviceCtx;

struct Initialized;

impl DeviceCtx for Initialized {}

fn main() {}
