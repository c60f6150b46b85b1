// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The CSF firmware image: Arm's `mali_csffw.bin` format, as panthor reads it.
//!
//! An image is a 20-byte little-endian header followed by a list of entries:
//!
//! | offset | field          | meaning                                                  |
//! |--------|----------------|----------------------------------------------------------|
//! | 0      | `magic`        | [`MAGIC`]                                                |
//! | 4      | `minor`, `major` | format version (one byte each); `major` must be 0      |
//! | 6      | padding        |                                                          |
//! | 8      | `version_hash` | the firmware's version hash                              |
//! | 12     | padding        |                                                          |
//! | 16     | `size`         | bytes of the file that hold the header and the entries   |
//!
//! Each entry starts with a 32-bit word: bits 7:0 its type, bits 15:8 its size in bytes (this
//! word included, a multiple of 4), bit 30 "update", bit 31 "optional". An entry of a type the
//! driver does not know is an error unless it is optional; configuration, unit-test, trace
//! buffer and timeline entries are known and skipped.
//!
//! An *interface* entry ([`entry::IFACE`]) describes a *section*: a range of the MCU's
//! address space (4 KiB aligned), its protections and cache mode ([`flags`]), and the bytes of
//! the file that initialise its start (anywhere in the file, not only in the first `size`
//! bytes); the rest of the entry is the section's name. A section flagged
//! [`flags::ZERO`] has the rest of its range after the data zeroed; protected-mode sections
//! ([`flags::PROT`]) are not loaded. The section at [`SHARED_REGION_VA`] is the region driver
//! and firmware share: it must be flagged [`flags::SHARED`], and an image without it is
//! refused. A *build information* entry ([`entry::BUILD_INFO`]) points at a
//! `"git_sha: <sha>\0"` string of the file; it is informative only.
//!
//! [`Image::parse`] checks everything the driver relies on before anything is mapped and
//! returns an [`ImageError`] naming the first problem; it never panics and never allocates,
//! and borrows the file's bytes (sections' data and names are slices of it). Beyond what
//! panthor checks, it refuses sections that overlap in the MCU's address space and images with
//! more than [`MAX_SECTIONS`] sections.
//!
//! # Examples
//!
//! ```
//! use tyr::fw::image::{Image, ImageError};
//!
//! assert_eq!(Image::parse(&[0; 8]).err(), Some(ImageError::TooShort { len: 8 }));
//! let mut bad = [0u8; 20];
//! bad[..4].copy_from_slice(&0x1234_5678u32.to_le_bytes());
//! assert_eq!(Image::parse(&bad).err(), Some(ImageError::BadMagic(0x1234_5678)));
//! ```

use core::fmt;

/// The header's magic number.
pub const MAGIC: u32 = 0xc3f1_3a6e;
/// Size of the header.
pub const HEADER_SIZE: usize = 20;
/// The only major format version understood.
pub const SUPPORTED_MAJOR: u8 = 0;
/// MCU address of the section shared between the driver and the firmware.
pub const SHARED_REGION_VA: u32 = 0x0400_0000;
/// Most sections an image may have (Arm's images have eight).
pub const MAX_SECTIONS: usize = 32;
/// Alignment of sections' MCU addresses (the MCU VM's page size).
pub const SECTION_ALIGN: u32 = 0x1000;
/// Size of an interface entry's fixed part (flags, MCU range, data range), after its header
/// word.
pub const IFACE_BODY_SIZE: usize = 20;
/// Size of a build information entry's fixed part, after its header word.
pub const BUILD_INFO_BODY_SIZE: usize = 8;
/// What a build information string starts with.
pub const GIT_SHA_PREFIX: &[u8] = b"git_sha: ";

/// Entry types and header bits.
pub mod entry {
    /// A section of the MCU's address space.
    pub const IFACE: u8 = 0;
    /// Firmware configuration (skipped).
    pub const CONFIG: u8 = 1;
    /// Firmware unit tests (skipped).
    pub const FUTF_TEST: u8 = 2;
    /// A trace buffer (skipped).
    pub const TRACE_BUFFER: u8 = 3;
    /// Timeline metadata (skipped).
    pub const TIMELINE_METADATA: u8 = 4;
    /// Build information (the firmware's git sha).
    pub const BUILD_INFO: u8 = 6;
    /// Entry header bit: the entry may be updated.
    pub const UPDATE: u32 = 1 << 30;
    /// Entry header bit: a driver that does not know the entry's type may ignore it.
    pub const OPTIONAL: u32 = 1 << 31;

