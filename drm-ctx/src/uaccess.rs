// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Access to user memory.
//!
//! An ioctl argument is a userspace address. The DRM core copies the argument structure in
//! before calling the handler and copies it back out afterwards; handlers follow further
//! pointers inside the structure (arrays of bind operations, query output buffers) themselves.
//! Every such access goes through [`UserMemory`], the seam between the DRM core and the address
//! space of the calling process: `copy_from_user`/`copy_to_user` in the kernel, a simulated
//! address space ([`host::UserSpace`]) on the host. A bad address is
//! [`Error::Fault`](crate::Error::Fault), never a crash.
//!
#![cfg_attr(feature = "std", doc = "[`host::UserSpace`]: crate::host::UserSpace")]
#![cfg_attr(not(feature = "std"), doc = "[`host::UserSpace`]: crate#features")]

use crate::Result;

/// The address space of a userspace process, as the DRM core sees it.
pub trait UserMemory: Send + Sync {
    /// Copies `buf.len()` bytes from user address `addr`; [`Error::Fault`](crate::Error::Fault)
    /// if any byte is not readable. Zero-length reads always succeed.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result;

    /// Copies `data` to user address `addr`; [`Error::Fault`](crate::Error::Fault) if any byte
    /// is not writable (nothing is written then). Zero-length writes always succeed.
    fn write(&self, addr: u64, data: &[u8]) -> Result;
}
