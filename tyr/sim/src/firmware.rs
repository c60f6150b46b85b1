// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The MCU's firmware image: the simulator's own image, and what the MCU checks at boot.
//!
//! A CSF GPU's MCU runs the firmware image the driver loads into the MCU's address space
//! (address space 0) before enabling it. The image format is Arm's `mali_csffw.bin` (a header,
//! then entries, some of which describe *sections*: a range of MCU addresses, its protections,
//! and the bytes of the file that initialise it); this module reads it on its own, without
//! the driver's parser, so that each checks the other.
//!
//! # The simulator's image
//!
//! [`IMAGE`] is a valid image in that format for the simulated MCU, which runs no code: a
//! small code section (read, execute), a data section (read, write, zeroed after its data),
//! the shared interface region at [`SHARED_REGION_VA`](crate::csf::SHARED_REGION_VA) (read,
//! write, shared, zeroed, cached-coherent, 64 KiB), a configuration entry and a build
//! information entry naming the simulator ([`GIT_SHA`]). A driver loads it where no Arm image
//! is at hand, so that everything works offline.
//!
//! # The check at boot
//!
//! A board hands the MCU the same file it hands the driver; [`Config::firmware`] carries what
//! the MCU needs of it ([`Flashed`]: each section's range, flags, data length and a digest of
//! its data, so that the configuration stays a small `Copy` value and owns no memory). On
//! every cold boot (an enable from disabled) the MCU walks address space 0 over every section
//! of its image (protected-mode sections aside) and requires every page to be mapped and
//! readable, writable exactly when the section is, executable exactly when the section is,
//! and the section's contents to be the image's: its data, then zeroes where the image says
//! so. The shared region is checked for its mapping only: its contents are the interface,
//! which the firmware rewrites at every boot and the driver writes in between. Anything else
//! stops the MCU with `MCU_STATUS` reading `FATAL` (an unmapped page also records the MMU
//! fault of address space 0), and [`Gpu::firmware_check`](crate::Gpu::firmware_check) says
//! why.
//!
//! Once running, the firmware writes to its writable sections as real firmware changes its
//! data: the simulated one stores a boot count in the last eight bytes of each writable,
//! non-shared section. A driver must therefore reload those sections before the next cold
//! boot, as panthor does, or the check fails.
//!
//! Without [`Config::firmware`] (the default), the MCU checks only that the shared region is
//! mapped, as before images were modelled.
//!
//! [`Config::firmware`]: crate::Config::firmware

use core::fmt;

/// The header's magic number.
pub const MAGIC: u32 = 0xc3f1_3a6e;
/// Entry type of a section.
pub const ENTRY_IFACE: u8 = 0;
/// Entry type of the firmware's configuration.
pub const ENTRY_CONFIG: u8 = 1;
/// Entry type of the build information.
pub const ENTRY_BUILD_INFO: u8 = 6;
/// Entry header bit: optional.
pub const ENTRY_OPTIONAL: u32 = 1 << 31;
/// Entry header bit: updatable.
pub const ENTRY_UPDATE: u32 = 1 << 30;
/// Section flag: readable.
pub const SECTION_RD: u32 = 1 << 0;
/// Section flag: writable.
pub const SECTION_WR: u32 = 1 << 1;
/// Section flag: executable.
pub const SECTION_EX: u32 = 1 << 2;
/// Section flag: cache mode "cached" (bits 4:3 = 1).
pub const SECTION_CACHED: u32 = 1 << 3;
/// Section flag: cache mode "cached, coherent" (bits 4:3 = 3).
pub const SECTION_CACHED_COHERENT: u32 = 3 << 3;
/// Section flag: protected mode.
pub const SECTION_PROT: u32 = 1 << 5;
/// Section flag: shared with the driver.
pub const SECTION_SHARED: u32 = 1 << 30;
/// Section flag: zeroed after its data.
pub const SECTION_ZERO: u32 = 1 << 31;