    /// The type of the entry whose header word is `ehdr`.
    pub const fn kind(ehdr: u32) -> u8 {
        ehdr as u8
    }

    /// The size in bytes (header word included) of the entry whose header word is `ehdr`.
    pub const fn size(ehdr: u32) -> usize {
        ((ehdr >> 8) & 0xff) as usize
    }

    /// The header word of an entry of type `kind` and `size` bytes (at most 255), with the
    /// header bits `bits` ([`UPDATE`], [`OPTIONAL`]).
    pub const fn header(kind: u8, size: u8, bits: u32) -> u32 {
        kind as u32 | (size as u32) << 8 | bits
    }
}

/// Section flags.
pub mod flags {
    /// The MCU may read the section.
    pub const RD: u32 = 1 << 0;
    /// The MCU may write the section.
    pub const WR: u32 = 1 << 1;
    /// The MCU may execute the section.
    pub const EX: u32 = 1 << 2;
    /// Cache mode field (bits 4:3).
    pub const CACHE_MODE_MASK: u32 = 3 << 3;
    /// Cache mode: not cached.
    pub const CACHE_MODE_NONE: u32 = 0 << 3;
    /// Cache mode: cached.
    pub const CACHE_MODE_CACHED: u32 = 1 << 3;
    /// Cache mode: uncached, coherent.
    pub const CACHE_MODE_UNCACHED_COHERENT: u32 = 2 << 3;
    /// Cache mode: cached, coherent.
    pub const CACHE_MODE_CACHED_COHERENT: u32 = 3 << 3;
    /// A protected-mode section (not loaded).
    pub const PROT: u32 = 1 << 5;
    /// The section is shared with the driver.
    pub const SHARED: u32 = 1 << 30;
    /// The section's range after its data is zeroed.
    pub const ZERO: u32 = 1 << 31;
    /// Every flag an image may use.
    pub const SUPPORTED: u32 = RD | WR | EX | CACHE_MODE_MASK | PROT | SHARED | ZERO;
}

/// Why an image is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageError {
    /// The file is shorter than the header.
    TooShort {
        /// Length of the file.
        len: usize,
    },
    /// The header's magic number is not [`MAGIC`].
    BadMagic(u32),
    /// The header's major version is not [`SUPPORTED_MAJOR`].
    UnsupportedVersion {
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
    },
    /// The header's size is larger than the file.
    Truncated {
        /// The header's size.
        size: u32,
        /// Length of the file.
        len: usize,
    },
    /// An entry's size is not a multiple of 4, or the entry does not start on one.
    EntryMisaligned {
        /// Offset of the entry in the file.
        offset: usize,
    },
    /// An entry is shorter than its header word, or than its type's fixed part.
    EntryTooShort {
        /// Offset of the entry in the file.
        offset: usize,
    },
    /// An entry (or its header word) runs past the header's size.
    EntryTooLong {
        /// Offset of the entry in the file.
        offset: usize,
    },
    /// A section's data ends before it starts.
    SectionDataReversed {
        /// Offset of the entry in the file.
        offset: usize,
    },
    /// A section's MCU range ends before it starts.
    SectionVaReversed {
        /// Offset of the entry in the file.
        offset: usize,
    },
    /// A section's data runs past the end of the file.
    SectionDataPastEnd {
        /// End of the data.
        end: u32,
        /// Length of the file.
        len: usize,
    },
    /// A section's MCU range is not aligned to [`SECTION_ALIGN`].
    SectionVaUnaligned {
        /// Start of the range.
        start: u32,
        /// End of the range.
        end: u32,
    },
    /// A section has more data than its MCU range holds.
    SectionDataLargerThanVa {
        /// Start of the section's MCU range.
        start: u32,
    },
    /// A section uses flags outside [`flags::SUPPORTED`].
    UnsupportedFlags(u32),
    /// The section at [`SHARED_REGION_VA`] is not flagged [`flags::SHARED`].
    SharedNotShared,
    /// Two sections overlap in the MCU's address space.
    Overlap {
        /// Start of the earlier section.
        first: u32,
        /// Start of the later section.
        second: u32,
    },
    /// The image has more than [`MAX_SECTIONS`] sections.
    TooManySections,
    /// An entry of an unknown type is not optional.
    UnknownMandatoryEntry(u8),
    /// No section covers [`SHARED_REGION_VA`].
    NoSharedRegion,
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ImageError::TooShort { len } => {
                write!(f, "firmware file too small for its header ({len} bytes)")
            }
            ImageError::BadMagic(m) => write!(f, "invalid firmware magic {m:#010x}"),
            ImageError::UnsupportedVersion { major, minor } => write!(
                f,
                "unsupported firmware header version {major}.{minor} (expected {SUPPORTED_MAJOR}.x)"
            ),
            ImageError::Truncated { size, len } => write!(
                f,
                "firmware image is truncated (header says {size} bytes, file has {len})"
            ),
            ImageError::EntryMisaligned { offset } => {
                write!(f, "firmware entry at {offset:#x} is not 32-bit aligned")
            }
            ImageError::EntryTooShort { offset } => {
                write!(f, "firmware entry at {offset:#x} is too short")
            }
            ImageError::EntryTooLong { offset } => {
                write!(f, "firmware entry at {offset:#x} runs past the image")
            }
            ImageError::SectionDataReversed { offset } => write!(
                f,
                "firmware section at entry {offset:#x}: data end before data start"
            ),
            ImageError::SectionVaReversed { offset } => write!(
                f,
                "firmware section at entry {offset:#x}: MCU range end before its start"
            ),
            ImageError::SectionDataPastEnd { end, len } => write!(
                f,
                "firmware section data ends at {end:#x}, past the file ({len:#x} bytes)"
            ),
            ImageError::SectionVaUnaligned { start, end } => write!(
                f,
                "firmware section MCU range {start:#x}-{end:#x} is not page aligned"
            ),
            ImageError::SectionDataLargerThanVa { start } => write!(
                f,
                "firmware section at {start:#x} has more data than its MCU range holds"
            ),
            ImageError::UnsupportedFlags(fl) => {
                write!(f, "firmware section with unsupported flags {fl:#x}")
            }
            ImageError::SharedNotShared => write!(
                f,
                "firmware section at {SHARED_REGION_VA:#x} must be shared"
            ),
            ImageError::Overlap { first, second } => {
                write!(f, "firmware sections at {first:#x} and {second:#x} overlap")
            }
            ImageError::TooManySections => {
                write!(f, "firmware has more than {MAX_SECTIONS} sections")
            }
            ImageError::UnknownMandatoryEntry(t) => {
                write!(f, "unsupported non-optional entry type {t} in firmware")
            }
            ImageError::NoSharedRegion => write!(f, "shared interface region not found"),
        }
    }
}

