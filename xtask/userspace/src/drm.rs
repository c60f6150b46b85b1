// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DRM core ioctls every driver answers (`include/uapi/drm/drm.h`), on an open DRM file.
//!
//! Only what the programs use: `DRM_IOCTL_VERSION`, `DRM_IOCTL_GEM_CLOSE` and the syncobj
//! create, destroy, wait and export (as a sync file) calls. Driver commands are numbered from
//! [`COMMAND_BASE`].

use std::fs::File;
use std::mem::size_of;

use crate::ioc;
use crate::sys::{self, Errno, Plain};

/// The ioctl type of every DRM command (`DRM_IOCTL_BASE`).
pub const IOCTL_BASE: u8 = b'd';
/// The first driver-specific command number (`DRM_COMMAND_BASE`).
pub const COMMAND_BASE: u8 = 0x40;
/// The first DRM render node (`/dev/dri/renderD128`, minor 128 of major 226).
pub const RENDER_NODE: &str = "/dev/dri/renderD128";

/// `struct drm_version` on a 64-bit kernel (the `size_t` fields are 64-bit, and C puts 4 bytes
/// of padding after `version_patchlevel`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmVersion {
    /// Major version.
    pub version_major: i32,
    /// Minor version.
    pub version_minor: i32,
    /// Patch level.
    pub version_patchlevel: i32,
    /// The padding the C layout has here.
    pub pad: u32,
    /// Length of the name buffer; the kernel writes the name's length.
    pub name_len: u64,
    /// User pointer to the name buffer.
    pub name: u64,
    /// Length of the date buffer; the kernel writes the date's length.
    pub date_len: u64,
    /// User pointer to the date buffer.
    pub date: u64,
    /// Length of the description buffer; the kernel writes the description's length.
    pub desc_len: u64,
    /// User pointer to the description buffer.
    pub desc: u64,
}

/// `struct drm_gem_close`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmGemClose {
    /// The GEM handle to close.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_syncobj_create`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmSyncobjCreate {
    /// Out: the new syncobj's handle.
    pub handle: u32,
    /// [`SYNCOBJ_CREATE_SIGNALED`] or 0.
    pub flags: u32,
}

/// `struct drm_syncobj_destroy`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmSyncobjDestroy {
    /// The syncobj handle to destroy.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}

/// `struct drm_syncobj_wait`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmSyncobjWait {
    /// User pointer to an array of `count_handles` `u32` handles.
    pub handles: u64,
    /// Absolute `CLOCK_MONOTONIC` timeout in nanoseconds (0: poll).
    pub timeout_nsec: i64,
    /// Number of handles.
    pub count_handles: u32,
    /// `SYNCOBJ_WAIT_FLAGS_*`.
    pub flags: u32,
    /// Out: the first signalled handle's index (without `WAIT_ALL`).
    pub first_signaled: u32,
    /// Must be zero.
    pub pad: u32,
    /// Deadline hint (with `WAIT_DEADLINE`).
    pub deadline_nsec: u64,
}

/// `struct drm_syncobj_handle` (`SYNCOBJ_HANDLE_TO_FD`, `SYNCOBJ_FD_TO_HANDLE`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DrmSyncobjHandle {
    /// The syncobj handle.
    pub handle: u32,
    /// `DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_*`.
    pub flags: u32,
    /// Out: the new file descriptor.
    pub fd: i32,
    /// Must be zero.
    pub pad: u32,
    /// Timeline point (with the `TIMELINE` flag).
    pub point: u64,
}

// SAFETY: `#[repr(C)]` structs of integers whose fields add up to their size (no padding, see
// the size assertions below): every bit pattern is valid.
unsafe impl Plain for DrmVersion {}
// SAFETY: as above.
unsafe impl Plain for DrmGemClose {}
// SAFETY: as above.
unsafe impl Plain for DrmSyncobjCreate {}
// SAFETY: as above.
unsafe impl Plain for DrmSyncobjDestroy {}
// SAFETY: as above.
unsafe impl Plain for DrmSyncobjWait {}
// SAFETY: as above.
unsafe impl Plain for DrmSyncobjHandle {}

