// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Shifting 8 bits left by 8 needs 16 bits: 15 are not enough.
    let _ = Bounded::<u32, 8>::new::<0xab>().shl::<8, 15>();
}