/// The simulator's identifier in its image's build information.
pub const GIT_SHA: &str = "67706b6974206d616c692d73696d204d43552031";

/// MCU address of the simulator image's code section.
pub const CODE_VA: u32 = 0x0000_0000;
/// MCU address of the simulator image's data section.
pub const DATA_VA: u32 = 0x0200_0000;

const CODE: &[u8] = b"gpukit-mali-sim MCU: a fixed state machine, no instructions here.";
const DATA: &[u8] = b"sim data section";
const BUILD_INFO: &[u8] = b"git_sha: 67706b6974206d616c692d73696d204d43552031\0";
const HEADER: usize = 20;
/// Interface entries: header word, five fields, an 8-byte name.
const IFACE_ENTRY: usize = 4 + 20 + 8;
const CONFIG_ENTRY: usize = 32;
const BUILD_ENTRY: usize = 12;
const TABLE: usize = HEADER + 3 * IFACE_ENTRY + CONFIG_ENTRY + BUILD_ENTRY;
const CODE_AT: usize = TABLE;
const DATA_AT: usize = CODE_AT + CODE.len().next_multiple_of(8);
const BUILD_AT: usize = DATA_AT + DATA.len().next_multiple_of(8);
const IMAGE_LEN: usize = BUILD_AT + BUILD_INFO.len();

/// The simulator's firmware image (see the [module documentation](self)).
pub static IMAGE: [u8; IMAGE_LEN] = build_image();

const fn put(mut out: [u8; IMAGE_LEN], at: usize, bytes: &[u8]) -> [u8; IMAGE_LEN] {
    let mut i = 0;
    while i < bytes.len() {
        out[at + i] = bytes[i];
        i += 1;
    }
    out
}

const fn put32(out: [u8; IMAGE_LEN], at: usize, v: u32) -> [u8; IMAGE_LEN] {
    put(out, at, &v.to_le_bytes())
}

/// Writes an interface entry at `at`.
const fn iface(
    mut out: [u8; IMAGE_LEN],
    at: usize,
    flags: u32,
    va: (u32, u32),
    data: (usize, usize),
    name: &[u8; 8],
) -> [u8; IMAGE_LEN] {
    out = put32(out, at, ENTRY_IFACE as u32 | (IFACE_ENTRY as u32) << 8);
    out = put32(out, at + 4, flags);
    out = put32(out, at + 8, va.0);
    out = put32(out, at + 12, va.1);
    out = put32(out, at + 16, data.0 as u32);
    out = put32(out, at + 20, data.1 as u32);
    put(out, at + 24, name)
}

const fn build_image() -> [u8; IMAGE_LEN] {
    let mut out = [0u8; IMAGE_LEN];
    out = put32(out, 0, MAGIC);
    // Format 0.3, as Arm's images; the version hash names the simulator (0x5153 "SQ").
    out = put(out, 4, &[3, 0, 0, 0]);
    out = put32(out, 8, 0x5153_0001);
    out = put32(out, 16, TABLE as u32);
    let mut at = HEADER;
    out = iface(
        out,
        at,
        SECTION_RD | SECTION_EX | SECTION_CACHED,
        (CODE_VA, CODE_VA + 0x1000),
        (CODE_AT, CODE_AT + CODE.len()),
        b"sim.text",
    );
    at += IFACE_ENTRY;
    out = iface(
        out,
        at,
        SECTION_RD | SECTION_WR | SECTION_CACHED | SECTION_ZERO,
        (DATA_VA, DATA_VA + 0x2000),
        (DATA_AT, DATA_AT + DATA.len()),
        b"sim.data",
    );
    at += IFACE_ENTRY;
    let shared = crate::csf::SHARED_REGION_VA as u32;
    out = iface(
        out,
        at,
        SECTION_RD | SECTION_WR | SECTION_CACHED_COHERENT | SECTION_SHARED | SECTION_ZERO,
        (shared, shared + 0x1_0000),
        (0, 0),
        b"shared\0\0",
    );
    at += IFACE_ENTRY;
    // A configuration entry, as Arm's images carry (its contents mean nothing here).
    out = put32(
        out,
        at,
        ENTRY_CONFIG as u32 | (CONFIG_ENTRY as u32) << 8 | ENTRY_OPTIONAL | ENTRY_UPDATE,
    );
    out = put(out, at + 4, b"sim.cfg\0");
    at += CONFIG_ENTRY;
    out = put32(
        out,
        at,
        ENTRY_BUILD_INFO as u32 | (BUILD_ENTRY as u32) << 8 | ENTRY_OPTIONAL,
    );
    out = put32(out, at + 4, BUILD_AT as u32);
    out = put32(out, at + 8, BUILD_INFO.len() as u32);
    out = put(out, CODE_AT, CODE);
    out = put(out, DATA_AT, DATA);
    put(out, BUILD_AT, BUILD_INFO)
}