const _: () = {
    assert!(size_of::<DrmVersion>() == 3 * 4 + 4 + 6 * 8);
    assert!(size_of::<DrmGemClose>() == 8);
    assert!(size_of::<DrmSyncobjCreate>() == 8);
    assert!(size_of::<DrmSyncobjDestroy>() == 8);
    assert!(size_of::<DrmSyncobjWait>() == 8 + 8 + 4 * 4 + 8);
    assert!(size_of::<DrmSyncobjHandle>() == 4 * 4 + 8);
};

/// `DRM_IOCTL_VERSION`.
pub const IOCTL_VERSION: u32 = ioc::iowr(IOCTL_BASE, 0x00, size_of::<DrmVersion>());
/// `DRM_IOCTL_GEM_CLOSE`.
pub const IOCTL_GEM_CLOSE: u32 = ioc::iow(IOCTL_BASE, 0x09, size_of::<DrmGemClose>());
/// `DRM_IOCTL_SYNCOBJ_CREATE`.
pub const IOCTL_SYNCOBJ_CREATE: u32 = ioc::iowr(IOCTL_BASE, 0xBF, size_of::<DrmSyncobjCreate>());
/// `DRM_IOCTL_SYNCOBJ_DESTROY`.
pub const IOCTL_SYNCOBJ_DESTROY: u32 = ioc::iowr(IOCTL_BASE, 0xC0, size_of::<DrmSyncobjDestroy>());
/// `DRM_IOCTL_SYNCOBJ_WAIT`.
pub const IOCTL_SYNCOBJ_WAIT: u32 = ioc::iowr(IOCTL_BASE, 0xC3, size_of::<DrmSyncobjWait>());

/// `DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD`.
pub const IOCTL_SYNCOBJ_HANDLE_TO_FD: u32 =
    ioc::iowr(IOCTL_BASE, 0xC1, size_of::<DrmSyncobjHandle>());

/// `DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE`: export the syncobj's current fence as a
/// sync file rather than the syncobj itself.
pub const SYNCOBJ_HANDLE_TO_FD_EXPORT_SYNC_FILE: u32 = 1 << 0;
/// `DRM_SYNCOBJ_CREATE_SIGNALED`.
pub const SYNCOBJ_CREATE_SIGNALED: u32 = 1 << 0;
/// `DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL`.
pub const SYNCOBJ_WAIT_ALL: u32 = 1 << 0;

/// A driver command: `DRM_IOWR(DRM_COMMAND_BASE + index, T)`.
pub const fn driver_iowr(index: u8, size: usize) -> u32 {
    ioc::iowr(IOCTL_BASE, COMMAND_BASE + index, size)
}

/// What `DRM_IOCTL_VERSION` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// `major.minor.patchlevel`.
    pub number: (i32, i32, i32),
    /// The driver's name.
    pub name: String,
    /// The date (deprecated; the core reports "0").
    pub date: String,
    /// The driver's description.
    pub desc: String,
}

/// An open DRM file.
pub struct Drm {
    file: File,
}

