// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `gpukit_sample`: a minimal DRM render driver written only against `drm-ctx` and `jobqueue`.
//!
//! The same file is built into the kernel (with `sample/kernel.rs`, on a faux device, talked to
//! through `/dev/dri/renderD128` by the userspace stage of `cargo xtask kernel-test`) and into a
//! host test (`tests/sample_driver.rs`, against the crate's own DRM core). What differs between
//! the two lives in the `env` module of each: the jobqueue fence, allocator and executor types,
//! and how a job's done fence becomes a syncobj's fence.
//!
//! The uAPI, numbered from `DRM_COMMAND_BASE` (all allowed on the render node):
//!
//! | ioctl | nr | argument | errors |
//! |---|---|---|---|
//! | `BO_CREATE` | `0x40` | `{ u64 size; u32 flags; u32 handle (out) }` | `EINVAL` size 0 or flags; `EOVERFLOW` size above 1 GiB |
//! | `BO_MMAP_OFFSET` | `0x41` | `{ u32 handle; u32 pad; u64 offset (out) }` | `EINVAL` pad; `ENOENT` unknown handle |
//! | `SUBMIT` | `0x42` | `{ u32 flags; u32 syncobj (out); u64 seqno (out) }` | `EINVAL` flags; `EBUSY` queue full |
//!
//! `SUBMIT` queues a job on the device's job queue (cost 1 of 8 credits) and returns a new
//! syncobj of the file holding the job's done fence, and the job's sequence number. The job's
//! "hardware" completes at once: its hardware fence is made, already signalled, when the job
//! is prepared, so running it allocates nothing.

use drm_ctx::{
    device::{self, Bound},
    drm::{self, gem, ioctl, Device, File},
    Error, Result,
};
use jobqueue::{
    Backend, Cost, FenceError, MaxDeps, PreparedJob, QueueConfig, RunJob, SignalCtx, TimedOutJob,
    TimeoutAction,
};

use crate::env;

/// Largest buffer object `BO_CREATE` makes.
pub(crate) const MAX_BO_SIZE: u64 = 1 << 30;

/// Argument of `BO_CREATE`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoCreate {
    /// Size in bytes (rounded up to pages).
    pub(crate) size: u64,
    /// Must be zero.
    pub(crate) flags: u32,
    /// Out: the new object's handle.
    pub(crate) handle: u32,
}
// SAFETY: `repr(C)`, integers only, no padding (16 bytes).
unsafe impl ioctl::IoctlArg for BoCreate {}

/// Argument of `BO_MMAP_OFFSET`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoMmapOffset {
    /// The object's handle.
    pub(crate) handle: u32,
    /// Must be zero.
    pub(crate) pad: u32,
    /// Out: the fake offset to pass to `mmap()`.
    pub(crate) offset: u64,
}
// SAFETY: `repr(C)`, integers only, no padding (16 bytes).
unsafe impl ioctl::IoctlArg for BoMmapOffset {}

/// Argument of `SUBMIT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Submit {
    /// Must be zero.
    pub(crate) flags: u32,
    /// Out: a syncobj holding the job's done fence.
    pub(crate) syncobj: u32,
    /// Out: the job's sequence number on the device's queue.
    pub(crate) seqno: u64,
}
// SAFETY: `repr(C)`, integers only, no padding (16 bytes).
unsafe impl ioctl::IoctlArg for Submit {}

/// `DRM_IOCTL_SAMPLE_BO_CREATE`.
pub(crate) const BO_CREATE: u32 = ioctl::IOWR::<BoCreate>(ioctl::COMMAND_BASE);
/// `DRM_IOCTL_SAMPLE_BO_MMAP_OFFSET`.
pub(crate) const BO_MMAP_OFFSET: u32 = ioctl::IOWR::<BoMmapOffset>(ioctl::COMMAND_BASE + 1);
/// `DRM_IOCTL_SAMPLE_SUBMIT`.
pub(crate) const SUBMIT: u32 = ioctl::IOWR::<Submit>(ioctl::COMMAND_BASE + 2);

/// Credits of the device's job queue (each job costs one).
const QUEUE: QueueConfig = QueueConfig::new(8);

/// The driver.
pub(crate) struct SampleDriver;

/// Per-device data: the job queue.
pub(crate) struct SampleData {
    jobs: env::Jobs,
}

/// Per-file data (none).
pub(crate) struct SampleFile;

/// Buffer object data (none: the DRM core's shmem object is the buffer).
pub(crate) struct SampleBo;

