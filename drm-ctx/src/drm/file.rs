// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM files: one per `open()` of a device node.
//!
//! Each open of `/dev/dri/cardN` (primary node) or `/dev/dri/renderDN` (render node) creates a
//! file with the driver's per-file data ([`DriverFile`]), created by the driver's open callback
//! and handed its close callback when the file is closed. The file owns the GEM handle table of
//! the client: handles are small integers, starting at 1, that name GEM objects for this file
//! only. Closing the file closes every handle it still has.
//!
//! Permission checks of ioctls use what the file was opened as ([`OpenOptions`]): render-node
//! files may only use ioctls flagged [`RENDER_ALLOW`](super::ioctl::RENDER_ALLOW).

use super::{Device, Driver};
use crate::Result;

/// The driver's per-file data.
pub trait DriverFile: Sized + Send + Sync + 'static {
    /// The driver this file data belongs to.
    type Driver: Driver<File = Self>;

    /// Creates the per-file data when a client opens the device (fails the open on error).
    fn open(device: &Device<Self::Driver>) -> Result<Self>;

    /// Called when the file is closed, after its GEM handles are closed and before the data is
    /// dropped.
    fn close(&self, _device: &Device<Self::Driver>) {}
}

/// The kind of device node a file was opened through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// The primary node (`/dev/dri/cardN`).
    Primary,
    /// The render node (`/dev/dri/renderDN`); needs [`Driver::FEAT_RENDER`].
    Render,
}

/// How a client opens a device node, and the rights it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// The node opened.
    pub node: Node,
    /// Whether the client is authenticated (for `AUTH` ioctls on the primary node).
    pub authenticated: bool,
    /// Whether the client is the current DRM master (for `MASTER` ioctls).
    pub master: bool,
    /// Whether the client has `CAP_SYS_ADMIN` (for `ROOT_ONLY` ioctls).
    pub sys_admin: bool,
}

impl OpenOptions {
    /// A render-node client (what Mesa opens).
    pub const fn render() -> Self {
        OpenOptions {
            node: Node::Render,
            authenticated: false,
            master: false,
            sys_admin: false,
        }
    }

    /// An unauthenticated primary-node client without privileges.
    pub const fn primary() -> Self {
        OpenOptions {
            node: Node::Primary,
            authenticated: false,
            master: false,
            sys_admin: false,
        }
    }
}

#[cfg(not(gpukit_kernel))]
mod core_impl;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::File;
#[cfg(gpukit_kernel)]
pub use crate::kernel::file::File;

/// The fence type [`File::create_syncobj`] takes: in the kernel one reference to a
/// `struct dma_fence`, in the host core a [`FenceRef`](crate::host::syncobj::FenceRef).
#[cfg(gpukit_kernel)]
pub type SyncobjFence = crate::kernel::DmaFence;
/// The fence type [`File::create_syncobj`] takes: in the kernel one reference to a
/// `struct dma_fence`, in the crate's own core a [`FenceRef`](crate::drm::syncobj::FenceRef).
#[cfg(not(gpukit_kernel))]
pub type SyncobjFence = crate::drm::syncobj::FenceRef;
