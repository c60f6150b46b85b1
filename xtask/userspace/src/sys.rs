// SPDX-License-Identifier: GPL-2.0 OR MIT

//! System calls the programs need, with the errno kept: raw ioctls, `mmap`, the monotonic clock,
//! `close`, writes to sysfs attributes, and what PID 1 of the test VM does (mount devtmpfs and
//! sysfs, sync, end the VM).

use std::ffi::CString;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// An errno value (positive, as `errno` holds it).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The errno the last failed libc call left.
    pub fn last() -> Self {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The symbolic name of the errnos a DRM driver returns (`"E?"` for others).
    pub fn name(self) -> &'static str {
        match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::EINTR => "EINTR",
            libc::EIO => "EIO",
            libc::ENXIO => "ENXIO",
            libc::EBADF => "EBADF",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::EBUSY => "EBUSY",
            libc::EEXIST => "EEXIST",
            libc::ENODEV => "ENODEV",
            libc::ENOTDIR => "ENOTDIR",
            libc::EINVAL => "EINVAL",
            libc::ENOSPC => "ENOSPC",
            libc::ENOTTY => "ENOTTY",
            libc::ERANGE => "ERANGE",
            libc::ENOSYS => "ENOSYS",
            libc::ETIME => "ETIME",
            libc::EOVERFLOW => "EOVERFLOW",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            libc::ETIMEDOUT => "ETIMEDOUT",
            libc::ECANCELED => "ECANCELED",
            _ => "E?",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Self {
        Errno(e.raw_os_error().unwrap_or(0))
    }
}

/// Types the kernel may fill with any bytes: `#[repr(C)]` structs of integers without padding
/// the kernel could read uninitialised, integer arrays.
///
/// # Safety
///
/// Every bit pattern must be a valid value of the type, and it must have no padding bytes.
pub unsafe trait Plain: Sized {}

// SAFETY: integers and arrays of them accept every bit pattern and have no padding.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl<const N: usize> Plain for [u8; N] {}
// SAFETY: as above.
unsafe impl<const N: usize> Plain for [u32; N] {}
// SAFETY: as above.
unsafe impl<const N: usize> Plain for [u64; N] {}

/// Opens a device node read-write (`O_CLOEXEC`, as every libdrm user does).
pub fn open_rw(path: &str) -> Result<File, Errno> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(Errno::from)
}

/// `ioctl(fd, cmd, arg)` as the raw system call: returns the call's value or its errno.
///
/// # Safety
///
/// `arg` must point to memory that may be read and written for `ioc::size(cmd)` bytes with the
/// layout the command expects, or to memory that is not mapped at all (the kernel then fails
/// with `EFAULT`): the kernel writes up to `ioc::size(cmd)` bytes at `arg`.
pub unsafe fn ioctl_raw(fd: &File, cmd: u32, arg: *mut libc::c_void) -> Result<i64, Errno> {
    // SAFETY: the kernel validates `fd`; the caller vouches for `arg`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            libc::c_ulong::from(cmd),
            arg,
        )
    };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

/// `ioctl(fd, cmd, &mut arg)`: the kernel reads and writes at most `ioc::size(cmd)` bytes of
/// `arg`, which may be more than the command's size (a shorter struct sent on purpose).
///
/// # Panics
///
/// If the command's size is larger than `T`.
pub fn ioctl<T: Plain>(fd: &File, cmd: u32, arg: &mut T) -> Result<i64, Errno> {
    assert!(
        crate::ioc::size(cmd) <= std::mem::size_of::<T>(),
        "ioctl {cmd:#x} reads more than the {} bytes given",
        std::mem::size_of::<T>()
    );
    // SAFETY: `arg` is valid for reads and writes of `size_of::<T>()` bytes, at least the
    // command's size, and `T: Plain` accepts whatever bytes the kernel writes there.
    unsafe { ioctl_raw(fd, cmd, (arg as *mut T).cast()) }
}

