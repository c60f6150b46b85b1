// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM ioctls: numbers, permission flags and typed handler tables.
//!
//! An ioctl command is a 32-bit number with four fields (Linux's generic `_IOC` encoding):
//!
//! ```text
//!  31 30 29            16 15         8 7          0
//! +-----+----------------+------------+------------+
//! | dir |      size      |    type    |     nr     |
//! +-----+----------------+------------+------------+
//! ```
//!
//! `dir` says whether the argument is copied in (`IOC_WRITE`, userspace writes it), out
//! (`IOC_READ`) or both, `size` is the size of the argument structure, `type` is `'d'` for DRM,
//! and `nr` selects the ioctl: below [`COMMAND_BASE`] are the DRM core's own ioctls, from
//! [`COMMAND_BASE`] to [`COMMAND_END`] the driver's, in table order.
//!
//! A driver declares its table with [`declare_drm_ioctls!`](crate::declare_drm_ioctls): each
//! entry names the command, the argument type (an [`IoctlArg`]), the permission flags and a
//! handler `fn(&Device<D>, &mut Arg, &File<D::File>) -> Result<u32>`. The DRM core copies the
//! argument in (zero-extending it if userspace passed an older, shorter structure), checks the
//! flags, runs the handler and copies the argument back out.
//!
//! # Examples
//!
//! ```
//! use drm_ctx::drm::ioctl;
//!
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct GetParam { param: u32, pad: u32, value: u64 }
//! // SAFETY: `repr(C)`, no padding, integers only.
//! unsafe impl ioctl::IoctlArg for GetParam {}
//!
//! const GET_PARAM: u32 = ioctl::IOWR::<GetParam>(0x40);
//! assert_eq!(ioctl::nr(GET_PARAM), 0x40);
//! assert_eq!(ioctl::size(GET_PARAM), 16);
//! assert_eq!(ioctl::ty(GET_PARAM), ioctl::BASE);
//! assert_eq!(ioctl::dir(GET_PARAM), ioctl::IOC_READ | ioctl::IOC_WRITE);
//! ```

use super::{Device, Driver, File};
use crate::Result;
use core::{ffi::CStr, marker::PhantomData, mem::size_of};

/// The ioctl type of DRM (`'d'`).
pub const BASE: u32 = b'd' as u32;
/// First driver-specific ioctl number.
pub const COMMAND_BASE: u32 = 0x40;
/// One past the last driver-specific ioctl number.
pub const COMMAND_END: u32 = 0xA0;

const NR_BITS: u32 = 8;
const TYPE_BITS: u32 = 8;
const SIZE_BITS: u32 = 14;
const TYPE_SHIFT: u32 = NR_BITS;
const SIZE_SHIFT: u32 = TYPE_SHIFT + TYPE_BITS;
const DIR_SHIFT: u32 = SIZE_SHIFT + SIZE_BITS;

/// No argument transfer.
pub const IOC_NONE: u32 = 0;
/// Userspace writes the argument: it is copied in.
pub const IOC_WRITE: u32 = 1;
/// Userspace reads the argument: it is copied out.
pub const IOC_READ: u32 = 2;

/// Largest argument size a command can encode.
pub const MAX_SIZE: usize = (1 << SIZE_BITS) - 1;

/// The handler needs an authenticated primary-node client or a render-node client.
pub const AUTH: u32 = 1 << 0;
/// The handler needs the current DRM master.
pub const MASTER: u32 = 1 << 1;
/// The handler needs `CAP_SYS_ADMIN`.
pub const ROOT_ONLY: u32 = 1 << 2;
/// Render-node clients may call the handler (without it they get `EACCES`).
pub const RENDER_ALLOW: u32 = 1 << 5;

/// Encodes an ioctl command from its fields; each field is truncated to its width.
pub const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    let size = (size & MAX_SIZE) as u32;
    ((dir & 3) << DIR_SHIFT)
        | (size << SIZE_SHIFT)
        | ((ty & ((1 << TYPE_BITS) - 1)) << TYPE_SHIFT)
        | (nr & ((1 << NR_BITS) - 1))
}

