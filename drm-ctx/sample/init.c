// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Boot hook of the gpukit sample driver (sample/kernel.rs): built in, so an initcall. It
 * registers the sample device unless "gpukit.boot=" on the kernel command line names another
 * driver to boot with or another source of devices (Tyr's hook, tyr/src/kernel/boot.c,
 * answers to "gpukit.boot=tyr"; "gpukit.boot=board" leaves the devices to the device tree),
 * so that the driver a userspace test talks to is the only one and owns renderD128.
 */

#include <linux/init.h>
#include <linux/string.h>

int gpukit_sample_init(void);

static bool gpukit_sample_at_boot = true;

/* Returns 0 so that every other handler of "gpukit.boot=" sees it too. */
static int __init gpukit_sample_boot_param(char *value)
{
	gpukit_sample_at_boot = !strcmp(value, "sample");
	return 0;
}
__setup("gpukit.boot=", gpukit_sample_boot_param);

static int __init gpukit_sample_boot(void)
{
	if (!gpukit_sample_at_boot)
		return 0;
	return gpukit_sample_init();
}
late_initcall(gpukit_sample_boot);