impl drm::Driver for SampleDriver {
    type Data = SampleData;
    type Object = SampleBo;
    type File = SampleFile;
    const INFO: drm::DriverInfo = drm::DriverInfo {
        major: 1,
        minor: 0,
        patchlevel: 0,
        name: c"gpukit_sample",
        desc: c"gpukit drm-ctx sample driver",
    };
    const FEAT_RENDER: bool = true;
    drm_ctx::declare_drm_ioctls! {
        (BO_CREATE, BoCreate, ioctl::RENDER_ALLOW, bo_create),
        (BO_MMAP_OFFSET, BoMmapOffset, ioctl::RENDER_ALLOW, bo_mmap_offset),
        (SUBMIT, Submit, ioctl::RENDER_ALLOW, submit),
    }
}

impl gem::DriverObject for SampleBo {
    type Driver = SampleDriver;
    type Args = ();

    fn new(_size: usize, _args: ()) -> Result<Self> {
        Ok(SampleBo)
    }
}

impl drm::DriverFile for SampleFile {
    type Driver = SampleDriver;

    fn open(_device: &Device<SampleDriver>) -> Result<Self> {
        Ok(SampleFile)
    }
}

/// The pretend hardware ring: a job's hardware fence is its payload, made (signalled) when the
/// job was prepared.
pub(crate) struct Ring;

impl Backend for Ring {
    type Fence = env::Fence;
    type Alloc = env::JobAlloc;
    type Payload = env::Fence;

    fn run_job(
        &mut self,
        job: RunJob<'_, env::Fence>,
        _ctx: &SignalCtx<'_>,
    ) -> core::result::Result<env::Fence, FenceError> {
        Ok(job.payload().clone())
    }

    fn timed_out(
        &mut self,
        _job: TimedOutJob<'_, env::Fence>,
        _ctx: &SignalCtx<'_>,
    ) -> TimeoutAction {
        TimeoutAction::Fail
    }
}

/// A `jobqueue` error as this crate's.
fn jq(e: jobqueue::Error) -> Error {
    let errno = e.to_errno();
    Error::from_errno(errno).unwrap_or(Error::Other(errno))
}

fn bo_create(
    dev: &Device<SampleDriver>,
    arg: &mut BoCreate,
    file: &File<SampleFile>,
) -> Result<u32> {
    if arg.size == 0 || arg.flags != 0 {
        return Err(Error::Invalid);
    }
    if arg.size > MAX_BO_SIZE {
        return Err(Error::Overflow);
    }
    let size = usize::try_from(arg.size).map_err(|_| Error::Overflow)?;
    let bo = gem::Object::<SampleBo>::new(dev, size, ())?;
    arg.handle = bo.create_handle(file)?;
    Ok(0)
}

fn bo_mmap_offset(
    _dev: &Device<SampleDriver>,
    arg: &mut BoMmapOffset,
    file: &File<SampleFile>,
) -> Result<u32> {
    if arg.pad != 0 {
        return Err(Error::Invalid);
    }
    let bo = gem::Object::<SampleBo>::lookup_handle(file, arg.handle)?;
    arg.offset = bo.create_mmap_offset()?;
    Ok(0)
}

fn submit(dev: &Device<SampleDriver>, arg: &mut Submit, file: &File<SampleFile>) -> Result<u32> {
    if arg.flags != 0 {
        return Err(Error::Invalid);
    }
    // Everything that allocates happens here, before the job is committed.
    let hw = env::signalled_fence()?;
    let job = PreparedJob::new(dev.jobs.alloc(), &QUEUE, Cost(1), MaxDeps(0), hw)
        .map_err(|r| jq(r.error))?;
    let done = dev.jobs.submit(job).map_err(jq)?;
    let fence = env::syncobj_fence(&done.done)?;
    // The handle is the last thing made: userspace sees a complete syncobj or none.
    arg.syncobj = file.create_syncobj(Some(&fence))?;
    arg.seqno = done.seqno;
    Ok(0)
}

/// Creates the DRM device for `parent` (its job queue first) and registers it; the
/// registration lives as long as the driver is bound to `parent`.
pub(crate) fn probe(parent: &device::Device<Bound>) -> Result<&Device<SampleDriver>> {
    let unreg =
        drm::UnregisteredDevice::<SampleDriver>::new_with_in::<env::Alloc>(parent, |_init| {
            Ok(SampleData {
                jobs: env::Jobs::new(QUEUE)?,
            })
        })?;
    drm::Registration::new_foreign_owned(unreg, parent, 0)
}