/// The image header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Minor format version.
    pub minor: u8,
    /// Major format version (always [`SUPPORTED_MAJOR`] in a parsed image).
    pub major: u8,
    /// The firmware's version hash.
    pub version_hash: u32,
    /// Bytes of the file that hold the header and the entries.
    pub size: u32,
}

/// How a section is cached (flags bits 4:3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheMode {
    /// Not cached.
    None,
    /// Cached.
    Cached,
    /// Not cached, coherent.
    UncachedCoherent,
    /// Cached, coherent.
    CachedCoherent,
}

/// A section of the MCU's address space, as the image describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Section<'a> {
    /// Flags ([`flags`]).
    pub flags: u32,
    /// First MCU address.
    pub va_start: u32,
    /// MCU address after the last byte.
    pub va_end: u32,
    /// Offset of the data in the file.
    pub data_offset: u32,
    /// The data that initialises the start of the section (at most its size).
    pub data: &'a [u8],
    /// The section's name (bytes, not necessarily text).
    pub name: &'a [u8],
}

impl Section<'_> {
    /// Size of the section in bytes (a multiple of [`SECTION_ALIGN`], not 0).
    pub const fn size(&self) -> u32 {
        self.va_end.wrapping_sub(self.va_start)
    }

    /// Whether the MCU may read it.
    pub const fn readable(&self) -> bool {
        self.flags & flags::RD != 0
    }

    /// Whether the MCU may write it.
    pub const fn writable(&self) -> bool {
        self.flags & flags::WR != 0
    }

    /// Whether the MCU may execute it.
    pub const fn executable(&self) -> bool {
        self.flags & flags::EX != 0
    }

    /// Whether it is the region shared with the driver.
    pub const fn shared(&self) -> bool {
        self.flags & flags::SHARED != 0
    }

    /// Whether the rest of the section after its data is zeroed.
    pub const fn zero_tail(&self) -> bool {
        self.flags & flags::ZERO != 0
    }

    /// How it is cached.
    pub const fn cache_mode(&self) -> CacheMode {
        match self.flags & flags::CACHE_MODE_MASK {
            flags::CACHE_MODE_NONE => CacheMode::None,
            flags::CACHE_MODE_CACHED => CacheMode::Cached,
            flags::CACHE_MODE_UNCACHED_COHERENT => CacheMode::UncachedCoherent,
            _ => CacheMode::CachedCoherent,
        }
    }
}