/// Most sections the MCU reads from an image.
pub const MAX_SECTIONS: usize = 32;

/// A 64-bit FNV-1a digest, continued from `h` over `bytes`.
pub const fn digest(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// The FNV-1a offset basis: the digest of nothing.
pub const DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

/// One section as the MCU remembers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlashedSection {
    /// Flags.
    pub flags: u32,
    /// First MCU address.
    pub va_start: u32,
    /// MCU address after the last byte.
    pub va_end: u32,
    /// Bytes of data at the start of the section.
    pub data_len: u32,
    /// [`digest`] of the data.
    pub digest: u64,
}

/// Why the MCU cannot use an image it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlashError {
    /// Not an image (too short, wrong magic or major version, truncated).
    BadHeader,
    /// An entry or a section does not fit the file.
    BadEntry,
    /// More than [`MAX_SECTIONS`] sections.
    TooManySections,
}

/// What the MCU keeps of the image it was given (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flashed {
    sections: [FlashedSection; MAX_SECTIONS],
    count: usize,
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

impl Flashed {
    /// Reads the sections of `image` (protected-mode and empty ones aside).
    ///
    /// # Errors
    ///
    /// A [`FlashError`] for a file the MCU cannot read. The MCU is lenient where the driver
    /// must not be: it does not judge flags or overlaps, only what it needs to check memory.
    pub fn new(image: &[u8]) -> Result<Self, FlashError> {
        let size = le32(image, 16).ok_or(FlashError::BadHeader)? as usize;
        if le32(image, 0) != Some(MAGIC) || image[5] != 0 || size > image.len() {
            return Err(FlashError::BadHeader);
        }
        let mut f = Flashed {
            sections: [FlashedSection::default(); MAX_SECTIONS],
            count: 0,
        };
        let mut at = HEADER;
        while at < size {
            let ehdr = le32(image, at).ok_or(FlashError::BadEntry)?;
            let len = ((ehdr >> 8) & 0xff) as usize;
            if len < 4 || !len.is_multiple_of(4) || at + len > size {
                return Err(FlashError::BadEntry);
            }
            if ehdr as u8 == ENTRY_IFACE {
                let w = |i: usize| le32(image, at + 4 + 4 * i).filter(|_| 24 <= len);
                let (Some(flags), Some(va_start), Some(va_end), Some(ds), Some(de)) =
                    (w(0), w(1), w(2), w(3), w(4))
                else {
                    return Err(FlashError::BadEntry);
                };
                let data = image
                    .get(ds as usize..de as usize)
                    .ok_or(FlashError::BadEntry)?;
                if va_end < va_start {
                    return Err(FlashError::BadEntry);
                }
                // Protected-mode sections are not the MCU's to check.
                if flags & SECTION_PROT == 0 && data.len() as u64 > u64::from(va_end - va_start) {
                    return Err(FlashError::BadEntry);
                }
                if flags & SECTION_PROT == 0 && va_end > va_start {
                    let s = f
                        .sections
                        .get_mut(f.count)
                        .ok_or(FlashError::TooManySections)?;
                    *s = FlashedSection {
                        flags,
                        va_start,
                        va_end,
                        data_len: data.len() as u32,
                        digest: digest(DIGEST_START, data),
                    };
                    f.count += 1;
                }
            }
            at += len;
        }
        Ok(f)
    }

