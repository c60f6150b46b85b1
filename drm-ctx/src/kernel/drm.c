// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What the kernel backend of drm-ctx needs from the DRM core and Linux 7.2's Rust bindings do
 * not offer: the syncobj driver feature, syncobj creation for a file, the master check, and
 * fence references (static inline functions).
 */

#include <drm/drm_auth.h>
#include <drm/drm_device.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_managed.h>
#include <drm/drm_syncobj.h>
#include <linux/dma-fence.h>

/* Called from Rust (drm-ctx/src/kernel/{drm,file}.rs and kernel.rs). */
int gpukit_drm_adjust_driver(struct drm_device *dev);
int gpukit_drm_syncobj_create(struct drm_file *file, struct dma_fence *fence, u32 *handle);
bool gpukit_drm_is_current_master(struct drm_file *file);
void gpukit_drm_fence_get(struct dma_fence *fence);
void gpukit_drm_fence_put(struct dma_fence *fence);

/*
 * kernel::drm builds one constant struct drm_driver per driver. Two things in it do not fit
 * drm-ctx, and the device gets, before registration, a copy of its vtable without them
 * (drmm memory is freed after the release callback, the last reader of dev->driver):
 *
 * - DRIVER_SYNCOBJ is never set, and the DRM core only answers the syncobj ioctls for drivers
 *   that have it (drm_device's own feature mask can only take features away): set it, with
 *   DRIVER_SYNCOBJ_TIMELINE.
 * - The shmem helpers' dumb_create (DRM_IOCTL_MODE_CREATE_DUMB, open to any client of the
 *   primary node) and gem_prime_import_sg_table (importing another device's dma-buf) make
 *   plain drm_gem_shmem_objects, not the driver's object type; a handle to one would then be
 *   looked up as the driver's type. Without them the core refuses both (ENOSYS, EINVAL);
 *   re-importing a buffer this device exported still returns the original object.
 */
int gpukit_drm_adjust_driver(struct drm_device *dev)
{
	struct drm_driver *drv = drmm_kmalloc(dev, sizeof(*drv), GFP_KERNEL);

	if (!drv)
		return -ENOMEM;
	*drv = *dev->driver;
	drv->driver_features |= DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE;
	drv->dumb_create = NULL;
	drv->gem_prime_import_sg_table = NULL;
	dev->driver = drv;
	return 0;
}

/* A syncobj of @file holding @fence (may be NULL); the handle is made last. */
int gpukit_drm_syncobj_create(struct drm_file *file, struct dma_fence *fence, u32 *handle)
{
	struct drm_syncobj *syncobj;
	int ret = drm_syncobj_create(&syncobj, 0, fence);

	if (ret)
		return ret;
	ret = drm_syncobj_get_handle(file, syncobj, handle);
	drm_syncobj_put(syncobj);
	return ret;
}

bool gpukit_drm_is_current_master(struct drm_file *file)
{
	return drm_is_current_master(file);
}

void gpukit_drm_fence_get(struct dma_fence *fence)
{
	dma_fence_get(fence);
}

void gpukit_drm_fence_put(struct dma_fence *fence)
{
	dma_fence_put(fence);
}
