// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What the kernel backend of drm-ctx needs from the DRM core and Linux 7.2's Rust bindings do
 * not offer: the syncobj driver feature, syncobj creation for a file, the master check, fence
 * references (static inline functions), and the syncobj calls of a driver's submit path
 * (drm_syncobj.h, dma-fence-chain.h and dma-fence-unwrap.h are not in the bindings). Each
 * wrapper below only forwards; the Rust side (kernel/syncobj.rs) owns the references.
 */

#include <drm/drm_auth.h>
#include <drm/drm_device.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_vma_manager.h>
#include <drm/drm_managed.h>
#include <drm/drm_syncobj.h>
#include <kunit/test.h>
#include <kunit/test-bug.h>
#include <linux/dma-fence.h>
#include <linux/dma-fence-chain.h>
#include <linux/dma-fence-unwrap.h>
#include <linux/err.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

/* Called from Rust (drm-ctx/src/kernel/{drm,file,gem}.rs and kernel.rs). */
extern const struct vm_operations_struct gpukit_drm_gem_own_vm_ops;
int gpukit_drm_gem_mmap_prepare(struct drm_gem_object *obj, struct vm_area_struct *vma,
				size_t *first, size_t *count);
int gpukit_drm_gem_insert_page(struct vm_area_struct *vma, size_t index, void *kaddr);
int gpukit_drm_adjust_driver(struct drm_device *dev, const struct file_operations *fops);
u32 gpukit_drm_mmap_request(struct vm_area_struct *vma, u64 *offset, size_t *len);
int gpukit_drm_map_own_page(struct vm_area_struct *vma, void *kaddr);
int gpukit_drm_syncobj_create(struct drm_file *file, struct dma_fence *fence, u32 *handle);
bool gpukit_drm_is_current_master(struct drm_file *file);
void gpukit_drm_fence_get(struct dma_fence *fence);
void gpukit_drm_fence_put(struct dma_fence *fence);
struct drm_syncobj *gpukit_drm_syncobj_find(struct drm_file *file, u32 handle);
void gpukit_drm_syncobj_get(struct drm_syncobj *syncobj);
void gpukit_drm_syncobj_put(struct drm_syncobj *syncobj);
struct dma_fence *gpukit_drm_syncobj_fence_get(struct drm_syncobj *syncobj);
int gpukit_drm_syncobj_find_fence(struct drm_file *file, u32 handle, u64 point, u64 flags,
				  struct dma_fence **fence);
void gpukit_drm_syncobj_replace_fence(struct drm_syncobj *syncobj, struct dma_fence *fence);
void gpukit_drm_syncobj_add_point(struct drm_syncobj *syncobj, struct dma_fence_chain *chain,
				  struct dma_fence *fence, u64 point);
struct dma_fence_chain *gpukit_drm_fence_chain_alloc(void);
void gpukit_drm_fence_chain_free(struct dma_fence_chain *chain);
void gpukit_drm_fence_unwrap_each(struct dma_fence *head,
				  void (*visit)(void *ctx, struct dma_fence *leaf), void *ctx);
/* For the KUnit suites (drm-ctx's and the drivers' kernel/kunit.rs) only. */
struct file *gpukit_drm_test_open(struct drm_device *dev);
long gpukit_drm_test_open_err(struct file *file);
struct drm_file *gpukit_drm_test_file(struct file *file);
void gpukit_drm_test_close(struct file *file);
int gpukit_drm_test_syncobj_destroy(struct drm_file *file, u32 handle);
struct dma_fence *gpukit_drm_test_fence_new(void);
void gpukit_drm_test_fence_signal(struct dma_fence *fence);
/* Whether a fence has signalled (dma_fence_is_signaled is static inline). */
bool gpukit_drm_test_fence_is_signaled(struct dma_fence *fence);
unsigned long gpukit_drm_test_user_alloc(unsigned long len);
unsigned long gpukit_drm_test_user_map(struct file *file, unsigned long len, unsigned long offset,
				       bool writable);

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
 *
 * The copy also takes drm-ctx's file operations (@fops, a static of the Rust driver type, as
 * kernel::drm's are), which differ from kernel::drm's only in mmap, which offers the offset to
 * the driver before drm_gem_mmap (Driver::mmap_own): the other members are checked to be the
 * same, so a kernel whose kernel::drm sets them differently fails here instead of running
 * with other file operations.
 */