/// The size of `T` as an ioctl argument size; a build error if it does not fit the size field.
const fn arg_size<T>() -> usize {
    const { assert!(size_of::<T>() <= MAX_SIZE, "ioctl argument too large") };
    size_of::<T>()
}

/// A DRM command without argument.
#[allow(non_snake_case)]
pub const fn IO(nr: u32) -> u32 {
    ioc(IOC_NONE, BASE, nr, 0)
}

/// A DRM command whose argument userspace reads (copied out).
#[allow(non_snake_case)]
pub const fn IOR<T>(nr: u32) -> u32 {
    ioc(IOC_READ, BASE, nr, arg_size::<T>())
}

/// A DRM command whose argument userspace writes (copied in).
#[allow(non_snake_case)]
pub const fn IOW<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, BASE, nr, arg_size::<T>())
}

/// A DRM command whose argument is copied in and out.
#[allow(non_snake_case)]
pub const fn IOWR<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, BASE, nr, arg_size::<T>())
}

/// The number field of a command.
pub const fn nr(cmd: u32) -> u32 {
    cmd & ((1 << NR_BITS) - 1)
}

/// The type field of a command (`'d'` for DRM).
pub const fn ty(cmd: u32) -> u32 {
    (cmd >> TYPE_SHIFT) & ((1 << TYPE_BITS) - 1)
}

/// The argument size of a command.
pub const fn size(cmd: u32) -> usize {
    ((cmd >> SIZE_SHIFT) & ((1 << SIZE_BITS) - 1)) as usize
}

/// The direction field of a command ([`IOC_READ`] | [`IOC_WRITE`] bits).
pub const fn dir(cmd: u32) -> u32 {
    cmd >> DIR_SHIFT
}

/// A plain-old-data ioctl argument.
///
/// # Safety
///
/// The type must have no padding bytes and every bit pattern of its size must be a valid value
/// (integers, arrays of them, `repr(C)` structs of them with explicit padding fields).
pub unsafe trait IoctlArg: Copy + Send + 'static {}

macro_rules! impl_ioctl_arg {
    ($($t:ty),*) => {$(
        // SAFETY: Integers have no padding and accept every bit pattern.
        unsafe impl IoctlArg for $t {}
    )*};
}
impl_ioctl_arg!(u8, u16, u32, u64, i8, i16, i32, i64);

// SAFETY: An array of padding-free, any-bit-pattern elements is the same.
unsafe impl<T: IoctlArg, const N: usize> IoctlArg for [T; N] {}

/// A handler in a driver's ioctl table, with its argument type erased.
pub trait Handler<T: Driver>: Sync {
    /// Runs the handler on the kernel copy of the argument (exactly the size of the argument
    /// type).
    fn call(&self, dev: &Device<T>, arg: &mut [u8], file: &File<T::File>) -> Result<u32>;
}

/// The signature of a typed ioctl handler.
pub type HandlerFn<T, A> =
    for<'a> fn(&'a Device<T>, &'a mut A, &'a File<<T as Driver>::File>) -> Result<u32>;

/// A typed handler (what [`declare_drm_ioctls!`](crate::declare_drm_ioctls) builds).
pub struct Typed<T: Driver, A: IoctlArg> {
    /// The handler function.
    pub func: HandlerFn<T, A>,
    /// Marker for the argument type.
    pub _arg: PhantomData<fn(A) -> A>,
}

impl<T: Driver, A: IoctlArg> Handler<T> for Typed<T, A> {
    fn call(&self, dev: &Device<T>, arg: &mut [u8], file: &File<T::File>) -> Result<u32> {
        let mut value: A = from_bytes(arg).ok_or(crate::Error::Invalid)?;
        let ret = (self.func)(dev, &mut value, file);
        arg.copy_from_slice(as_bytes(&value));
        ret
    }
}

