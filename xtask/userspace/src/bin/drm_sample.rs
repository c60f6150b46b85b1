// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `/init` of the test VM for the drm-ctx sample driver (`gpukit_sample`): checks its uAPI and
//! the DRM core around it through `/dev/dri/renderD128` with raw ioctls.
//!
//! The driver's uAPI (DRM command base 0x40):
//!
//! | command | nr | argument (16 bytes) | errors |
//! |---|---|---|---|
//! | `BO_CREATE` | 0x40 | `u64 size; u32 flags; u32 handle (out)` | size 0, flags: `EINVAL`; size > 1 GiB: `EOVERFLOW` |
//! | `BO_MMAP_OFFSET` | 0x41 | `u32 handle; u32 pad; u64 offset (out)` | pad: `EINVAL`; unknown handle: `ENOENT` |
//! | `SUBMIT` | 0x42 | `u32 flags; u32 syncobj (out); u64 seqno (out)` | flags: `EINVAL` |
//!
//! What the DRM core does with argument sizes (`drm_ioctl()` in `drivers/gpu/drm/drm_ioctl.c`):
//! it copies in and out exactly the size the *command* encodes, and hands the driver a buffer of
//! the driver's size, zero-filled past what was copied in. An older, shorter struct therefore
//! works (its missing fields read as 0) and nothing is written past it; a newer, longer one works
//! too, its extra bytes are neither seen by the driver nor changed on the way back.

use std::io::Write;
use std::mem::size_of;

use gpukit_userspace_tests::drm::{self, Drm};
use gpukit_userspace_tests::report::{expect_eq, Report};
use gpukit_userspace_tests::sys::{self, Errno, Mapping, Plain};
use gpukit_userspace_tests::{init, ioc};

/// The name in the check lines.
const PROGRAM: &str = "drm_sample";

/// What `DRM_IOCTL_VERSION` must report.
const NAME: &str = "gpukit_sample";
const DESC: &str = "gpukit drm-ctx sample driver";
const VERSION: (i32, i32, i32) = (1, 0, 0);

/// `DRM_IOCTL_SAMPLE_BO_CREATE`'s argument.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct BoCreate {
    size: u64,
    flags: u32,
    handle: u32,
}

/// `DRM_IOCTL_SAMPLE_BO_MMAP_OFFSET`'s argument.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct BoMmapOffset {
    handle: u32,
    pad: u32,
    offset: u64,
}

/// `DRM_IOCTL_SAMPLE_SUBMIT`'s argument.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Submit {
    flags: u32,
    syncobj: u32,
    seqno: u64,
}

// SAFETY: `#[repr(C)]` structs of integers without padding (16 bytes each, asserted below).
unsafe impl Plain for BoCreate {}
// SAFETY: as above.
unsafe impl Plain for BoMmapOffset {}
// SAFETY: as above.
unsafe impl Plain for Submit {}

const _: () = {
    assert!(size_of::<BoCreate>() == 16);
    assert!(size_of::<BoMmapOffset>() == 16);
    assert!(size_of::<Submit>() == 16);
};

const BO_CREATE: u32 = drm::driver_iowr(0x00, size_of::<BoCreate>());
const BO_MMAP_OFFSET: u32 = drm::driver_iowr(0x01, size_of::<BoMmapOffset>());
const SUBMIT: u32 = drm::driver_iowr(0x02, size_of::<Submit>());

/// The largest buffer object the driver creates.
const MAX_BO_SIZE: u64 = 1 << 30;
/// Size of the buffer object the program maps (two pages).
const BO_SIZE: u64 = 8192;
/// How long a wait on a job's syncobj may take before the check fails.
const WAIT_NS: i64 = 5_000_000_000;
/// A handle no call ever returned.
const BOGUS_HANDLE: u32 = 0xdead;

fn main() {
    init::run(PROGRAM, checks)
}