int gpukit_drm_adjust_driver(struct drm_device *dev, const struct file_operations *fops)
{
	const struct file_operations *old = dev->driver->fops;
	struct drm_driver *drv;

	if (fops->owner != old->owner || fops->open != old->open ||
	    fops->release != old->release || fops->unlocked_ioctl != old->unlocked_ioctl ||
	    fops->compat_ioctl != old->compat_ioctl || fops->poll != old->poll ||
	    fops->read != old->read || fops->llseek != old->llseek ||
	    fops->fop_flags != old->fop_flags || old->mmap != drm_gem_mmap || !fops->mmap)
		return -EINVAL;
	drv = drmm_kmalloc(dev, sizeof(*drv), GFP_KERNEL);
	if (!drv)
		return -ENOMEM;
	*drv = *dev->driver;
	drv->driver_features |= DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE;
	drv->dumb_create = NULL;
	drv->gem_prime_import_sg_table = NULL;
	drv->fops = fops;
	dev->driver = drv;
	return 0;
}

/*
 * Maps the page of kernel memory at @kaddr (direct map or vmalloc space, page aligned) at user
 * address @addr of @vma by its frame number: no reference to the page is taken, the mapping's
 * owner keeps it alive.
 */
static int gpukit_drm_remap_kernel_page(struct vm_area_struct *vma, unsigned long addr,
					void *kaddr)
{
	struct page *page = NULL;

	if (!PAGE_ALIGNED(kaddr))
		return -EINVAL;
	if (is_vmalloc_addr(kaddr))
		page = vmalloc_to_page(kaddr);
	else if (virt_addr_valid(kaddr))
		page = virt_to_page(kaddr);
	if (!page)
		return -EFAULT;
	return remap_pfn_range(vma, addr, page_to_pfn(page), PAGE_SIZE, vma->vm_page_prot);
}

/* Flags of gpukit_drm_mmap_request (MMAP_* in kernel/drm.rs). */
#define GPUKIT_MMAP_WRITE (1u << 0)
#define GPUKIT_MMAP_EXEC (1u << 1)
#define GPUKIT_MMAP_SHARED (1u << 2)

/* What an mmap() of a DRM file asks for: the file offset in bytes, the length, the flags. */
u32 gpukit_drm_mmap_request(struct vm_area_struct *vma, u64 *offset, size_t *len)
{
	u32 flags = 0;

	*offset = (u64)vma->vm_pgoff << PAGE_SHIFT;
	*len = vma->vm_end - vma->vm_start;
	if (vma->vm_flags & VM_WRITE)
		flags |= GPUKIT_MMAP_WRITE;
	if (vma->vm_flags & VM_EXEC)
		flags |= GPUKIT_MMAP_EXEC;
	if (vma->vm_flags & VM_SHARED)
		flags |= GPUKIT_MMAP_SHARED;
	return flags;
}

/*
 * Maps the page at @kaddr (direct map or vmalloc space) as the whole of @vma, one page, for a
 * file offset the driver keeps for itself. A read-only mapping loses VM_MAYWRITE, so
 * mprotect() cannot make it writable; the mapping is not inherited by fork() children and
 * does not grow. The mapping holds the file, which holds the device, which the driver's page
 * outlives; there is nothing to fault in, so no vm_ops.
 */
int gpukit_drm_map_own_page(struct vm_area_struct *vma, void *kaddr)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (!(vma->vm_flags & VM_WRITE))
		vm_flags_clear(vma, VM_MAYWRITE);
	vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	return gpukit_drm_remap_kernel_page(vma, vma->vm_start, kaddr);
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

/* The syncobj @handle names in @file now, with a reference (NULL if none). */
struct drm_syncobj *gpukit_drm_syncobj_find(struct drm_file *file, u32 handle)
{
	return drm_syncobj_find(file, handle);
}

/* One more reference to @syncobj (drm_syncobj_get is static inline). */
void gpukit_drm_syncobj_get(struct drm_syncobj *syncobj)
{
	drm_syncobj_get(syncobj);
}

/* Gives a reference back; the last one frees the syncobj (static inline). */
void gpukit_drm_syncobj_put(struct drm_syncobj *syncobj)
{
	drm_syncobj_put(syncobj);
}