impl Drm {
    /// Opens a DRM node read-write.
    pub fn open(path: &str) -> Result<Self, Errno> {
        sys::open_rw(path).map(|file| Drm { file })
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// `ioctl(cmd, &mut arg)`; see [`sys::ioctl`].
    pub fn ioctl<T: Plain>(&self, cmd: u32, arg: &mut T) -> Result<i64, Errno> {
        sys::ioctl(&self.file, cmd, arg)
    }

    /// `ioctl(cmd, &mut arg)` for an argument holding user addresses; see
    /// [`sys::ioctl_with_pointers`].
    ///
    /// # Safety
    ///
    /// As for [`sys::ioctl_with_pointers`]: every address inside `arg` must be valid for what
    /// the command reads and writes there, during the call.
    pub unsafe fn ioctl_with_pointers<T: Plain>(
        &self,
        cmd: u32,
        arg: &mut T,
    ) -> Result<i64, Errno> {
        // SAFETY: the caller's guarantee.
        unsafe { sys::ioctl_with_pointers(&self.file, cmd, arg) }
    }

    /// `DRM_IOCTL_VERSION` in two passes, as libdrm does: the lengths first, then the strings.
    pub fn version(&self) -> Result<Version, String> {
        let mut v = DrmVersion::default();
        self.ioctl(IOCTL_VERSION, &mut v)
            .map_err(|e| format!("VERSION (lengths): {e}"))?;
        let lens = (v.name_len, v.date_len, v.desc_len);
        let buffer = |len: u64| vec![0u8; usize::try_from(len).unwrap_or(0)];
        let (mut name, mut date, mut desc) = (buffer(lens.0), buffer(lens.1), buffer(lens.2));
        v.name = name.as_mut_ptr() as u64;
        v.date = date.as_mut_ptr() as u64;
        v.desc = desc.as_mut_ptr() as u64;
        // SAFETY: the three pointers point to buffers of exactly the lengths given with them,
        // alive until after the call; `v` is a valid `struct drm_version`.
        unsafe {
            sys::ioctl_raw(
                &self.file,
                IOCTL_VERSION,
                (&mut v as *mut DrmVersion).cast(),
            )
        }
        .map_err(|e| format!("VERSION (strings): {e}"))?;
        if (v.name_len, v.date_len, v.desc_len) != lens {
            return Err(format!(
                "VERSION lengths changed between the passes: {lens:?} then {:?}",
                (v.name_len, v.date_len, v.desc_len)
            ));
        }
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        Ok(Version {
            number: (v.version_major, v.version_minor, v.version_patchlevel),
            name: text(name),
            date: text(date),
            desc: text(desc),
        })
    }

    /// `DRM_IOCTL_GEM_CLOSE`.
    pub fn gem_close(&self, handle: u32) -> Result<i64, Errno> {
        self.ioctl(IOCTL_GEM_CLOSE, &mut DrmGemClose { handle, pad: 0 })
    }

    /// `DRM_IOCTL_SYNCOBJ_CREATE`; returns the new handle.
    pub fn syncobj_create(&self, flags: u32) -> Result<u32, Errno> {
        let mut arg = DrmSyncobjCreate { handle: 0, flags };
        self.ioctl(IOCTL_SYNCOBJ_CREATE, &mut arg)?;
        Ok(arg.handle)
    }

    /// `DRM_IOCTL_SYNCOBJ_DESTROY`.
    pub fn syncobj_destroy(&self, handle: u32) -> Result<i64, Errno> {
        self.ioctl(
            IOCTL_SYNCOBJ_DESTROY,
            &mut DrmSyncobjDestroy { handle, pad: 0 },
        )
    }

    /// `DRM_IOCTL_SYNCOBJ_WAIT` on `handles` with `flags`, until `timeout_ns` from now.
    pub fn syncobj_wait(&self, handles: &[u32], flags: u32, timeout_ns: i64) -> Result<i64, Errno> {
        syncobj_wait(&self.file, handles, flags, timeout_ns)
    }

    /// `DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD` with `EXPORT_SYNC_FILE`: the syncobj's current fence
    /// as a sync file (`EINVAL` when it has none).
    pub fn syncobj_export_sync_file(&self, handle: u32) -> Result<File, Errno> {
        let mut arg = DrmSyncobjHandle {
            handle,
            flags: SYNCOBJ_HANDLE_TO_FD_EXPORT_SYNC_FILE,
            fd: -1,
            ..DrmSyncobjHandle::default()
        };
        self.ioctl(IOCTL_SYNCOBJ_HANDLE_TO_FD, &mut arg)?;
        // `from_raw_fd` needs a descriptor, not -1 (what `fd` holds if the kernel wrote none).
        if arg.fd < 0 {
            return Err(Errno(libc::EBADF));
        }
        // SAFETY: the kernel just installed `fd` in this process for this call; nothing else
        // owns it.
        Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(arg.fd) })
    }

    /// Closes the file with `close(2)`, returning what it says.
    pub fn close(self) -> Result<(), Errno> {
        sys::close(self.file)
    }
}