/// What the image's build information says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BuildInfo<'a> {
    /// The image has no build information entry.
    #[default]
    Absent,
    /// The entry points outside the file, or at too few bytes.
    Corrupt,
    /// The bytes do not start with [`GIT_SHA_PREFIX`]: metadata of another kind.
    Foreign,
    /// The git sha is not NUL-terminated.
    Unterminated,
    /// The git sha (the bytes after the prefix, up to the first NUL).
    GitSha(&'a [u8]),
}

/// A parsed, checked firmware image, borrowing the file's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image<'a> {
    bytes: &'a [u8],
    header: Header,
    sections: usize,
    protected: usize,
    build_info: BuildInfo<'a>,
    shared: Section<'a>,
}

/// Reads the little-endian word at `off` of `b` (`None` past the end).
fn le32(b: &[u8], off: usize) -> Option<u32> {
    let end = off.checked_add(4)?;
    let w = b.get(off..end)?;
    Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// One entry: its header word, offset and the bytes after the header word.
#[derive(Clone, Copy)]
struct Entry<'a> {
    ehdr: u32,
    offset: usize,
    body: &'a [u8],
}

/// Walks the entries of `bytes[HEADER_SIZE..size]`.
#[derive(Clone)]
struct Entries<'a> {
    table: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> Entries<'a> {
    fn new(bytes: &'a [u8], size: usize) -> Self {
        Entries {
            table: bytes.get(..size).unwrap_or(&[]),
            offset: HEADER_SIZE,
            failed: false,
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, ImageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.table.len() {
            return None;
        }
        let offset = self.offset;
        let r = (|| {
            let ehdr = le32(self.table, offset).ok_or(ImageError::EntryTooLong { offset })?;
            let size = entry::size(ehdr);
            if !offset.is_multiple_of(4) || !size.is_multiple_of(4) {
                return Err(ImageError::EntryMisaligned { offset });
            }
            if size < 4 {
                return Err(ImageError::EntryTooShort { offset });
            }
            let end = offset + size;
            let body = self
                .table
                .get(offset + 4..end)
                .ok_or(ImageError::EntryTooLong { offset })?;
            self.offset = end;
            Ok(Entry { ehdr, offset, body })
        })();
        self.failed = r.is_err();
        Some(r)
    }
}

/// What an interface entry turns out to be.
enum Iface<'a> {
    /// A section to load.
    Section(Section<'a>),
    /// A protected-mode section (ignored).
    Protected,
    /// A section of size 0 (ignored).
    Empty,
}

/// Checks the interface entry `e` of the file `bytes`.
fn iface<'a>(bytes: &'a [u8], e: &Entry<'a>) -> Result<Iface<'a>, ImageError> {
    let offset = e.offset;
    let b = e.body;
    let short = ImageError::EntryTooShort { offset };
    let word = |i: usize| le32(b, i * 4).ok_or(short);
    let (fl, va_start, va_end, d_start, d_end) = (word(0)?, word(1)?, word(2)?, word(3)?, word(4)?);
    if d_end < d_start {
        return Err(ImageError::SectionDataReversed { offset });
    }
    if va_end < va_start {
        return Err(ImageError::SectionVaReversed { offset });
    }
    if d_end as usize > bytes.len() {
        return Err(ImageError::SectionDataPastEnd {
            end: d_end,
            len: bytes.len(),
        });
    }
    if !va_start.is_multiple_of(SECTION_ALIGN) || !va_end.is_multiple_of(SECTION_ALIGN) {
        return Err(ImageError::SectionVaUnaligned {
            start: va_start,
            end: va_end,
        });
    }
    if fl & !flags::SUPPORTED != 0 {
        return Err(ImageError::UnsupportedFlags(fl));
    }
    if fl & flags::PROT != 0 {
        return Ok(Iface::Protected);
    }
    if va_start == SHARED_REGION_VA && fl & flags::SHARED == 0 {
        return Err(ImageError::SharedNotShared);
    }
    if d_end - d_start > va_end - va_start {
        return Err(ImageError::SectionDataLargerThanVa { start: va_start });
    }
    if va_end == va_start {
        return Ok(Iface::Empty);
    }
    let data =
        bytes
            .get(d_start as usize..d_end as usize)
            .ok_or(ImageError::SectionDataPastEnd {
                end: d_end,
                len: bytes.len(),
            })?;
    Ok(Iface::Section(Section {
        flags: fl,
        va_start,
        va_end,
        data_offset: d_start,
        data,
        name: b.get(IFACE_BODY_SIZE..).unwrap_or(&[]),
    }))
}