/// `ioctl(fd, cmd, &mut arg)` for a command whose argument holds user addresses (arrays the
/// kernel reads, buffers it writes), like `DRM_IOCTL_VERSION` or panthor's `VM_BIND`.
///
/// # Safety
///
/// Every user address in `arg` must point to memory that is valid, for the whole call, for
/// every byte the command may read or write there (as the lengths, counts and strides next to
/// the address say), with the layout the command expects; memory the kernel may write must
/// accept any bytes and must not be referenced elsewhere during the call.
///
/// # Panics
///
/// If the command's size is larger than `T`.
pub unsafe fn ioctl_with_pointers<T: Plain>(
    fd: &File,
    cmd: u32,
    arg: &mut T,
) -> Result<i64, Errno> {
    assert!(
        crate::ioc::size(cmd) <= std::mem::size_of::<T>(),
        "ioctl {cmd:#x} reads more than the {} bytes given",
        std::mem::size_of::<T>()
    );
    // SAFETY: `arg` itself is valid for the command's size (checked above) and `T: Plain`;
    // the caller vouches for the addresses inside it.
    unsafe { ioctl_raw(fd, cmd, (arg as *mut T).cast()) }
}

/// `mmap` of `len` bytes of `fd` at `offset`, readable and (with `write`) writable, with
/// `flags` (`MAP_SHARED` or `MAP_PRIVATE`): the address.
fn map(
    fd: &File,
    len: usize,
    offset: u64,
    write: bool,
    flags: libc::c_int,
) -> Result<*mut u8, Errno> {
    let offset = libc::off_t::try_from(offset).map_err(|_| Errno(libc::EOVERFLOW))?;
    // SAFETY: a new mapping at an address the kernel chooses; it overlaps nothing of ours.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            if write {
                libc::PROT_READ | libc::PROT_WRITE
            } else {
                libc::PROT_READ
            },
            flags,
            fd.as_raw_fd(),
            offset,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    Ok(addr.cast())
}