fn checks<W: Write>(r: &mut Report<W>) {
    let dev = match Drm::open(drm::RENDER_NODE) {
        Ok(dev) => {
            r.ok("open /dev/dri/renderD128");
            r.note("opened /dev/dri/renderD128");
            dev
        }
        Err(e) => {
            r.fail(
                "open /dev/dri/renderD128",
                format!("{e}; {}", drm::list_dev_dri()),
            );
            return;
        }
    };
    version(r, &dev);
    buffer_object(r, &dev);
    submits(r, &dev);
    core_syncobj(r, &dev);
    bad_input(r, &dev);
    struct_sizes(r, &dev);
    primary_node(r);
}

/// `struct drm_mode_create_dumb` (the DRM core's, for `DRM_IOCTL_MODE_CREATE_DUMB`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct ModeCreateDumb {
    height: u32,
    width: u32,
    bpp: u32,
    flags: u32,
    handle: u32,
    pitch: u32,
    size: u64,
}

// SAFETY: `#[repr(C)]`, integers only, no padding (32 bytes).
unsafe impl Plain for ModeCreateDumb {}

/// The primary node: the driver's ioctls work there too, and dumb buffers, which the shmem
/// helpers would make as objects of another type than the driver's, are refused (drm-ctx's
/// kernel backend takes `dumb_create` out of the driver vtable).
fn primary_node<W: Write>(r: &mut Report<W>) {
    let dev = match Drm::open("/dev/dri/card0") {
        Ok(dev) => {
            r.ok("open /dev/dri/card0 (the primary node)");
            dev
        }
        Err(e) => {
            r.fail("open /dev/dri/card0 (the primary node)", e);
            return;
        }
    };
    r.check(
        "BO_CREATE on the primary node gives a non-zero handle",
        match bo_create(&dev, 4096, 0) {
            Ok(a) if a.handle != 0 => Ok(()),
            Ok(a) => Err(format!("handle {}", a.handle)),
            Err(e) => Err(format!("{e}")),
        },
    );
    const MODE_CREATE_DUMB: u32 = ioc::iowr(drm::IOCTL_BASE, 0xB2, size_of::<ModeCreateDumb>());
    let mut dumb = ModeCreateDumb {
        height: 64,
        width: 64,
        bpp: 32,
        ..ModeCreateDumb::default()
    };
    r.check(
        "MODE_CREATE_DUMB on the primary node fails with ENOSYS (no foreign object types)",
        expect_errno(dev.ioctl(MODE_CREATE_DUMB, &mut dumb), libc::ENOSYS),
    );
}

/// `Ok` if the call failed with `want`.
fn expect_errno(got: Result<i64, Errno>, want: i32) -> Result<(), String> {
    match got {
        Err(e) if e.0 == want => Ok(()),
        Err(e) => Err(format!("expected {}, got {e}", Errno(want))),
        Ok(v) => Err(format!("expected {}, got success ({v})", Errno(want))),
    }
}

/// `Ok` if the call returned 0.
fn expect_zero(got: Result<i64, Errno>) -> Result<(), String> {
    match got {
        Ok(0) => Ok(()),
        Ok(v) => Err(format!("expected 0, got {v}")),
        Err(e) => Err(format!("expected 0, got {e}")),
    }
}

fn bo_create(dev: &Drm, size: u64, flags: u32) -> Result<BoCreate, Errno> {
    let mut arg = BoCreate {
        size,
        flags,
        handle: 0,
    };
    dev.ioctl(BO_CREATE, &mut arg).map(|_| arg)
}

fn mmap_offset(dev: &Drm, handle: u32, pad: u32) -> Result<u64, Errno> {
    let mut arg = BoMmapOffset {
        handle,
        pad,
        offset: 0,
    };
    dev.ioctl(BO_MMAP_OFFSET, &mut arg).map(|_| arg.offset)
}

fn submit(dev: &Drm, flags: u32) -> Result<Submit, Errno> {
    let mut arg = Submit {
        flags,
        ..Submit::default()
    };
    dev.ioctl(SUBMIT, &mut arg).map(|_| arg)
}

