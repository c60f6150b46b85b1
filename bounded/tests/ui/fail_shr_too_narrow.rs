// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Shifting 16 bits right by 8 leaves 8 bits: 7 are not enough.
    let _ = Bounded::<u32, 16>::new::<0xab00>().shr::<8, 7>();
}
