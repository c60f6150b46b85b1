// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Probes for `bounded`.