/// Reads the build information entry `e` of the file `bytes` (never an error, as panthor:
/// the information is not needed).
fn build_info<'a>(bytes: &'a [u8], e: &Entry<'a>) -> Result<BuildInfo<'a>, ImageError> {
    let short = ImageError::EntryTooShort { offset: e.offset };
    let (start, size) = (
        le32(e.body, 0).ok_or(short)? as usize,
        le32(e.body, 4).ok_or(short)? as usize,
    );
    let meta = match start
        .checked_add(size)
        .and_then(|end| bytes.get(start..end))
    {
        Some(m) if m.len() > GIT_SHA_PREFIX.len() => m,
        _ => return Ok(BuildInfo::Corrupt),
    };
    let Some(rest) = meta.strip_prefix(GIT_SHA_PREFIX) else {
        return Ok(BuildInfo::Foreign);
    };
    if meta.last() != Some(&0) {
        return Ok(BuildInfo::Unterminated);
    }
    let len = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
    Ok(BuildInfo::GitSha(&rest[..len]))
}

impl<'a> Image<'a> {
    /// Parses and checks the image in `bytes` (see the [module documentation](self)).
    ///
    /// # Errors
    ///
    /// The first problem found, as an [`ImageError`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ImageError> {
        let too_short = ImageError::TooShort { len: bytes.len() };
        let magic = le32(bytes, 0).ok_or(too_short)?;
        let size = le32(bytes, 16).ok_or(too_short)?;
        let (minor, major) = (bytes[4], bytes[5]);
        if magic != MAGIC {
            return Err(ImageError::BadMagic(magic));
        }
        if major != SUPPORTED_MAJOR {
            return Err(ImageError::UnsupportedVersion { major, minor });
        }
        if size as usize > bytes.len() {
            return Err(ImageError::Truncated {
                size,
                len: bytes.len(),
            });
        }
        let header = Header {
            minor,
            major,
            version_hash: le32(bytes, 8).ok_or(too_short)?,
            size,
        };
        let mut ranges = [(0u32, 0u32); MAX_SECTIONS];
        let mut sections = 0;
        let mut protected = 0;
        let mut info = BuildInfo::Absent;
        let mut shared = None;
        for e in Entries::new(bytes, size as usize) {
            let e = e?;
            match entry::kind(e.ehdr) {
                entry::IFACE => match iface(bytes, &e)? {
                    Iface::Section(s) => {
                        let (a, b) = (s.va_start, s.va_end);
                        let seen = ranges.get(..sections).unwrap_or(&[]);
                        if let Some(&(first, _)) = seen.iter().find(|&&(x, y)| a < y && x < b) {
                            return Err(ImageError::Overlap { first, second: a });
                        }
                        *ranges
                            .get_mut(sections)
                            .ok_or(ImageError::TooManySections)? = (a, b);
                        sections += 1;
                        if a == SHARED_REGION_VA {
                            shared = Some(s);
                        }
                    }
                    Iface::Protected => protected += 1,
                    Iface::Empty => {}
                },
                entry::BUILD_INFO => info = build_info(bytes, &e)?,
                entry::CONFIG
                | entry::FUTF_TEST
                | entry::TRACE_BUFFER
                | entry::TIMELINE_METADATA => {}
                _ if e.ehdr & entry::OPTIONAL != 0 => {}
                t => return Err(ImageError::UnknownMandatoryEntry(t)),
            }
        }
        Ok(Image {
            bytes,
            header,
            sections,
            protected,
            build_info: info,
            shared: shared.ok_or(ImageError::NoSharedRegion)?,
        })
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The sections to load (protected-mode and empty ones left out), in file order.
    pub fn sections(&self) -> impl Iterator<Item = Section<'a>> + Clone + 'a {
        let bytes = self.bytes;
        Entries::new(bytes, self.header.size as usize)
            .map_while(|e| e.ok())
            .filter(|e| entry::kind(e.ehdr) == entry::IFACE)
            .filter_map(move |e| match iface(bytes, &e) {
                Ok(Iface::Section(s)) => Some(s),
                _ => None,
            })
    }

    /// Number of [`sections`](Self::sections).
    pub fn section_count(&self) -> usize {
        self.sections
    }

    /// Number of protected-mode sections (not loaded).
    pub fn protected_count(&self) -> usize {
        self.protected
    }