    /// The simulator's own image ([`IMAGE`]).
    pub fn sim() -> Self {
        // The image is built above; a mistake there shows in this crate's tests.
        Flashed::new(&IMAGE).unwrap_or(Flashed {
            sections: [FlashedSection::default(); MAX_SECTIONS],
            count: 0,
        })
    }

    /// The sections, in file order.
    pub fn sections(&self) -> &[FlashedSection] {
        self.sections.get(..self.count).unwrap_or(&[])
    }
}

/// Why the MCU refused to boot its image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckError {
    /// A page of a section is not mapped (or not readable) in address space 0.
    NotMapped {
        /// MCU address of the page.
        va: u64,
    },
    /// A page's write or execute permission is not the section's.
    WrongPermissions {
        /// MCU address of the page.
        va: u64,
    },
    /// A section's contents are not the image's data.
    WrongData {
        /// MCU address of the section.
        va: u64,
    },
    /// The part of a section after its data is not zero.
    NotZeroed {
        /// MCU address of the first page with a non-zero byte there.
        va: u64,
    },
    /// The shared region is not mapped readable and writable (also without an image).
    NoSharedRegion,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CheckError::NotMapped { va } => write!(f, "firmware page {va:#x} is not mapped"),
            CheckError::WrongPermissions { va } => {
                write!(f, "firmware page {va:#x} has the wrong permissions")
            }
            CheckError::WrongData { va } => {
                write!(f, "firmware section {va:#x} does not hold the image's data")
            }
            CheckError::NotZeroed { va } => {
                write!(f, "firmware page {va:#x} is not zeroed")
            }
            CheckError::NoSharedRegion => write!(f, "the shared region is not mapped"),
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn the_sim_image_reads_back() {
        let f = Flashed::new(&IMAGE).unwrap();
        let s = f.sections();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].va_start, s[0].va_end, s[0].data_len as usize),
            (CODE_VA, 0x1000, CODE.len())
        );
        assert_eq!(s[0].digest, digest(DIGEST_START, CODE));
        assert_eq!(s[1].flags & SECTION_WR, SECTION_WR);
        assert_eq!(u64::from(s[2].va_start), crate::csf::SHARED_REGION_VA);
        assert_eq!(Flashed::sim(), f);
        assert_eq!(
            &IMAGE[BUILD_AT + 9..BUILD_AT + 9 + GIT_SHA.len()],
            GIT_SHA.as_bytes()
        );
    }

    /// With `MALI_SIM_WRITE_FIRMWARE=<dir>`, writes [`IMAGE`] as
    /// `<dir>/arm/mali/arch10.8/mali_csffw.bin` (a firmware directory for a driver that reads
    /// files, and the seed of the `fw_image` fuzz corpus).
    #[test]
    fn the_sim_image_is_written_on_demand() {
        let Some(dir) = std::env::var_os("MALI_SIM_WRITE_FIRMWARE") else {
            return;
        };
        let d = std::path::Path::new(&dir).join("arm/mali/arch10.8");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("mali_csffw.bin"), IMAGE).unwrap();
    }

    #[test]
    fn bad_files_are_refused_without_panics() {
        assert_eq!(Flashed::new(&IMAGE[..10]), Err(FlashError::BadHeader));
        for cut in 0..IMAGE.len() {
            let _ = Flashed::new(&IMAGE[..cut]);
        }
        let mut b = IMAGE;
        for i in 0..b.len() {
            let old = b[i];
            b[i] = 0xff;
            let _ = Flashed::new(&b);
            b[i] = old;
        }
    }
}