fn version<W: Write>(r: &mut Report<W>, dev: &Drm) {
    match dev.version() {
        Ok(v) => {
            r.check(
                &format!("VERSION reports the name {NAME}"),
                expect_eq("name", v.name.as_str(), NAME),
            );
            r.check(
                &format!("VERSION reports the description \"{DESC}\""),
                expect_eq("desc", v.desc.as_str(), DESC),
            );
            r.check(
                "VERSION reports version 1.0.0",
                expect_eq("major.minor.patchlevel", v.number, VERSION),
            );
        }
        Err(e) => r.fail("VERSION (two passes: lengths, then strings)", e),
    }
}

/// The word written at `index` of the mapping: different in every word and in both pages.
fn pattern(index: usize) -> u64 {
    0x6770_756b_0000_0000 ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `Ok` if every word of `m` holds [`pattern`].
fn holds_pattern(m: &Mapping) -> Result<(), String> {
    for i in 0..m.len() / 8 {
        let got = m.read_u64(i);
        if got != pattern(i) {
            return Err(format!(
                "word {i} (byte {}): expected {:#018x}, got {got:#018x}",
                i * 8,
                pattern(i)
            ));
        }
    }
    Ok(())
}

fn buffer_object<W: Write>(r: &mut Report<W>, dev: &Drm) {
    const CREATE: &str = "BO_CREATE of 8192 bytes gives a non-zero handle";
    let handle = match bo_create(dev, BO_SIZE, 0) {
        Ok(bo) if bo.handle != 0 => {
            r.ok(CREATE);
            bo.handle
        }
        Ok(bo) => return r.fail(CREATE, format!("got handle 0 ({bo:?})")),
        Err(e) => return r.fail(CREATE, e),
    };

    const OFFSET: &str = "BO_MMAP_OFFSET gives a non-zero page-aligned offset";
    let page = sys::page_size();
    let offset = match mmap_offset(dev, handle, 0) {
        Ok(o) if o != 0 && o % page == 0 => {
            r.ok(OFFSET);
            Some(o)
        }
        Ok(o) => {
            r.fail(OFFSET, format!("got {o:#x} (page size {page:#x})"));
            None
        }
        Err(e) => {
            r.fail(OFFSET, e);
            None
        }
    };

    if let Some(offset) = offset {
        const WRITE: &str =
            "mmap of the BO (8192 bytes, read-write, shared): a pattern written over both pages reads back";
        const AGAIN: &str = "munmap, mmap again: the BO still holds the pattern";
        match Mapping::shared(dev.file(), BO_SIZE as usize, offset) {
            Ok(m) => {
                for i in 0..m.len() / 8 {
                    m.write_u64(i, pattern(i));
                }
                r.check(WRITE, holds_pattern(&m));
                let again = m
                    .unmap()
                    .map_err(|e| format!("munmap: {e}"))
                    .and_then(|()| {
                        Mapping::shared(dev.file(), BO_SIZE as usize, offset)
                            .map_err(|e| format!("second mmap: {e}"))
                    })
                    .and_then(|m| holds_pattern(&m));
                r.check(AGAIN, again);
            }
            Err(e) => {
                r.fail(WRITE, format!("mmap at offset {offset:#x}: {e}"));
                r.fail(AGAIN, "no first mapping");
            }
        }
    }

    r.check(
        "BO_MMAP_OFFSET with pad 1 fails with EINVAL",
        expect_errno(mmap_offset(dev, handle, 1).map(|_| 0), libc::EINVAL),
    );
    r.check(
        "GEM_CLOSE of the BO returns 0",
        expect_zero(dev.gem_close(handle)),
    );
    r.check(
        "GEM_CLOSE of the closed BO fails with EINVAL",
        expect_errno(dev.gem_close(handle), libc::EINVAL),
    );
    r.check(
        "BO_MMAP_OFFSET of the closed BO fails with ENOENT",
        expect_errno(mmap_offset(dev, handle, 0).map(|_| 0), libc::ENOENT),
    );
}

fn submits<W: Write>(r: &mut Report<W>, dev: &Drm) {
    let mut jobs = Vec::new();
    for which in ["first", "second"] {
        let check = format!("the {which} SUBMIT returns a non-zero syncobj");
        match submit(dev, 0) {
            Ok(s) if s.syncobj != 0 => {
                r.ok(&check);
                jobs.push(s);
            }
            Ok(s) => r.fail(&check, format!("got syncobj 0 ({s:?})")),
            Err(e) => r.fail(&check, e),
        }
    }
    let [a, b] = jobs[..] else { return };
    let waited = dev.syncobj_wait(&[a.syncobj, b.syncobj], drm::SYNCOBJ_WAIT_ALL, WAIT_NS);
    r.check(
        "SYNCOBJ_WAIT (WAIT_ALL, 5 s) on both SUBMIT syncobjs returns 0",
        expect_zero(waited),
    );
    let increasing = if a.seqno < b.seqno {
        Ok(())
    } else {
        Err(format!("got {} then {}", a.seqno, b.seqno))
    };
    r.check(
        "the second SUBMIT's seqno is larger than the first's",
        increasing,
    );
    let destroyed = expect_zero(dev.syncobj_destroy(a.syncobj))
        .and_then(|()| expect_zero(dev.syncobj_destroy(b.syncobj)));
    r.check("SYNCOBJ_DESTROY of both syncobjs returns 0", destroyed);
    r.check(
        "SYNCOBJ_DESTROY of a destroyed syncobj fails with EINVAL",
        expect_errno(dev.syncobj_destroy(a.syncobj), libc::EINVAL),
    );
}

fn core_syncobj<W: Write>(r: &mut Report<W>, dev: &Drm) {
    let result = dev
        .syncobj_create(drm::SYNCOBJ_CREATE_SIGNALED)
        .map_err(|e| format!("SYNCOBJ_CREATE: {e}"))
        .and_then(|h| {
            expect_zero(dev.syncobj_wait(&[h], drm::SYNCOBJ_WAIT_ALL, WAIT_NS))
                .map_err(|e| format!("SYNCOBJ_WAIT: {e}"))?;
            expect_zero(dev.syncobj_destroy(h)).map_err(|e| format!("SYNCOBJ_DESTROY: {e}"))
        });
    r.check(
        "a signalled SYNCOBJ_CREATE, SYNCOBJ_WAIT and SYNCOBJ_DESTROY return 0",
        result,
    );
}

fn bad_input<W: Write>(r: &mut Report<W>, dev: &Drm) {
    let unknown = drm::driver_iowr(0x0f, 16);
    r.check(
        "an unknown driver ioctl (nr 0x4f) fails with EINVAL",
        expect_errno(dev.ioctl(unknown, &mut [0u64; 2]), libc::EINVAL),
    );
    r.check(
        "an ioctl of another type ('x') fails with ENOTTY",
        expect_errno(
            dev.ioctl(ioc::iowr(b'x', 0x40, 16), &mut [0u64; 2]),
            libc::ENOTTY,
        ),
    );
    let create = |size, flags| bo_create(dev, size, flags).map(|_| 0);
    r.check(
        "BO_CREATE of 0 bytes fails with EINVAL",
        expect_errno(create(0, 0), libc::EINVAL),
    );
    r.check(
        "BO_CREATE with flags 1 fails with EINVAL",
        expect_errno(create(4096, 1), libc::EINVAL),
    );
    r.check(
        "BO_CREATE of 1 TiB fails with EOVERFLOW",
        expect_errno(create(1 << 40, 0), libc::EOVERFLOW),
    );
    r.check(
        "BO_CREATE of 1 GiB + 1 byte fails with EOVERFLOW",
        expect_errno(create(MAX_BO_SIZE + 1, 0), libc::EOVERFLOW),
    );
    r.check(
        "BO_MMAP_OFFSET of an unknown handle fails with ENOENT",
        expect_errno(mmap_offset(dev, BOGUS_HANDLE, 0).map(|_| 0), libc::ENOENT),
    );
    r.check(
        "SUBMIT with flags 1 fails with EINVAL",
        expect_errno(submit(dev, 1).map(|_| 0), libc::EINVAL),
    );
    // SAFETY: nothing is ever mapped at 0x10 (below `mmap_min_addr`): the kernel's copy from
    // the pointer fails and nothing of this program is touched.
    let faulted = unsafe { sys::ioctl_raw(dev.file(), BO_CREATE, 0x10 as *mut libc::c_void) };
    r.check(
        "BO_CREATE with the argument at an unmapped address fails with EFAULT",
        expect_errno(faulted, libc::EFAULT),
    );
    r.check(
        "SYNCOBJ_WAIT on an unknown syncobj fails with ENOENT",
        expect_errno(
            dev.syncobj_wait(&[BOGUS_HANDLE], drm::SYNCOBJ_WAIT_ALL, WAIT_NS),
            libc::ENOENT,
        ),
    );
}

fn struct_sizes<W: Write>(r: &mut Report<W>, dev: &Drm) {
    const CANARY: u64 = 0xc0ff_ee00_dead_beef;
    // An older struct of 8 bytes (only `size`): the core zero-fills `flags` for the driver and
    // copies 8 bytes back, so the handle is not seen (the object lives until the file closes).
    let mut short = [BO_SIZE, CANARY];
    let got = dev.ioctl(ioc::with_size(BO_CREATE, 8), &mut short);
    let result = expect_zero(got).and_then(|()| {
        expect_eq("the 8 bytes after the struct", short[1], CANARY)
            .and_then(|()| expect_eq("size", short[0], BO_SIZE))
    });
    r.check(
        "BO_CREATE with an 8-byte struct (size only) returns 0 and writes nothing past it",
        result,
    );

    // A newer struct of 24 bytes: the driver sees the first 16, the 8 extra bytes come back as
    // they went in.
    const TAIL: u64 = 0x1122_3344_5566_7788;
    let mut long = [4096u64, 0, TAIL];
    let got = dev.ioctl(ioc::with_size(BO_CREATE, 24), &mut long);
    let handle = (long[1] >> 32) as u32;
    let result = expect_zero(got).and_then(|()| {
        if handle == 0 {
            return Err("got handle 0".into());
        }
        expect_eq("the 8 extra bytes", long[2], TAIL)?;
        expect_zero(dev.gem_close(handle)).map_err(|e| format!("GEM_CLOSE of its handle: {e}"))
    });
    r.check(
        "BO_CREATE with a 24-byte struct (8 non-zero extra bytes) returns 0 and a handle, extra bytes kept",
        result,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_ioctl_numbers() {
        assert_eq!(BO_CREATE, 0xC010_6440);
        assert_eq!(BO_MMAP_OFFSET, 0xC010_6441);
        assert_eq!(SUBMIT, 0xC010_6442);
        assert_eq!(ioc::with_size(BO_CREATE, 8), 0xC008_6440);
    }

    #[test]
    fn the_pattern_differs_between_words_and_pages() {
        let words: std::collections::BTreeSet<u64> = (0..1024).map(pattern).collect();
        assert_eq!(words.len(), 1024);
        assert_ne!(pattern(0), pattern(512));
    }

    #[test]
    fn errno_expectations() {
        assert_eq!(expect_errno(Err(Errno(libc::EINVAL)), libc::EINVAL), Ok(()));
        assert_eq!(
            expect_errno(Ok(0), libc::EINVAL).unwrap_err(),
            "expected EINVAL (22), got success (0)"
        );
        assert_eq!(
            expect_errno(Err(Errno(libc::ENOENT)), libc::EINVAL).unwrap_err(),
            "expected EINVAL (22), got ENOENT (2)"
        );
        assert_eq!(expect_zero(Ok(0)), Ok(()));
        assert!(expect_zero(Err(Errno(libc::EFAULT))).is_err());
    }

    #[test]
    fn without_the_device_the_program_fails_cleanly() {
        if std::path::Path::new(drm::RENDER_NODE).exists() {
            return;
        }
        let mut r = Report::new(PROGRAM, Vec::new());
        checks(&mut r);
        r.summary();
        let text = String::from_utf8(r.into_inner()).unwrap();
        assert!(text.starts_with("userspace: drm_sample: FAIL open /dev/dri/renderD128: ENOENT"));
        assert!(text.ends_with("userspace: drm_sample: summary: 0 passed, 1 failed\n"));
    }
}
