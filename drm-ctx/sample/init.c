// SPDX-License-Identifier: GPL-2.0 OR MIT
/* Boot hook of the gpukit sample driver (sample/kernel.rs): built in, so an initcall. */

#include <linux/init.h>

int gpukit_sample_init(void);

static int __init gpukit_sample_boot(void)
{
	return gpukit_sample_init();
}
late_initcall(gpukit_sample_boot);
