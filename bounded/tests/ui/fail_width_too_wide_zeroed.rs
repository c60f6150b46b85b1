// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // `Zeroable` can create the value, but nothing can read it.
    let z: Bounded<u16, 17> = pin_init::zeroed();
    let _ = z.get();
}
