// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // 8 + 8 bits do not fit a `u8`.
    let _: Bounded<u8, 16> = Bounded::<u8, 8>::new::<1>().shl::<8, _>();
}
