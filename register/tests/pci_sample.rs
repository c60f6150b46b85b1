// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The PCI configuration space registers of the kernel's Rust PCI sample driver, declared with
//! `register!` and read from a simulated configuration space.
//!
//! A configuration space supports 8-, 16- and 32-bit accesses but not 64-bit ones: the backend
//! below implements `IoCapable` for those three widths only, so a 64-bit register could not be
//! read from it (see `tests/ui/config_space_no_u64.rs`).

use register::io::{Io, IoCapable, IoKnownSize, MemRegion};
use register::register;

/// A 256-byte PCI configuration space with the header of the QEMU `pci-testdev` device.
struct ConfigSpace {
    mem: MemRegion<0x100>,
}

impl ConfigSpace {
    fn testdev() -> Self {
        let mem = MemRegion::new();
        // Vendor 0x1b36 (Red Hat), device 0x0005 (pci-testdev), revision 0, BAR0 and BAR1.
        mem.write16(0x1b36, 0x0);
        mem.write16(0x0005, 0x2);
        mem.write8(0x00, 0x8);
        mem.write32(0xfebf_1000, 0x10);
        mem.write32(0x0000_c001, 0x14);
        Self { mem }
    }
}

impl Io for ConfigSpace {
    fn addr(&self) -> usize {
        self.mem.addr()
    }

    fn maxsize(&self) -> usize {
        self.mem.maxsize()
    }
}

impl IoKnownSize for ConfigSpace {
    const MIN_SIZE: usize = 0x100;
}

macro_rules! forward_io_capable {
    ($($ty:ty),*) => {
        $(
            impl IoCapable<$ty> for ConfigSpace {
                unsafe fn io_read(&self, address: usize) -> $ty {
                    // SAFETY: Same region, same address: the caller's guarantee carries over.
                    unsafe { self.mem.io_read(address) }
                }

                unsafe fn io_write(&self, value: $ty, address: usize) {
                    // SAFETY: As above.
                    unsafe { self.mem.io_write(value, address) }
                }
            }
        )*
    };
}

forward_io_capable!(u8, u16, u32);

// The registers, as the sample driver declares them inside its function.
register! {
    @first_series
    VENDOR_ID(u16) @ 0x0 {
        15:0 vendor_id;
    }

    REVISION_ID(u8) @ 0x8 {
        7:0 revision_id;
    }

    BAR(u32)[6] @ 0x10 {
        31:0 value;
    }
}

#[test]
fn sample_reads_in_seed_style() {
    let config = ConfigSpace::testdev();
    assert_eq!(REVISION_ID::read(&&config).revision_id(), 0);
    assert_eq!(VENDOR_ID::read(&&config).vendor_id(), 0x1b36);
    assert_eq!(BAR::read(&&config, 0).value(), 0xfebf_1000);
    assert_eq!(BAR::read(&&config, 1).value(), 0xc001);
    assert!(BAR::try_read(&&config, 6).is_err());
}

#[test]
fn sample_reads_in_linux_7_2_style() {
    let config = ConfigSpace::testdev();
    assert_eq!(config.read(REVISION_ID).revision_id(), 0);
    assert_eq!(config.read(VENDOR_ID).vendor_id(), 0x1b36);
    assert_eq!(config.read(BAR::at(0)).value(), 0xfebf_1000);
    assert_eq!(
        format!("{:?}", config.read(VENDOR_ID)),
        "VENDOR_ID { <raw>: 0x1b36, vendor_id: 6966 }"
    );
    assert_eq!(config.try_read8(0x100), Err(register::Error::OutOfBounds));
}