    /// The section shared with the driver (at [`SHARED_REGION_VA`]).
    pub fn shared(&self) -> Section<'a> {
        self.shared
    }

    /// The build information (the last entry's, if several).
    pub fn build_info(&self) -> BuildInfo<'a> {
        self.build_info
    }

    /// The firmware's git sha as text, trimmed, if the build information has a readable one.
    pub fn git_sha(&self) -> Option<&'a str> {
        match self.build_info {
            BuildInfo::GitSha(s) => core::str::from_utf8(s).ok().map(str::trim),
            _ => None,
        }
    }
}

/// A builder of images for tests: header, entries and trailing data, all in one `Vec`.
#[cfg(any(test, feature = "std"))]
pub mod build {
    extern crate alloc;
    use alloc::vec::Vec;

    use super::{entry, HEADER_SIZE, MAGIC};

    /// Data placed after the entries: where in the entry body its two words go, the bytes,
    /// and whether the second word is the size (else the end offset).
    type Fixup = (usize, Vec<u8>, bool);

    /// An image under construction; entries are placed after the header in call order, data
    /// after the entries ([`finish`](Self::finish) fixes the offsets up).
    #[derive(Clone, Debug, Default)]
    pub struct Builder {
        /// Header fields: minor, major, version hash.
        pub version: (u8, u8, u32),
        /// The magic number written (normally [`MAGIC`]).
        pub magic: u32,
        entries: Vec<(u32, Vec<u8>, Option<Fixup>)>,
    }

    impl Builder {
        /// An empty image of format 0.3.
        pub fn new() -> Self {
            Builder {
                version: (3, 0, 0x0105_0000),
                magic: MAGIC,
                entries: Vec::new(),
            }
        }

        /// Adds an interface entry for `[va_start, va_end)` with `flags`, initialised with
        /// `data` (placed after the entries) and named `name`.
        pub fn section(mut self, flags: u32, va: (u32, u32), data: &[u8], name: &[u8]) -> Self {
            let mut body = Vec::new();
            for w in [flags, va.0, va.1, 0, 0] {
                body.extend_from_slice(&w.to_le_bytes());
            }
            body.extend_from_slice(name);
            self.entries.push((
                u32::from(entry::IFACE),
                body,
                Some((12, data.to_vec(), false)),
            ));
            self
        }

        /// Adds an entry of type `kind` with header bits `bits` and body `body` as is.
        pub fn raw(mut self, kind: u8, bits: u32, body: &[u8]) -> Self {
            self.entries
                .push((u32::from(kind) | bits, body.to_vec(), None));
            self
        }

        /// Adds a build information entry pointing at `text` (placed after the entries).
        pub fn build_info(mut self, text: &[u8]) -> Self {
            self.entries.push((
                u32::from(entry::BUILD_INFO) | entry::OPTIONAL,
                [0u8; 8].to_vec(),
                Some((0, text.to_vec(), true)),
            ));
            self
        }

        /// The image's bytes. An entry body whose length is not a multiple of 4 is padded with
        /// zeroes.
        pub fn finish(self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&self.magic.to_le_bytes());
            out.extend_from_slice(&[self.version.0, self.version.1, 0, 0]);
            out.extend_from_slice(&self.version.2.to_le_bytes());
            out.extend_from_slice(&[0; 8]);
            let mut fixups = Vec::new();
            for (kind, mut body, data) in self.entries {
                while body.len() % 4 != 0 {
                    body.push(0);
                }
                let size = (body.len() + 4).min(0xfc) as u32;
                let start = out.len();
                out.extend_from_slice(&(kind | size << 8).to_le_bytes());
                out.extend_from_slice(&body);
                if let Some((at, data, sized)) = data {
                    fixups.push((start + 4 + at, data, sized));
                }
            }
            let size = out.len() as u32;
            out[16..HEADER_SIZE].copy_from_slice(&size.to_le_bytes());
            for (at, data, sized) in fixups {
                // Data after the entries, 8-byte aligned.
                while out.len() % 8 != 0 {
                    out.push(0);
                }
                let s = out.len() as u32;
                let e = if sized {
                    data.len() as u32
                } else {
                    s + data.len() as u32
                };
                out.extend_from_slice(&data);
                out[at..at + 4].copy_from_slice(&s.to_le_bytes());
                out[at + 4..at + 8].copy_from_slice(&e.to_le_bytes());
            }
            out
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::build::Builder;
    use super::flags::*;
    use super::*;

    fn good() -> Builder {
        Builder::new()
            .section(RD | EX | CACHE_MODE_CACHED, (0x0, 0x1000), b"code", b"text")
            .section(
                RD | WR | ZERO | CACHE_MODE_CACHED,
                (0x1000, 0x3000),
                b"data",
                b"",
            )
            .section(
                RD | WR | SHARED | ZERO | CACHE_MODE_CACHED_COHERENT,
                (SHARED_REGION_VA, SHARED_REGION_VA + 0x1_0000),
                &[],
                b"",
            )
            .build_info(b"git_sha: 0123abcd \0")
    }

