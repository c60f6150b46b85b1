// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Eight unsigned bits need a ninth bit for the sign.
    let _ = i8::from(Bounded::<u32, 8>::new::<1>());
}
