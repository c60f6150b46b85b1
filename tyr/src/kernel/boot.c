// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Boot hook of Tyr in the test kernel (kernel/boot.rs): registers the platform driver "tyr",
 * which binds to a device-tree node it matches (arm64's board, see xtask/src/dt.rs), and, with
 * "gpukit.boot=tyr" on the command line (x86_64, which has no device tree), a platform device
 * of that name, which the platform bus binds to it by name. It publishes the kernel backend's
 * leak counters as
 * /sys/kernel/tyr/live ("devices N bos N blocks N gpu_pages N") and the least kernel stack
 * left where the simulated GPU ran as /sys/kernel/tyr/stack ("least_left N"). Also the stack
 * probe the kernel backend calls (gpukit_tyr_stack_left).
 */

#include <linux/device.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/kobject.h>
#include <linux/platform_device.h>
#include <linux/sched/task_stack.h>
#include <linux/string.h>
#include <linux/sysfs.h>

int gpukit_tyr_register_driver(void);
void gpukit_tyr_live_counts(size_t *out);
size_t gpukit_tyr_stack_least_left(void);
unsigned long gpukit_tyr_stack_left(void);

/*
 * The simulated GPU raising one of its lines at the interrupt controller, as the wire of a
 * board would: the interrupt becomes pending there and reaches its handler.
 */
int gpukit_tyr_irq_set_pending(unsigned int irq);
int gpukit_tyr_irq_set_pending(unsigned int irq)
{
	return irq_set_irqchip_state(irq, IRQCHIP_STATE_PENDING, true);
}

/* Says which device-tree node the platform bus bound Tyr to, by its full path. */
void gpukit_tyr_log_of_match(struct device *dev, const char *compatible);
void gpukit_tyr_log_of_match(struct device *dev, const char *compatible)
{
	dev_info(dev, "bound to %pOF by OF match (%s)\n", dev->of_node, compatible);
}

/*
 * Bytes left below this function's frame on the current task's kernel stack; ULONG_MAX when
 * running on another stack (an interrupt's), which says nothing of the task's.
 */
unsigned long gpukit_tyr_stack_left(void)
{
	unsigned long here = (unsigned long)__builtin_frame_address(0);

	if (!object_is_on_stack((void *)here))
		return ULONG_MAX;
	return here - (unsigned long)task_stack_page(current);
}

static bool gpukit_tyr_at_boot;

/* Returns 0 so that every other handler of "gpukit.boot=" (the sample driver's) sees it too. */
static int __init gpukit_tyr_boot_param(char *value)
{
	gpukit_tyr_at_boot = !strcmp(value, "tyr");
	return 0;
}
__setup("gpukit.boot=", gpukit_tyr_boot_param);

static ssize_t live_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	size_t c[4];

	gpukit_tyr_live_counts(c);
	return sysfs_emit(buf, "devices %zu bos %zu blocks %zu gpu_pages %zu\n", c[0], c[1], c[2],
			  c[3]);
}
static struct kobj_attribute gpukit_tyr_live_attr = __ATTR_RO(live);

static ssize_t stack_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "least_left %zu\n", gpukit_tyr_stack_least_left());
}
static struct kobj_attribute gpukit_tyr_stack_attr = __ATTR_RO(stack);

static int __init gpukit_tyr_boot(void)
{
	struct platform_device *pdev;
	struct kobject *dir;
	int ret;

	dir = kobject_create_and_add("tyr", kernel_kobj);
	if (!dir)
		return -ENOMEM;
	ret = sysfs_create_file(dir, &gpukit_tyr_live_attr.attr);
	if (ret)
		goto err_dir;
	ret = sysfs_create_file(dir, &gpukit_tyr_stack_attr.attr);
	if (ret)
		goto err_dir;
	ret = gpukit_tyr_register_driver();
	if (ret) {
		pr_err("tyr: registering the platform driver failed: %d\n", ret);
		goto err_dir;
	}
	if (!gpukit_tyr_at_boot)
		return 0;
	pdev = platform_device_register_simple("tyr", PLATFORM_DEVID_NONE, NULL, 0);
	if (IS_ERR(pdev)) {
		pr_err("tyr: registering the platform device failed: %ld\n", PTR_ERR(pdev));
		return PTR_ERR(pdev);
	}
	return 0;

err_dir:
	kobject_put(dir);
	return ret;
}
late_initcall(gpukit_tyr_boot);
