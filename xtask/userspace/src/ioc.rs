// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The Linux ioctl number encoding (`include/uapi/asm-generic/ioctl.h`, used by x86 and Arm):
//! `dir << 30 | size << 16 | type << 8 | nr`, with 2 direction bits and 14 size bits.

/// No data transfer (`_IOC_NONE`).
pub const NONE: u32 = 0;
/// Userspace writes, the kernel reads (`_IOC_WRITE`).
pub const WRITE: u32 = 1;
/// The kernel writes, userspace reads (`_IOC_READ`).
pub const READ: u32 = 2;

const NR_SHIFT: u32 = 0;
const TYPE_SHIFT: u32 = 8;
const SIZE_SHIFT: u32 = 16;
const DIR_SHIFT: u32 = 30;
const SIZE_BITS: u32 = 14;

/// `_IOC(dir, type, nr, size)`.
///
/// # Panics
///
/// If `dir` does not fit in 2 bits or `size` in 14 bits (at compile time when used in a
/// constant).
pub const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    assert!(dir < 4, "ioctl direction has two bits");
    assert!(size < (1 << SIZE_BITS), "ioctl size has 14 bits");
    (dir << DIR_SHIFT) | ((size as u32) << SIZE_SHIFT) | ((ty as u32) << TYPE_SHIFT) | nr as u32
}

/// `_IO(type, nr)`: no argument.
pub const fn io(ty: u8, nr: u8) -> u32 {
    ioc(NONE, ty, nr, 0)
}

/// `_IOR(type, nr, size)`: the kernel writes `size` bytes.
pub const fn ior(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(READ, ty, nr, size)
}

/// `_IOW(type, nr, size)`: the kernel reads `size` bytes.
pub const fn iow(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(WRITE, ty, nr, size)
}

/// `_IOWR(type, nr, size)`: the kernel reads and writes `size` bytes.
pub const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(READ | WRITE, ty, nr, size)
}

/// `_IOC_NR(cmd)`.
pub const fn nr(cmd: u32) -> u8 {
    (cmd >> NR_SHIFT) as u8
}

/// `_IOC_TYPE(cmd)`.
pub const fn ty(cmd: u32) -> u8 {
    (cmd >> TYPE_SHIFT) as u8
}

/// `_IOC_SIZE(cmd)`: how many bytes of the argument the kernel may read or write.
pub const fn size(cmd: u32) -> usize {
    ((cmd >> SIZE_SHIFT) & ((1 << SIZE_BITS) - 1)) as usize
}

/// `_IOC_DIR(cmd)`.
pub const fn dir(cmd: u32) -> u32 {
    cmd >> DIR_SHIFT
}

/// The same command with another argument size (an older or newer version of its struct).
pub const fn with_size(cmd: u32, size: usize) -> u32 {
    ioc(dir(cmd), ty(cmd), nr(cmd), size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_linux() {
        // Values from the Linux headers, as a C compiler computes them on x86_64.
        assert_eq!(iowr(b'd', 0x00, 64), 0xC040_6400); // DRM_IOCTL_VERSION
        assert_eq!(iow(b'd', 0x09, 8), 0x4008_6409); // DRM_IOCTL_GEM_CLOSE
        assert_eq!(io(b'd', 0x1e), 0x0000_641e); // DRM_IOCTL_DROP_MASTER
        assert_eq!(iowr(b'd', 0x0c, 16), 0xC010_640C); // DRM_IOCTL_GET_CAP
        assert_eq!(ior(b'd', 0x02, 4), 0x8004_6402); // DRM_IOCTL_GET_MAGIC
        assert_eq!(iowr(b'd', 0x40, 16), 0xC010_6440); // DRM_IOCTL_PANTHOR_DEV_QUERY
    }

    #[test]
    fn fields_round_trip() {
        let cmd = iowr(b'd', 0xC3, 40);
        assert_eq!((dir(cmd), ty(cmd), nr(cmd), size(cmd)), (3, b'd', 0xC3, 40));
        let short = with_size(cmd, 8);
        assert_eq!(
            (dir(short), ty(short), nr(short), size(short)),
            (3, b'd', 0xC3, 8)
        );
    }
}
