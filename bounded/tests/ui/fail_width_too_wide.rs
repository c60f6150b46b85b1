// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // A `u8` has no ninth bit, even for a value that would fit.
    let _ = Bounded::<u8, 9>::new::<1>();
}
