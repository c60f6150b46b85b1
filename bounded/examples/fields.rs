// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Decoding and building a packed register value with `Bounded`.
//!
//! Arm Mali GPUs identify themselves through the 32-bit `GPU_ID` register, which packs seven
//! fields: architecture major (bits 31..28), minor (27..24) and revision (23..20), product major
//! (19..16), and the version major (15..12), minor (11..4) and status (3..0). This example reads
//! the fields out as `Bounded` values (their widths are part of their types), prints them, builds
//! the register word back from the fields without a single mask, and shows that a value too wide
//! for its field is refused instead of spilling into its neighbour.

use bounded::{Bounded, TryIntoBounded};

/// The fields of `GPU_ID`, each typed with its width in bits.
#[derive(Debug, Clone, Copy, PartialEq)]
struct GpuId {
    arch_major: Bounded<u32, 4>,
    arch_minor: Bounded<u32, 4>,
    arch_rev: Bounded<u32, 4>,
    product_major: Bounded<u32, 4>,
    version_major: Bounded<u32, 4>,
    version_minor: Bounded<u32, 8>,
    version_status: Bounded<u32, 4>,
}

impl GpuId {
    fn decode(raw: u32) -> Self {
        // The top field needs no mask at all: 32 bits shifted right by 28 leave 4.
        let word = Bounded::<u32, 32>::from(raw);
        Self {
            arch_major: word.shr::<28, _>(),
            // Masked fields: `from_expr` checks the range, which the optimiser proves.
            arch_minor: Bounded::from_expr((raw >> 24) & 0xf),
            arch_rev: Bounded::from_expr((raw >> 20) & 0xf),
            product_major: Bounded::from_expr((raw >> 16) & 0xf),
            version_major: Bounded::from_expr((raw >> 12) & 0xf),
            version_minor: Bounded::from_expr((raw >> 4) & 0xff),
            version_status: Bounded::from_expr(raw & 0xf),
        }
    }

    /// Packs the fields: `shl::<S, R>` only builds if `R` holds every shifted bit.
    fn encode(self) -> u32 {
        self.arch_major.shl::<28, 32>().get()
            | self.arch_minor.shl::<24, 28>().get()
            | self.arch_rev.shl::<20, 24>().get()
            | self.product_major.shl::<16, 20>().get()
            | self.version_major.shl::<12, 16>().get()
            | self.version_minor.shl::<4, 12>().get()
            | self.version_status.get()
    }
}

fn main() -> Result<(), String> {
    // Mali-G610 as found on RK3588 boards (product id 0xa867, r0p0 status 5).
    let raw = 0xa867_0005u32;
    let id = GpuId::decode(raw);
    println!("GPU_ID {raw:#010x} decodes to:");
    println!(
        "  architecture {}.{}.{}, product major {}, version r{}p{} status {:#x}",
        id.arch_major,
        id.arch_minor,
        id.arch_rev,
        id.product_major,
        id.version_major,
        id.version_minor,
        id.version_status
    );
    let expect = [(id.arch_major.get(), 10), (id.arch_minor.get(), 8)];
    if expect.iter().any(|(got, want)| got != want) || id.product_major != 7 {
        return Err(format!("unexpected decode of {raw:#x}: {id:?}"));
    }

    // Build a word from fields, then check that decode and encode are inverse.
    let built = GpuId {
        arch_minor: Bounded::<u32, 4>::new::<2>(),
        version_minor: Bounded::<u32, 8>::new::<0x3c>(),
        ..id
    };
    let word = built.encode();
    println!("built from fields (arch minor 2, version minor 0x3c): {word:#010x}");
    for sample in [raw, word, 0, u32::MAX, 0x1234_5678, 0x9093_0011] {
        let back = GpuId::decode(sample).encode();
        if back != sample {
            return Err(format!("round trip {sample:#x} -> {back:#x}"));
        }
    }
    if GpuId::decode(word) != built || word & 0x0f00_0ff0 != 0x0200_03c0 {
        return Err(format!("built word {word:#x} does not hold its fields"));
    }
    println!("decode/encode round trip holds for 6 sample words");

    // Run-time values are checked once, where they enter the typed world.
    for requested in [9u32, 16, 255] {
        let checked = Bounded::<u32, 4>::try_new(requested);
        println!("  try_new::<4 bits>({requested}) -> {checked:?}");
        if checked.is_some() != (requested < 16) {
            return Err(format!("try_new({requested}) gave {checked:?}"));
        }
    }
    let minor: Option<Bounded<u32, 8>> = 0x1_00u64.try_into_bounded();
    println!("  0x100u64 into an 8-bit field -> {minor:?}");
    if minor.is_some() {
        return Err("0x100 accepted into 8 bits".into());
    }

    // Conversions exist exactly where they are lossless.
    let status_u8 = u8::from(id.version_status); // 4 bits always fit a u8
    let narrow: Bounded<u8, 8> = built.version_minor.cast(); // same width, smaller backing type
    let wide: Bounded<u32, 12> = id.arch_rev.extend(); // more room, same value
    let shrunk = wide.try_shrink::<3>(); // 6 needs 3 bits: fits
    println!(
        "conversions: u8::from(status) = {status_u8}, cast::<u8> = {narrow:#x}, \
         extend::<12> = {wide}, try_shrink::<3> = {shrunk:?}"
    );
    if u32::from(status_u8) != id.version_status.get()
        || u32::from(narrow.get()) != built.version_minor.get()
        || wide != id.arch_rev
        || shrunk.is_none()
    {
        return Err("a lossless conversion changed the value".into());
    }
    println!("all checks passed");
    Ok(())
}