/// The bytes of an argument.
pub fn as_bytes<A: IoctlArg>(arg: &A) -> &[u8] {
    // SAFETY: By the contract of `IoctlArg`, `A` has no padding, so all its `size_of::<A>()`
    // bytes are initialised; the slice borrows `arg`.
    unsafe { core::slice::from_raw_parts((arg as *const A).cast::<u8>(), size_of::<A>()) }
}

/// Reads an argument from exactly `size_of::<A>()` bytes; `None` for another length.
pub fn from_bytes<A: IoctlArg>(bytes: &[u8]) -> Option<A> {
    if bytes.len() != size_of::<A>() {
        return None;
    }
    // SAFETY: `bytes` holds `size_of::<A>()` bytes and, by the contract of `IoctlArg`, any
    // bytes are a valid `A`; the read does not need alignment.
    Some(unsafe { bytes.as_ptr().cast::<A>().read_unaligned() })
}

/// Checks the permission flags of an ioctl against how the file was opened (the rules of the
/// DRM core, in its order); [`Error::Access`](crate::Error::Access) if denied.
pub fn permit(flags: u32, opts: &super::OpenOptions) -> Result {
    use crate::Error::Access;
    let render = opts.node == super::Node::Render;
    if flags & ROOT_ONLY != 0 && !opts.sys_admin {
        return Err(Access);
    }
    if flags & AUTH != 0 && !render && !opts.authenticated {
        return Err(Access);
    }
    if flags & MASTER != 0 && (render || !opts.master) {
        return Err(Access);
    }
    if flags & RENDER_ALLOW == 0 && render {
        return Err(Access);
    }
    Ok(())
}

/// Argument of `DRM_IOCTL_VERSION` (64-bit layout of `struct drm_version`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmVersion {
    /// Major version of the driver.
    pub version_major: i32,
    /// Minor version of the driver.
    pub version_minor: i32,
    /// Patch level of the driver.
    pub version_patchlevel: i32,
    /// Explicit padding.
    pub pad: u32,
    /// In: size of the `name` buffer; out: length of the name.
    pub name_len: u64,
    /// User address of the name buffer (may be 0).
    pub name: u64,
    /// In: size of the `date` buffer; out: length of the date.
    pub date_len: u64,
    /// User address of the date buffer (may be 0).
    pub date: u64,
    /// In: size of the `desc` buffer; out: length of the description.
    pub desc_len: u64,
    /// User address of the description buffer (may be 0).
    pub desc: u64,
}
// SAFETY: `repr(C)`, integers only, explicit padding: 64 bytes without holes.
unsafe impl IoctlArg for DrmVersion {}

/// Argument of `DRM_IOCTL_GEM_CLOSE`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrmGemClose {
    /// The handle to close.
    pub handle: u32,
    /// Must be zero.
    pub pad: u32,
}
// SAFETY: `repr(C)`, two `u32`.
unsafe impl IoctlArg for DrmGemClose {}

/// Core ioctl: driver name and version (render nodes allowed).
pub const DRM_IOCTL_VERSION: u32 = IOWR::<DrmVersion>(0x00);
/// Core ioctl: closes a GEM handle of the file (render nodes allowed).
pub const DRM_IOCTL_GEM_CLOSE: u32 = IOW::<DrmGemClose>(0x09);

/// One entry of a driver's ioctl table.
pub struct Descriptor<T: Driver + 'static> {
    /// The command, with the kernel's argument size and direction.
    pub cmd: u32,
    /// Permission flags ([`AUTH`], [`MASTER`], [`ROOT_ONLY`], [`RENDER_ALLOW`]).
    pub flags: u32,
    /// Name for diagnostics (a C string: the kernel's `drm_ioctl` prints it).
    pub name: &'static CStr,
    /// The handler.
    pub handler: &'static dyn Handler<T>,
}