/// A shared mapping of a file (`mmap(MAP_SHARED)`), read and written with volatile accesses
/// (another mapping, or a device, sees the same memory). Unmapped on drop.
pub struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, readable and writable.
    pub fn shared(fd: &File, len: usize, offset: u64) -> Result<Self, Errno> {
        let addr = map(fd, len, offset, true, libc::MAP_SHARED)?;
        Ok(Mapping { addr, len })
    }

    /// Maps `len` bytes of `fd` at `offset`, shared and read-only: only the `read_*` methods
    /// may be used (a write would be a `SIGSEGV`).
    pub fn shared_read_only(fd: &File, len: usize, offset: u64) -> Result<Self, Errno> {
        let addr = map(fd, len, offset, false, libc::MAP_SHARED)?;
        Ok(Mapping { addr, len })
    }

    /// Maps `len` bytes of `fd` at `offset` shared, readable and writable, and unmaps it at
    /// once: `Ok` if the kernel allowed it.
    pub fn try_shared_writable(fd: &File, len: usize, offset: u64) -> Result<(), Errno> {
        Mapping::shared(fd, len, offset)?.unmap()
    }

    /// `mprotect(PROT_READ | PROT_WRITE)` of the whole mapping: `Ok` if the kernel allowed it
    /// (a mapping the driver made read-only for good refuses it with `EACCES`).
    pub fn try_protect_writable(&self) -> Result<(), Errno> {
        // SAFETY: the mapping this value owns; only its protection changes.
        let ret = unsafe {
            libc::mprotect(
                self.addr.cast(),
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if ret == 0 {
            Ok(())
        } else {
            Err(Errno::last())
        }
    }

    /// Maps `len` bytes of `fd` at `offset` privately (`MAP_PRIVATE`), readable and writable,
    /// and unmaps it at once: `Ok` if the kernel allowed it. A driver whose mappings are the
    /// device's memory refuses such copy-on-write mappings, as the DRM shmem helpers do.
    pub fn try_private(fd: &File, len: usize, offset: u64) -> Result<(), Errno> {
        Mapping {
            addr: map(fd, len, offset, true, libc::MAP_PRIVATE)?,
            len,
        }
        .unmap()
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: `mmap` refuses a length of 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the `index`-th 64-bit word.
    ///
    /// # Panics
    ///
    /// If the word is outside the mapping.
    pub fn write_u64(&self, index: usize, value: u64) {
        let word = self.word(index);
        // SAFETY: `word` is in bounds of a live mapping and aligned (see `word`), and nothing
        // in this program holds a reference into the mapping.
        unsafe { word.write_volatile(value) }
    }

    /// Reads the `index`-th 64-bit word.
    ///
    /// # Panics
    ///
    /// If the word is outside the mapping.
    pub fn read_u64(&self, index: usize) -> u64 {
        let word = self.word(index);
        // SAFETY: as in `write_u64`.
        unsafe { word.read_volatile() }
    }

    /// Writes the `index`-th 32-bit word.
    ///
    /// # Panics
    ///
    /// If the word is outside the mapping.
    pub fn write_u32(&self, index: usize, value: u32) {
        let word = self.word32(index);
        // SAFETY: `word` is in bounds of a live mapping and aligned (see `word32`), and
        // nothing in this program holds a reference into the mapping.
        unsafe { word.write_volatile(value) }
    }

    /// Reads the `index`-th 32-bit word.
    ///
    /// # Panics
    ///
    /// If the word is outside the mapping.
    pub fn read_u32(&self, index: usize) -> u32 {
        let word = self.word32(index);
        // SAFETY: as in `write_u32`.
        unsafe { word.read_volatile() }
    }

    /// The address of the `index`-th 32-bit word: inside the mapping (checked) and aligned.
    fn word32(&self, index: usize) -> *mut u32 {
        assert!(
            index < self.len / 4,
            "32-bit word {index} is outside the mapping of {} bytes",
            self.len
        );
        self.addr.cast::<u32>().wrapping_add(index)
    }

    /// The address of the `index`-th 64-bit word: inside the mapping (checked) and aligned
    /// (mappings start on a page).
    fn word(&self, index: usize) -> *mut u64 {
        assert!(
            index < self.len / 8,
            "word {index} is outside the mapping of {} bytes",
            self.len
        );
        self.addr.cast::<u64>().wrapping_add(index)
    }

    /// Unmaps now, returning what `munmap` says.
    pub fn unmap(self) -> Result<(), Errno> {
        let (addr, len) = (self.addr, self.len);
        std::mem::forget(self);
        // SAFETY: the mapping this value owned; it is gone with the value.
        let ret = unsafe { libc::munmap(addr.cast(), len) };
        if ret == 0 {
            Ok(())
        } else {
            Err(Errno::last())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this value owns, dropped with it.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of DRM's absolute timeouts.
pub fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The page size.
pub fn page_size() -> u64 {
    // SAFETY: `sysconf` has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).unwrap_or(4096)
}

/// Whether this process is PID 1 (the VM's init).
pub fn is_init() -> bool {
    std::process::id() == 1
}

/// Mounts devtmpfs on `dir` (made if missing). `Ok(false)` when it was mounted already
/// (`EBUSY`), `Ok(true)` when this call mounted it.
pub fn mount_devtmpfs(dir: &str) -> Result<bool, String> {
    mount("devtmpfs", dir, "CONFIG_DEVTMPFS")
}

/// Mounts sysfs on `dir` (made if missing), where drivers show their attributes and take
/// `bind`/`unbind` requests. `Ok(false)` when it was mounted already (`EBUSY`), `Ok(true)` when
/// this call mounted it.
pub fn mount_sysfs(dir: &str) -> Result<bool, String> {
    mount("sysfs", dir, "CONFIG_SYSFS")
}

/// Mounts procfs on `dir` (made if missing), where the kernel shows its interrupt counts
/// (`/proc/interrupts`). As [`mount_sysfs`] for the result.
pub fn mount_proc(dir: &str) -> Result<bool, String> {
    mount("proc", dir, "CONFIG_PROC_FS")
}

/// Mounts the file system `fs` (also the source's name, as for the kernel's pseudo file
/// systems) on `dir`, made if missing; `config` names the option whose absence `ENODEV` means.
fn mount(fs: &str, dir: &str, config: &str) -> Result<bool, String> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("mkdir {dir}: {e}")),
    }
    let source = CString::new(fs).map_err(|_| format!("{fs:?} holds a NUL"))?;
    let target = CString::new(dir).map_err(|_| format!("{dir:?} holds a NUL"))?;
    // SAFETY: NUL-terminated strings that outlive the call, no data argument.
    let ret = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            source.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if ret == 0 {
        return Ok(true);
    }
    match Errno::last() {
        Errno(libc::EBUSY) => Ok(false),
        Errno(libc::ENODEV) => Err(format!(
            "mount {fs} on {dir}: {} (the kernel has no {config})",
            Errno(libc::ENODEV)
        )),
        e => Err(format!("mount {fs} on {dir}: {e}")),
    }
}

/// Writes `data` to an existing file (a sysfs attribute: one `write`, no creation, no
/// truncation), returning the errno of the open or the write.
pub fn write_existing(path: &str, data: &[u8]) -> Result<(), Errno> {
    use std::io::Write;
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(data).map_err(Errno::from)
}

/// Closes `file` with `close(2)` and returns what it says (dropping a `File` ignores it).
pub fn close(file: File) -> Result<(), Errno> {
    let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
    // SAFETY: `fd` was owned by `file`, which gave it up: nothing else closes or uses it.
    let ret = unsafe { libc::close(fd) };
    if ret == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

/// Writes the file systems back and ends the VM; as PID 1 nothing may come after.
///
/// It restarts the machine (`LINUX_REBOOT_CMD_RESTART`), which QEMU started with `-no-reboot`
/// turns into its exit, as kunit.py does with `kunit_shutdown=reboot`: the test kernel's small
/// configuration has no power-off method, and there `LINUX_REBOOT_CMD_POWER_OFF` halts the
/// machine ("Power off not available: System halted instead") and never returns, leaving QEMU
/// running. Should the restart fail, power-off is tried, then it waits forever.
pub fn shut_down() -> ! {
    // SAFETY: `sync` has no preconditions.
    unsafe { libc::sync() };
    // SAFETY: as PID 1 with CAP_SYS_BOOT the call does not return on success.
    unsafe { libc::reboot(libc::LINUX_REBOOT_CMD_RESTART) };
    // SAFETY: as above.
    unsafe { libc::reboot(libc::LINUX_REBOOT_CMD_POWER_OFF) };
    loop {
        // SAFETY: `pause` has no preconditions.
        unsafe { libc::pause() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names() {
        assert_eq!(Errno(libc::EINVAL).to_string(), "EINVAL (22)");
        assert_eq!(Errno(libc::ENOTTY).name(), "ENOTTY");
        assert_eq!(Errno(libc::EOVERFLOW).name(), "EOVERFLOW");
        assert_eq!(Errno(4095).name(), "E?");
    }

    #[test]
    fn ioctl_reports_the_errno() {
        // /dev/null knows no DRM ioctl.
        let f = open_rw("/dev/null").expect("/dev/null opens");
        let mut arg = [0u8; 64];
        let cmd = crate::ioc::iowr(b'd', 0, 64);
        assert_eq!(ioctl(&f, cmd, &mut arg), Err(Errno(libc::ENOTTY)));
    }

    #[test]
    fn shared_mapping_keeps_what_was_written() {
        // SAFETY: a NUL-terminated name, no flags.
        let fd = unsafe { libc::memfd_create(c"gpukit-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create: {}", Errno::last());
        // SAFETY: `fd` was just created and is owned by nothing else.
        let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        file.set_len(8192).unwrap();
        let m = Mapping::shared(&file, 8192, 0).unwrap();
        for i in 0..1024 {
            m.write_u64(i, 0x5a5a_0000_0000_0000 | i as u64);
        }
        m.unmap().unwrap();
        let m = Mapping::shared(&file, 8192, 0).unwrap();
        assert!((0..1024).all(|i| m.read_u64(i) == 0x5a5a_0000_0000_0000 | i as u64));
        assert_eq!(m.len(), 8192);
        // 32-bit words are the halves of the 64-bit ones (little-endian).
        assert_eq!(m.read_u32(2 * 7), 7);
        assert_eq!(m.read_u32(2 * 7 + 1), 0x5a5a_0000);
        m.write_u32(2047, 0x1234_5678);
        assert_eq!(m.read_u64(1023), 0x1234_5678_0000_0000 | 1023);
    }

    #[test]
    fn writes_to_existing_files_and_close() {
        let path = std::env::temp_dir().join(format!("gpukit-sys-test-{}", std::process::id()));
        let path = path.to_str().unwrap().to_string();
        // No creation: a missing file is its errno, as a missing sysfs attribute is.
        assert_eq!(write_existing(&path, b"tyr"), Err(Errno(libc::ENOENT)));
        std::fs::write(&path, b"0123456789").unwrap();
        // No truncation either: one write over the start.
        write_existing(&path, b"tyr").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"tyr3456789");
        let f = File::open(&path).unwrap();
        assert_eq!(close(f), Ok(()));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
        assert_eq!(page_size() % 4096, 0);
    }
}