    #[test]
    fn a_good_image_parses() {
        let bytes = good().finish();
        let img = Image::parse(&bytes).unwrap();
        assert_eq!(img.header().minor, 3);
        assert_eq!(img.section_count(), 3);
        let s: std::vec::Vec<_> = img.sections().collect();
        assert_eq!(s[0].data, b"code");
        assert_eq!(s[0].name, b"text");
        assert!(s[0].executable() && !s[0].writable());
        assert_eq!(s[1].size(), 0x2000);
        assert!(img.shared().shared());
        assert_eq!(img.shared().cache_mode(), CacheMode::CachedCoherent);
        assert_eq!(img.git_sha(), Some("0123abcd"));
    }

    fn err(b: Builder) -> ImageError {
        Image::parse(&b.finish()).unwrap_err()
    }

    #[test]
    fn every_bad_image_has_its_error() {
        let mut b = good();
        b.magic = 0x1234;
        assert_eq!(err(b), ImageError::BadMagic(0x1234));
        let mut b = good();
        b.version.1 = 1;
        assert_eq!(
            err(b),
            ImageError::UnsupportedVersion { major: 1, minor: 3 }
        );
        let mut bytes = good().finish();
        let len = bytes.len();
        bytes[16..20].copy_from_slice(&(len as u32 + 4).to_le_bytes());
        assert_eq!(
            Image::parse(&bytes).unwrap_err(),
            ImageError::Truncated {
                size: len as u32 + 4,
                len
            }
        );
        assert_eq!(
            err(good().section(RD, (0x8000, 0x8800), b"", b"")),
            ImageError::SectionVaUnaligned {
                start: 0x8000,
                end: 0x8800
            }
        );
        assert_eq!(
            err(good().section(RD, (0x8000, 0x9000), &[1; 0x1001], b"")),
            ImageError::SectionDataLargerThanVa { start: 0x8000 }
        );
        assert_eq!(
            err(good().section(RD | 1 << 7, (0x8000, 0x9000), b"", b"")),
            ImageError::UnsupportedFlags(RD | 1 << 7)
        );
        assert_eq!(
            err(good().section(RD, (0x2000, 0x5000), b"", b"")),
            ImageError::Overlap {
                first: 0x1000,
                second: 0x2000
            }
        );
        assert_eq!(
            err(Builder::new().section(RD, (0, 0x1000), b"", b"")),
            ImageError::NoSharedRegion
        );
        assert_eq!(
            err(good().raw(9, 0, b"")),
            ImageError::UnknownMandatoryEntry(9)
        );
        assert_eq!(
            err(Builder::new().section(
                RD | WR,
                (SHARED_REGION_VA, SHARED_REGION_VA + 0x1000),
                b"",
                b""
            )),
            ImageError::SharedNotShared
        );
        // Optional unknown entries, known skipped ones and protected or empty sections pass.
        let b = good()
            .raw(9, entry::OPTIONAL, b"abcd")
            .raw(entry::CONFIG, 0, b"")
            .raw(entry::TRACE_BUFFER, 0, &[0; 12])
            .section(RD | PROT, (0x3000_0000, 0x3004_0000), b"", b"")
            .section(RD, (0x9000, 0x9000), b"", b"");
        let bytes = b.finish();
        let img = Image::parse(&bytes).unwrap();
        assert_eq!((img.section_count(), img.protected_count()), (3, 1));
    }