/* The fence @syncobj holds now, with a reference, or NULL (static inline). */
struct dma_fence *gpukit_drm_syncobj_fence_get(struct drm_syncobj *syncobj)
{
	return drm_syncobj_fence_get(syncobj);
}

/* drm_syncobj_find_fence: 0 and a referenced fence in @fence, or a negative errno. */
int gpukit_drm_syncobj_find_fence(struct drm_file *file, u32 handle, u64 point, u64 flags,
				  struct dma_fence **fence)
{
	return drm_syncobj_find_fence(file, handle, point, flags, fence);
}

/* drm_syncobj_replace_fence: the syncobj takes its own reference to @fence (may be NULL). */
void gpukit_drm_syncobj_replace_fence(struct drm_syncobj *syncobj, struct dma_fence *fence)
{
	drm_syncobj_replace_fence(syncobj, fence);
}

/*
 * drm_syncobj_add_point: @chain (from gpukit_drm_fence_chain_alloc) becomes the syncobj's new
 * head, and the syncobj owns it from here; the chain takes its own reference to @fence.
 */
void gpukit_drm_syncobj_add_point(struct drm_syncobj *syncobj, struct dma_fence_chain *chain,
				  struct dma_fence *fence, u64 point)
{
	drm_syncobj_add_point(syncobj, chain, fence, point);
}

/* dma_fence_chain_alloc (a macro): an uninitialised chain node, or NULL. */
struct dma_fence_chain *gpukit_drm_fence_chain_alloc(void)
{
	return dma_fence_chain_alloc();
}

/* dma_fence_chain_free (static inline): frees a node that was never added. */
void gpukit_drm_fence_chain_free(struct dma_fence_chain *chain)
{
	dma_fence_chain_free(chain);
}

/*
 * dma_fence_unwrap_for_each (a macro): calls @visit on every leaf of @head (the fences in its
 * chain links and fence arrays; @head itself if it is neither). The cursor holds the container
 * the leaf belongs to, so each leaf is alive for the call; @visit takes a reference to keep it.
 */
void gpukit_drm_fence_unwrap_each(struct dma_fence *head,
				  void (*visit)(void *ctx, struct dma_fence *leaf), void *ctx)
{
	struct dma_fence_unwrap cursor;
	struct dma_fence *leaf;

	dma_fence_unwrap_for_each(leaf, &cursor, head)
		visit(ctx, leaf);
}

/*
 * A struct file with a struct drm_file on @dev's render node (or primary node without one), as
 * an open() from userspace would make it (mock_drm_getfile); an ERR_PTR on failure.
 */
struct file *gpukit_drm_test_open(struct drm_device *dev)
{
	struct drm_minor *minor = dev->render ? dev->render : dev->primary;

	return mock_drm_getfile(minor, O_RDWR);
}

/* The errno of an ERR_PTR from gpukit_drm_test_open, 0 for a file. */
long gpukit_drm_test_open_err(struct file *file)
{
	return IS_ERR(file) ? PTR_ERR(file) : 0;
}

/* The struct drm_file of a file from gpukit_drm_test_open. */
struct drm_file *gpukit_drm_test_file(struct file *file)
{
	return file->private_data;
}

/* Closes a file from gpukit_drm_test_open now (its syncobjs and handles go with it). */
void gpukit_drm_test_close(struct file *file)
{
	fput(file);
	flush_delayed_fput();
}

/*
 * The DRM core's handler of DRM_IOCTL_SYNCOBJ_DESTROY (declared in drivers/gpu/drm/
 * drm_internal.h, which is not an include path of this file; the DRM core is built in).
 */
int drm_syncobj_destroy_ioctl(struct drm_device *dev, void *data, struct drm_file *file_private);

/* Destroys a syncobj handle of @file as DRM_IOCTL_SYNCOBJ_DESTROY does (EINVAL if unknown). */
int gpukit_drm_test_syncobj_destroy(struct drm_file *file, u32 handle)
{
	struct drm_syncobj_destroy args = { .handle = handle };

	return drm_syncobj_destroy_ioctl(file->minor->dev, &args, file);
}

/* The names of the suite's fences (dma_fence_ops requires both). */
static const char *gpukit_test_fence_name(struct dma_fence *fence)
{
	return "gpukit_drm_ctx_kunit";
}