impl<T: Driver> Descriptor<T> {
    /// Builds a table entry; checks at compile time (in a constant) that `cmd` is a DRM driver
    /// command whose size is that of `A`.
    ///
    /// # Panics
    ///
    /// In const evaluation (a build error) if the command does not match `A` or is not in the
    /// driver range.
    pub const fn new<A: IoctlArg>(
        cmd: u32,
        flags: u32,
        name: &'static CStr,
        handler: &'static Typed<T, A>,
    ) -> Self {
        assert!(ty(cmd) == BASE, "not a DRM ioctl");
        assert!(
            size(cmd) == size_of::<A>(),
            "ioctl size differs from argument type"
        );
        assert!(
            nr(cmd) >= COMMAND_BASE && nr(cmd) < COMMAND_END,
            "not a driver ioctl number"
        );
        Descriptor {
            cmd,
            flags,
            name,
            handler,
        }
    }
}

/// `name` (which ends with its only NUL byte) as a C string, for
/// [`declare_drm_ioctls!`](crate::declare_drm_ioctls).
///
/// # Panics
///
/// In const evaluation (a build error) if `name` has no NUL at its end or one before.
#[doc(hidden)]
pub const fn c_name(name: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(name.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("an ioctl handler's name must end with its only NUL byte"),
    }
}

/// Checks that a table is numbered from [`COMMAND_BASE`] without gaps and fits the driver range.
///
/// # Panics
///
/// In const evaluation (a build error) if it is not.
pub const fn validate_table<T: Driver>(table: &[Descriptor<T>]) {
    assert!(
        table.len() <= (COMMAND_END - COMMAND_BASE) as usize,
        "too many ioctls"
    );
    let mut i = 0;
    while i < table.len() {
        assert!(
            nr(table[i].cmd) == COMMAND_BASE + i as u32,
            "ioctl table out of order or with gaps"
        );
        i += 1;
    }
}

/// Returns `table` after checking it with [`validate_table`] (a build error when evaluated in a
/// constant, which is how [`declare_drm_ioctls!`](crate::declare_drm_ioctls) uses it).
///
/// # Panics
///
/// In const evaluation (a build error) if the table is not numbered from [`COMMAND_BASE`]
/// without gaps.
pub const fn validated<T: Driver>(table: &[Descriptor<T>]) -> &[Descriptor<T>] {
    validate_table(table);
    table
}

