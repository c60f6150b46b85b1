// SPDX-License-Identifier: GPL-2.0 OR MIT

use bounded::Bounded;

fn main() {
    // Seven bits cannot hold every `u8`.
    let _ = Bounded::<u32, 7>::from(3u8);
}
