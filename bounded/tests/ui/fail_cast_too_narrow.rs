// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // A `u8` cannot hold 12 bits.
    let _ = Bounded::<u32, 12>::new::<1>().cast::<u8>();
}
