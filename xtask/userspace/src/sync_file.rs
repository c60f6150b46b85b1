// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Sync files (`include/uapi/linux/sync_file.h`): a fence as a file descriptor, here one a DRM
//! syncobj exported ([`Drm::syncobj_export_sync_file`](crate::drm::Drm::syncobj_export_sync_file)).
//! `SYNC_IOC_FILE_INFO` with `num_fences` 0 reports the fence's status as
//! `dma_fence_get_status()` gives it: 0 pending, 1 signalled, a negated errno when the fence
//! signalled with an error (`drivers/dma-buf/sync_file.c`).

use std::fmt;
use std::fs::File;
use std::mem::size_of;

use crate::ioc;
use crate::sys::{self, Errno, Plain};

/// `struct sync_file_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SyncFileInfo {
    /// The sync file's name (out).
    pub name: [u8; 32],
    /// The fence's status (out): see [`FenceStatus::from_raw`].
    pub status: i32,
    /// Must be zero.
    pub flags: u32,
    /// In: room in `sync_fence_info` (0: status only); out: the number of fences.
    pub num_fences: u32,
    /// Must be zero.
    pub pad: u32,
    /// User pointer to `num_fences` `struct sync_fence_info` (unused with `num_fences` 0).
    pub sync_fence_info: u64,
}

// SAFETY: `#[repr(C)]`, integers and a byte array only, no padding (56 bytes, asserted below).
unsafe impl Plain for SyncFileInfo {}

const _: () = assert!(size_of::<SyncFileInfo>() == 32 + 4 * 4 + 8);

/// `SYNC_IOC_MAGIC`.
pub const IOC_MAGIC: u8 = b'>';
/// `SYNC_IOC_FILE_INFO`.
pub const IOC_FILE_INFO: u32 = ioc::iowr(IOC_MAGIC, 4, size_of::<SyncFileInfo>());

/// A fence's status.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FenceStatus {
    /// Not signalled yet (0).
    Pending,
    /// Signalled without an error (1).
    Signalled,
    /// Signalled with an error (the negated errno).
    Error(Errno),
}

impl FenceStatus {
    /// Decodes the `status` of `SYNC_IOC_FILE_INFO`; `None` for a value the kernel never
    /// reports (above 1).
    pub fn from_raw(status: i32) -> Option<Self> {
        match status {
            0 => Some(FenceStatus::Pending),
            1 => Some(FenceStatus::Signalled),
            s if s < 0 => Some(FenceStatus::Error(Errno(s.checked_neg()?))),
            _ => None,
        }
    }
}

impl fmt::Display for FenceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FenceStatus::Pending => write!(f, "pending (0)"),
            FenceStatus::Signalled => write!(f, "signalled (1)"),
            FenceStatus::Error(e) => write!(f, "signalled with -{} (-{})", e.name(), e.0),
        }
    }
}

/// The status of the fence of the sync file `file`.
pub fn status(file: &File) -> Result<FenceStatus, String> {
    let mut info = SyncFileInfo::default();
    sys::ioctl(file, IOC_FILE_INFO, &mut info).map_err(|e| format!("SYNC_IOC_FILE_INFO: {e}"))?;
    FenceStatus::from_raw(info.status).ok_or_else(|| {
        format!(
            "SYNC_IOC_FILE_INFO: status {} is not a fence status",
            info.status
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_number_and_layout_match_linux() {
        // _IOWR('>', 4, struct sync_file_info) on x86_64.
        assert_eq!(IOC_FILE_INFO, 0xC038_3E04);
        assert_eq!(std::mem::offset_of!(SyncFileInfo, status), 32);
        assert_eq!(std::mem::offset_of!(SyncFileInfo, num_fences), 40);
        assert_eq!(std::mem::offset_of!(SyncFileInfo, sync_fence_info), 48);
    }

    #[test]
    fn statuses_decode() {
        assert_eq!(FenceStatus::from_raw(0), Some(FenceStatus::Pending));
        assert_eq!(FenceStatus::from_raw(1), Some(FenceStatus::Signalled));
        assert_eq!(
            FenceStatus::from_raw(-libc::ETIMEDOUT),
            Some(FenceStatus::Error(Errno(libc::ETIMEDOUT)))
        );
        assert_eq!(
            FenceStatus::from_raw(-libc::EFAULT),
            Some(FenceStatus::Error(Errno(libc::EFAULT)))
        );
        assert_eq!(FenceStatus::from_raw(2), None);
        assert_eq!(FenceStatus::from_raw(i32::MIN), None);
        assert_eq!(
            FenceStatus::Error(Errno(libc::ETIMEDOUT)).to_string(),
            "signalled with -ETIMEDOUT (-110)"
        );
        assert_eq!(FenceStatus::Signalled.to_string(), "signalled (1)");
    }

    #[test]
    fn file_info_on_another_file_fails_with_enotty() {
        let f = sys::open_rw("/dev/null").expect("/dev/null opens");
        let err = status(&f).unwrap_err();
        assert!(err.contains("ENOTTY"), "{err}");
    }
}
