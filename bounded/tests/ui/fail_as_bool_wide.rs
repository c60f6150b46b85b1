// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    let _ = Bounded::<u32, 2>::new::<1>().as_bool();
}