    #[test]
    fn bad_entries_and_data_are_refused() {
        let bytes = good().finish();
        // The first entry's data end moved past the file.
        let mut b = bytes.clone();
        let at = HEADER_SIZE + 4 + 16;
        b[at..at + 4].copy_from_slice(&(bytes.len() as u32 + 1).to_le_bytes());
        assert_eq!(
            Image::parse(&b).unwrap_err(),
            ImageError::SectionDataPastEnd {
                end: bytes.len() as u32 + 1,
                len: bytes.len()
            }
        );
        // Data end before start.
        let mut b = bytes.clone();
        b[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            Image::parse(&b),
            Err(ImageError::SectionDataReversed { .. })
        ));
        // An entry size that is not a multiple of 4, one of 0, one past the image.
        for (size, want) in [
            (
                0x21u32,
                ImageError::EntryMisaligned {
                    offset: HEADER_SIZE,
                },
            ),
            (
                0,
                ImageError::EntryTooShort {
                    offset: HEADER_SIZE,
                },
            ),
            (
                0xfc,
                ImageError::EntryTooLong {
                    offset: HEADER_SIZE,
                },
            ),
        ] {
            let mut b = good().finish();
            b[HEADER_SIZE + 1] = size as u8;
            assert_eq!(Image::parse(&b).unwrap_err(), want, "size {size:#x}");
        }
        // An interface entry too short for its fields.
        assert_eq!(
            err(Builder::new().raw(entry::IFACE, 0, &[0; 8])),
            ImageError::EntryTooShort {
                offset: HEADER_SIZE
            }
        );
        // Too many sections.
        let mut b = good();
        for n in 0..MAX_SECTIONS as u32 {
            b = b.section(
                RD,
                (0x10_0000 + n * 0x1000, 0x10_1000 + n * 0x1000),
                b"",
                b"",
            );
        }
        assert_eq!(err(b), ImageError::TooManySections);
        assert_eq!(
            Image::parse(&[0; 19]).unwrap_err(),
            ImageError::TooShort { len: 19 }
        );
    }

    #[test]
    fn build_info_problems_are_not_fatal() {
        let base = || {
            Builder::new().section(
                RD | WR | SHARED,
                (SHARED_REGION_VA, SHARED_REGION_VA + 0x1000),
                b"",
                b"",
            )
        };
        for (text, want) in [
            (&b"git_sha: "[..], BuildInfo::Corrupt),
            (b"version: 1\0", BuildInfo::Foreign),
            (b"git_sha: abc", BuildInfo::Unterminated),
            (b"git_sha: abc\0", BuildInfo::GitSha(b"abc")),
        ] {
            let bytes = base().build_info(text).finish();
            assert_eq!(Image::parse(&bytes).unwrap().build_info(), want);
        }
        let bytes = base().finish();
        assert_eq!(
            Image::parse(&bytes).unwrap().build_info(),
            BuildInfo::Absent
        );
    }

    /// Arm's image for arch 10.8 (Debian's `firmware-misc-nonfree`), when `TYR_FIRMWARE_DIR`
    /// holds it.
    #[test]
    #[cfg_attr(miri, ignore = "reads a file")]
    fn the_arm_image_parses() {
        let Some(dir) = std::env::var_os("TYR_FIRMWARE_DIR") else {
            std::println!("skipped: TYR_FIRMWARE_DIR is not set");
            return;
        };
        let path = std::path::Path::new(&dir).join("arm/mali/arch10.8/mali_csffw.bin");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let img = Image::parse(&bytes).unwrap();
        let shared = img.shared();
        assert_eq!(shared.va_start, SHARED_REGION_VA);
        // The details of the image Debian's firmware-misc-nonfree 20260916-1 carries (the
        // package the project fetches today); another version only has to parse.
        const KNOWN: &str = "95a25d71030715381f33105394285e1dcc860a65";
        if img.git_sha() != Some(KNOWN) {
            std::println!("an image other than {KNOWN}: its details are not checked");
            return;
        }
        let h = img.header();
        assert_eq!(
            (h.major, h.minor, h.version_hash, h.size),
            (0, 3, 0x0105_0000, 792)
        );
        assert_eq!((img.section_count(), img.protected_count()), (7, 1));
        assert_eq!((shared.va_start, shared.va_end), (0x0400_0000, 0x0401_0000));
        assert_eq!((shared.data_offset, shared.data.len()), (0x43000, 0x2000));
        assert_eq!(shared.flags, 0xc000_001b);
        let flags: std::vec::Vec<_> = img.sections().map(|s| s.flags).collect();
        assert_eq!(
            flags,
            [0x9, 0x9, 0x9, 0xd, 0x8000_000b, 0x8000_0009, 0xc000_001b]
        );
    }

    /// The parser never panics on a mutated image (a quick fuzz; `fuzz/` has the real one).
    #[test]
    #[cfg_attr(miri, ignore = "thousands of parses")]
    fn mutations_never_panic() {
        use proptest::prelude::*;
        let bytes = good().raw(9, entry::OPTIONAL, b"abcd").finish();
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(
                &proptest::collection::vec((0..bytes.len(), any::<u8>()), 1..8),
                |edits| {
                    let mut b = bytes.clone();
                    for (at, v) in edits {
                        b[at] = v;
                    }
                    if let Ok(img) = Image::parse(&b) {
                        for s in img.sections() {
                            prop_assert!(s.data.len() <= s.size() as usize);
                        }
                        prop_assert_eq!(img.sections().count(), img.section_count());
                    }
                    Ok(())
                },
            )
            .unwrap();
    }
}