/// Declares a driver's ioctl table (`const IOCTLS`) inside `impl Driver for ...`.
///
/// Each entry is `(command, argument type, flags, handler)`, in number order starting at
/// [`COMMAND_BASE`]. Handlers have the signature
/// `fn(&Device<Self>, &mut Arg, &File<Self::File>) -> Result<u32>`.
///
/// # Examples
///
/// ```
/// use drm_ctx::{drm::{self, ioctl}, Result};
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// pub struct Echo { value: u64 }
/// // SAFETY: `repr(C)`, one integer.
/// unsafe impl ioctl::IoctlArg for Echo {}
/// pub const ECHO: u32 = ioctl::IOWR::<Echo>(0x40);
///
/// fn echo(_: &drm::Device<MyDriver>, arg: &mut Echo, _: &drm::File<MyFile>) -> Result<u32> {
///     arg.value += 1;
///     Ok(0)
/// }
///
/// pub struct MyDriver;
/// pub struct MyFile;
/// pub struct MyBo;
/// impl drm::Driver for MyDriver {
///     type Data = ();
///     type Object = MyBo;
///     type File = MyFile;
///     const INFO: drm::DriverInfo =
///         drm::DriverInfo { major: 1, minor: 0, patchlevel: 0, name: c"my", desc: c"example" };
///     drm_ctx::declare_drm_ioctls! {
///         (ECHO, Echo, ioctl::RENDER_ALLOW, echo),
///     }
/// }
/// impl drm::DriverFile for MyFile {
///     type Driver = MyDriver;
///     fn open(_: &drm::Device<MyDriver>) -> Result<Self> { Ok(MyFile) }
/// }
/// impl drm::gem::DriverObject for MyBo {
///     type Driver = MyDriver;
///     type Args = ();
///     fn new(_: usize, _: ()) -> Result<Self> { Ok(MyBo) }
/// }
/// assert_eq!(<MyDriver as drm::Driver>::IOCTLS.len(), 1);
///
/// // Register a device and issue the ioctl from a client, by number.
/// let parent = drm_ctx::device::Device::new("my").unwrap();
/// let unreg = drm::UnregisteredDevice::<MyDriver>::new(&parent, ()).unwrap();
/// let reg = drm::Registration::new(unreg, 0).unwrap();
/// let client = drm_ctx::host::Client::open(reg.device(), drm::OpenOptions::primary()).unwrap();
/// let mut arg = Echo { value: 41 };
/// client.ioctl_arg(ECHO, &mut arg).unwrap();
/// assert_eq!(arg.value, 42);
/// ```
#[macro_export]
macro_rules! declare_drm_ioctls {
    ( $( ($cmd:expr, $arg:ty, $flags:expr, $func:expr) ),* $(,)? ) => {
        const IOCTLS: &'static [$crate::drm::ioctl::Descriptor<Self>] =
            $crate::drm::ioctl::validated(&[
            $(
                $crate::drm::ioctl::Descriptor::new::<$arg>(
                    $cmd,
                    $flags,
                    $crate::drm::ioctl::c_name(::core::concat!(::core::stringify!($func), "\0")),
                    &$crate::drm::ioctl::Typed::<Self, $arg> {
                        func: $func,
                        _arg: ::core::marker::PhantomData,
                    },
                )
            ),*
        ]);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_linux() {
        // Values of the Linux uAPI headers on x86-64 and arm64.
        assert_eq!(DRM_IOCTL_VERSION, 0xC040_6400);
        assert_eq!(DRM_IOCTL_GEM_CLOSE, 0x4008_6409);
        // DRM_IOCTL_PANTHOR_DEV_QUERY: read-write, 16-byte argument, number 0x40.
        assert_eq!(IOWR::<[u64; 2]>(COMMAND_BASE), 0xC010_6440);
        assert_eq!(IO(0x4b), 0x0000_644b);
        assert_eq!(IOR::<u32>(0x45), 0x8004_6445);
        let cmd = DRM_IOCTL_VERSION;
        assert_eq!((dir(cmd), ty(cmd), nr(cmd), size(cmd)), (3, BASE, 0, 64));
        // Fields are truncated, never spilled into their neighbours.
        assert_eq!(ioc(7, 0x1ff, 0x1ff, MAX_SIZE + 2), ioc(3, 0xff, 0xff, 1));
    }

    #[test]
    fn bytes_round_trip() {
        let v = DrmGemClose { handle: 7, pad: 0 };
        let b = as_bytes(&v);
        assert_eq!(b.len(), 8);
        assert_eq!(from_bytes::<DrmGemClose>(b), Some(v));
        assert_eq!(from_bytes::<DrmGemClose>(&b[..4]), None);
        assert_eq!(core::mem::size_of::<DrmVersion>(), 64);
    }

    #[test]
    fn permission_rules() {
        use crate::drm::{Node, OpenOptions};
        let render = OpenOptions::render();
        let primary = OpenOptions::primary();
        assert_eq!(permit(RENDER_ALLOW, &render), Ok(()));
        assert_eq!(permit(0, &render), Err(crate::Error::Access));
        assert_eq!(permit(AUTH | RENDER_ALLOW, &render), Ok(()));
        assert_eq!(permit(AUTH, &primary), Err(crate::Error::Access));
        let master = OpenOptions {
            node: Node::Primary,
            authenticated: true,
            master: true,
            sys_admin: false,
        };
        assert_eq!(permit(MASTER | AUTH, &master), Ok(()));
        assert_eq!(permit(ROOT_ONLY, &master), Err(crate::Error::Access));
    }
}