static const struct dma_fence_ops gpukit_test_fence_ops = {
	.get_driver_name = gpukit_test_fence_name,
	.get_timeline_name = gpukit_test_fence_name,
};

/*
 * A fence of the suite's own, pending until gpukit_drm_test_fence_signal, with one reference
 * and dma_fence's inline lock (no release op: the last dma_fence_put frees it); NULL if out of
 * memory.
 */
struct dma_fence *gpukit_drm_test_fence_new(void)
{
	struct dma_fence *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return NULL;
	dma_fence_init(f, &gpukit_test_fence_ops, NULL, dma_fence_context_alloc(1), 1);
	return f;
}

/* Signals a fence from gpukit_drm_test_fence_new. */
void gpukit_drm_test_fence_signal(struct dma_fence *fence)
{
	dma_fence_signal(fence);
}

/* Whether a fence has signalled (dma_fence_is_signaled is static inline). */
bool gpukit_drm_test_fence_is_signaled(struct dma_fence *fence)
{
	return dma_fence_is_signaled(fence);
}

#if IS_ENABLED(CONFIG_KUNIT)
/*
 * @len bytes of anonymous user memory in an address space made for the running KUnit test
 * (unmapped when the test ends), for the user pointers inside a test's ioctl arguments; 0 when
 * no test runs or there is no memory.
 */
unsigned long gpukit_drm_test_user_alloc(unsigned long len)
{
	struct kunit *test = kunit_get_current_test();
	unsigned long addr;

	if (!test)
		return 0;
	addr = kunit_vm_mmap(test, NULL, 0, len, PROT_READ | PROT_WRITE,
			     MAP_ANONYMOUS | MAP_PRIVATE, 0);
	return IS_ERR_VALUE(addr) ? 0 : addr;
}

/* A shared mapping, read-write or read-only, of `len` bytes of `file` at `offset` (an mmap
 * offset of one of its GEM objects, or one the driver keeps), in the running test's address
 * space, unmapped when the test ends; 0 on failure. */
unsigned long gpukit_drm_test_user_map(struct file *file, unsigned long len, unsigned long offset,
				       bool writable)
{
	struct kunit *test = kunit_get_current_test();
	unsigned long addr;

	if (!test)
		return 0;
	addr = kunit_vm_mmap(test, file, 0, len, writable ? PROT_READ | PROT_WRITE : PROT_READ,
			     MAP_SHARED, offset);
	return IS_ERR_VALUE(addr) ? 0 : addr;
}
#endif

/*
 * Mappings of objects whose driver lends its own pages (DriverObject::MAPS_OWN_PAGES in
 * kernel/gem.rs): the object's mmap maps every page up front by its frame number, so the
 * vm_ops only keep the object (and with it the pages) alive while a mapping of it exists, as
 * drm_gem_mmap_obj expects of them. Frame numbers rather than struct pages: a driver's pages
 * may be the tail pages of a higher-order allocation (what the DMA API hands out), which have
 * no reference count of their own for vm_insert_page to take.
 */
const struct vm_operations_struct gpukit_drm_gem_own_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

int gpukit_drm_gem_mmap_prepare(struct drm_gem_object *obj, struct vm_area_struct *vma,
				size_t *first, size_t *count)
{
	unsigned long start = drm_vma_node_start(&obj->vma_node);
	unsigned long obj_pages = obj->size >> PAGE_SHIFT;
	unsigned long pages = vma_pages(vma);

	/* As the shmem helpers: a private writable mapping would copy pages on write, so the
	 * GPU would not see what the process wrote. */
	if (is_cow_mapping(vma->vm_flags))
		return -EINVAL;
	if (vma->vm_pgoff < start || vma->vm_pgoff - start > obj_pages ||
	    pages > obj_pages - (vma->vm_pgoff - start))
		return -EINVAL;
	/* From now on the offset is the object's own page offset, as the shmem helpers keep it. */
	vma->vm_pgoff -= start;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	*first = vma->vm_pgoff;
	*count = pages;
	return 0;
}

int gpukit_drm_gem_insert_page(struct vm_area_struct *vma, size_t index, void *kaddr)
{
	if (index >= vma_pages(vma))
		return -EINVAL;
	return gpukit_drm_remap_kernel_page(vma, vma->vm_start + (index << PAGE_SHIFT), kaddr);
}
