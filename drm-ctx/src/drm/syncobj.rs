// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Syncobjs as a driver's submit ioctl uses them, the same on the host core and in the kernel.
//!
//! # Syncobjs
//!
//! A DRM synchronisation object (*syncobj*) is a container for a fence, named by a per-file
//! handle. Userspace creates, waits on, signals and destroys syncobjs through the core ioctls
//! (`DRM_IOCTL_SYNCOBJ_*`); a driver's submit ioctl reads the fences of the syncobjs its job
//! waits for, and puts the job's done fence into the syncobjs the job signals.
//!
//! - A **binary** syncobj holds at most one fence. Signalling it means replacing that fence
//!   ([`Syncobj::replace_fence`]); waiting on it means waiting for the fence it holds at the
//!   time (point 0 of [`File::syncobj_fence`](super::File::syncobj_fence)).
//! - A **timeline** syncobj holds a chain of points, numbered by increasing 64-bit values.
//!   Each point is a **chain node** (the kernel's `struct dma_fence_chain`): a fence that has
//!   signalled once the point's own fence and every earlier point's have. The syncobj holds
//!   the newest node; [`Syncobj::add_point`] puts a new one in front. Asking for the fence of
//!   point `n` gives the earliest node at or above `n` (a signalled fence if that point has
//!   signalled already, `EINVAL` if no such point was submitted yet). Nodes whose own fence
//!   has signalled are unlinked as the chain is walked, so a timeline does not grow forever.
//!
//! A chain node and a fence array are *container* fences: [`for_each_unwrapped`] gives the
//! leaf fences they are made of, so that a driver can depend on its own job fences directly
//! (what panthor does through `drm_sched_job_add_syncobj_dependency`).
//!
//! # Why the chain nodes are allocated before the commit
//!
//! Once a job is committed (pushed to its queue), its done fence will signal, and anything on
//! the path to that signal must not wait for memory: memory reclaim may itself wait on GPU
//! fences, so an allocation there can deadlock (the kernel's fence-signalling rules, which
//! lockdep checks with `dma_fence_begin_signalling`). Installing a job's done fence in its
//! syncobjs happens after the commit, and must not fail either, since the job can no longer
//! be taken back. So a submit ioctl does its syncobj work in two steps, as panthor's
//! `panthor_submit_ctx` does:
//!
//! 1. **Prepare** (fallible, may allocate): look every syncobj up ([`File::syncobj`], a
//!    counted reference), read the fences to wait for ([`File::syncobj_fence`]), and allocate
//!    one [`ChainLink`] per timeline point to signal ([`ChainLink::new_in`]). Any error here fails
//!    the ioctl with nothing changed; dropping the links frees them.
//! 2. **Commit** (infallible, allocates nothing): [`Syncobj::replace_fence`] for a binary
//!    syncobj, [`Syncobj::add_point`] with the prepared link for a timeline point.
//!
//! A [`Syncobj`] keeps the syncobj it was looked up as, whatever happens to the handle
//! meanwhile: if userspace destroys the handle between the steps, the fence is still installed
//! (in a syncobj nobody can name any more), and if a new syncobj took the handle, it is not
//! touched.
//!
//! # Backends
//!
//! | this module | the crate's own core (`std` or not) | kernel |
//! |---|---|---|
//! | [`SyncobjFence`] | [`FenceRef`], a reference to a [`Fence`] | `DmaFence` (`struct dma_fence`) |
//! | [`File::syncobj`] | the file's [`SyncobjTable`] | `drm_syncobj_find` |
//! | [`File::syncobj_fence`] | [`SyncobjTable::find_fence`] | `drm_syncobj_find_fence` |
//! | [`Syncobj::replace_fence`] | the syncobj's fence replaced | `drm_syncobj_replace_fence` |
//! | `ChainLink::new_in(file)` | [`SyncobjTable::alloc_point`] (a [`ChainPoint`]) | `dma_fence_chain_alloc` (`ChainLink::new`) |
//! | [`Syncobj::add_point`] | a [`ChainNode`] in front | `drm_syncobj_add_point` |
//! | [`for_each_unwrapped`] | the chain walked | `dma_fence_unwrap_for_each` |
//!
//! The core's syncobjs, their chain nodes and the file's handle table take their memory from
//! the device's [`mem::Allocator`](crate::mem::Allocator); the host core (feature `std`) adds
//! the syncobj ioctls and the waits that sleep on top of them.
//!
//! Errors are the kernel's: [`Error::NotFound`](crate::Error::NotFound) (`ENOENT`) for a
//! handle that names no syncobj, [`Error::Invalid`](crate::Error::Invalid) (`EINVAL`) for a
//! point without a fence or unknown flags. `flags` of [`File::syncobj_fence`] is 0 or
//! [`DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT`]; only the latter waits (up to 5 s, for a fence to
//! be attached; without `std` nothing can sleep, and it fails with `ETIME` at once), so a submit
//! path passes 0. Every allocation here is fallible.
//!
//! # Examples
//!
//! A submit path on the host core; the same code compiles without `std`, and in the kernel
//! (where `SyncobjFence` is a `struct dma_fence`) with `ChainLink::new()` for
//! `ChainLink::new_in(file)`: the kernel allocates its chain nodes itself.
//!
//! ```
//! use drm_ctx::drm::{self, syncobj::{for_each_unwrapped, ChainLink, SyncobjFence}, OpenOptions};
//! use drm_ctx::{host::{syncobj::SignalledFence, Client}, Error, Result};
//! # use drm_ctx::doc_driver::{DocDriver, DocFile};
//! use std::sync::Arc;
//!
//! /// Waits on `wait`, signals `out` (binary) and point `point` of `timeline`.
//! fn submit(
//!     file: &drm::File<DocFile>,
//!     wait: u32,
//!     out: u32,
//!     timeline: u32,
//!     point: u64,
//!     done: &SyncobjFence,
//! ) -> Result<usize> {
//!     // Prepare: everything that may fail.
//!     let mut deps = 0;
//!     for_each_unwrapped(&file.syncobj_fence(wait, 0, 0)?, |_leaf| deps += 1);
//!     let out = file.syncobj(out)?;
//!     let timeline = file.syncobj(timeline)?;
//!     let link = ChainLink::new_in(file)?;
//!     // ... the job is committed here: from now on nothing fails or allocates.
//!     out.replace_fence(Some(done));
//!     timeline.add_point(link, done, point);
//!     Ok(deps)
//! }
//!
//! let parent = drm_ctx::device::Device::new("gpu")?;
//! let reg = drm::Registration::new(drm::UnregisteredDevice::<DocDriver>::new(&parent, 0)?, 0)?;
//! let client = Client::open(reg.device(), OpenOptions::render())?;
//! let file = client.file();
//! let done: SyncobjFence = Arc::new(SignalledFence).into();
//! let wait = file.create_syncobj(Some(&done))?;
//! let (out, timeline) = (file.create_syncobj(None)?, file.create_syncobj(None)?);
//! assert_eq!(submit(file, wait, out, timeline, 1, &done), Ok(1));
//! assert!(file.syncobj(out)?.fence().is_some());
//! assert!(file.syncobj_fence(timeline, 1, 0).is_ok());
//! assert_eq!(file.syncobj_fence(timeline, 2, 0).err(), Some(Error::Invalid)); // not submitted
//! assert_eq!(file.syncobj(99).err(), Some(Error::NotFound));
//! # Ok::<(), Error>(())
//! ```
//!
//! [`File::syncobj`]: super::File::syncobj
//! [`File::syncobj_fence`]: super::File::syncobj_fence

pub use super::file::SyncobjFence;

/// Flag of [`File::syncobj_fence`](super::File::syncobj_fence) (and of the wait ioctls): a
/// point without a fence yet is waited for (up to 5 s) instead of failing with `EINVAL`.
pub const DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT: u32 = 1 << 1;

#[cfg(not(gpukit_kernel))]
pub(crate) mod core_impl;
#[cfg(not(gpukit_kernel))]
pub use self::core_impl::{
    for_each_unwrapped, live_chain_links, ChainLink, ChainNode, ChainPoint, Fence, FenceRef,
    SignalledFence, Syncobj, SyncobjKey, SyncobjTable, Waiter, ETIME,
};
#[cfg(gpukit_kernel)]
pub use crate::kernel::syncobj::{for_each_unwrapped, ChainLink, Syncobj};