/// `DRM_IOCTL_SYNCOBJ_WAIT` on `handles` of the DRM file `file` with `flags`, until
/// `timeout_ns` from now (for a thread that waits on a file another closes).
pub fn syncobj_wait(
    file: &File,
    handles: &[u32],
    flags: u32,
    timeout_ns: i64,
) -> Result<i64, Errno> {
    let mut arg = DrmSyncobjWait {
        handles: handles.as_ptr() as u64,
        timeout_nsec: sys::monotonic_ns() + timeout_ns,
        count_handles: u32::try_from(handles.len()).map_err(|_| Errno(libc::EINVAL))?,
        flags,
        ..DrmSyncobjWait::default()
    };
    // SAFETY: `arg` is a valid `struct drm_syncobj_wait` whose `handles` points to
    // `count_handles` handles that outlive the call (the kernel only reads them).
    unsafe {
        sys::ioctl_raw(
            file,
            IOCTL_SYNCOBJ_WAIT,
            (&mut arg as *mut DrmSyncobjWait).cast(),
        )
    }
}

/// `struct drm_syncobj_timeline_array` (`SYNCOBJ_QUERY`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct DrmSyncobjTimelineArray {
    handles: u64,
    points: u64,
    count_handles: u32,
    flags: u32,
}

/// `DRM_IOCTL_SYNCOBJ_QUERY`.
pub const IOCTL_SYNCOBJ_QUERY: u32 =
    ioc::iowr(IOCTL_BASE, 0xCB, size_of::<DrmSyncobjTimelineArray>());

impl Drm {
    /// `DRM_IOCTL_SYNCOBJ_QUERY` of one timeline syncobj: the last point that signalled.
    pub fn syncobj_query(&self, handle: u32) -> Result<u64, Errno> {
        let handles = [handle];
        let mut points = [0u64];
        let mut arg = DrmSyncobjTimelineArray {
            handles: handles.as_ptr() as u64,
            points: points.as_mut_ptr() as u64,
            count_handles: 1,
            flags: 0,
        };
        // SAFETY: `handles` (read) and `points` (written) hold `count_handles` entries each and
        // outlive the call; nothing else references `points` during it.
        unsafe {
            sys::ioctl_raw(
                &self.file,
                IOCTL_SYNCOBJ_QUERY,
                (&mut arg as *mut DrmSyncobjTimelineArray).cast(),
            )
        }?;
        Ok(points[0])
    }
}

/// What is in `/dev/dri` (for a failure message when a node is missing).
pub fn list_dev_dri() -> String {
    match std::fs::read_dir("/dev/dri") {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            if names.is_empty() {
                "/dev/dri is empty".to_string()
            } else {
                format!("/dev/dri holds {}", names.join(", "))
            }
        }
        Err(_) => "there is no /dev/dri (no DRM device registered)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_ioctl_numbers_match_linux() {
        assert_eq!(IOCTL_VERSION, 0xC040_6400);
        assert_eq!(IOCTL_GEM_CLOSE, 0x4008_6409);
        assert_eq!(IOCTL_SYNCOBJ_CREATE, 0xC008_64BF);
        assert_eq!(IOCTL_SYNCOBJ_DESTROY, 0xC008_64C0);
        assert_eq!(IOCTL_SYNCOBJ_WAIT, 0xC028_64C3);
        assert_eq!(IOCTL_SYNCOBJ_HANDLE_TO_FD, 0xC018_64C1);
        assert_eq!(IOCTL_SYNCOBJ_QUERY, 0xC018_64CB);
        assert_eq!(driver_iowr(0, 16), 0xC010_6440);
    }

    #[test]
    fn version_layout_matches_c() {
        assert_eq!(std::mem::offset_of!(DrmVersion, name_len), 16);
        assert_eq!(std::mem::offset_of!(DrmVersion, desc), 56);
        assert_eq!(std::mem::offset_of!(DrmSyncobjWait, count_handles), 16);
        assert_eq!(std::mem::offset_of!(DrmSyncobjWait, deadline_nsec), 32);
        assert_eq!(std::mem::offset_of!(DrmSyncobjHandle, fd), 8);
        assert_eq!(std::mem::offset_of!(DrmSyncobjHandle, point), 16);
    }
}
