// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The C io-pgtable (drivers/iommu/io-pgtable-arm.c) driven from io-pgtable's KUnit suite, so
 * that the same operations can be applied to both implementations and their results and
 * descriptors compared. Built only in the test kernel (CONFIG_GPUKIT_VS_C, which selects
 * IOMMU_IO_PGTABLE_LPAE). The io_pgtable_ops and io_pgtable_cfg structures are reached from
 * here rather than from Rust: io-pgtable.h is not in Linux 7.2's Rust bindings.
 */
#include <linux/device.h>
#include <linux/gfp.h>
#include <linux/io-pgtable.h>
#include <linux/slab.h>

#if IS_ENABLED(CONFIG_GPUKIT_VS_C)

struct gpukit_c_pgtable;
struct gpukit_c_pgtable *gpukit_c_pgtable_new(bool mali, void *dev, u64 pgsize_bitmap,
					      u32 ias, u32 oas, bool coherent);
int gpukit_c_pgtable_map(struct gpukit_c_pgtable *t, u64 iova, u64 paddr, u64 pgsize,
			 u64 pgcount, int prot, u64 *mapped);
u64 gpukit_c_pgtable_unmap(struct gpukit_c_pgtable *t, u64 iova, u64 pgsize, u64 pgcount);
u64 gpukit_c_pgtable_iova_to_phys(struct gpukit_c_pgtable *t, u64 iova);
int gpukit_c_pgtable_walk(struct gpukit_c_pgtable *t, u64 iova, u64 *ptes);
void gpukit_c_pgtable_free(struct gpukit_c_pgtable *t);

struct gpukit_c_pgtable {
	struct io_pgtable_cfg cfg;
	struct io_pgtable_ops *ops;
};

/*
 * Table memory through the configuration's allocator hooks: with them the C code DMA-maps
 * every table for `iommu_dev` and syncs through that mapping, as this crate's DmaTableAlloc
 * does. Without them, on x86 the C code takes its tables from iommu-pages, which cleans
 * caches with clflush and does not map them (IOMMU_PAGES_USE_DMA_API is 0 there), while
 * its PTE syncs still call dma_sync_single_for_device: DMA-API debugging then reports a sync
 * of memory that was never mapped. On Arm both paths use the DMA API.
 */
static void *gpukit_c_table_alloc(void *cookie, size_t size, gfp_t gfp)
{
	return (void *)__get_free_pages(gfp | __GFP_ZERO, get_order(size));
}

static void gpukit_c_table_free(void *cookie, void *pages, size_t size)
{
	free_pages((unsigned long)pages, get_order(size));
}

/* The comparison runs without a TLB: every flush is a no-op on both sides. */
static void gpukit_c_flush_all(void *cookie) {}
static void gpukit_c_flush_walk(unsigned long iova, size_t size, size_t granule, void *cookie) {}
static void gpukit_c_add_page(struct iommu_iotlb_gather *gather, unsigned long iova,
			      size_t granule, void *cookie) {}

static const struct iommu_flush_ops gpukit_c_flush_ops = {
	.tlb_flush_all = gpukit_c_flush_all,
	.tlb_flush_walk = gpukit_c_flush_walk,
	.tlb_add_page = gpukit_c_add_page,
};

struct gpukit_c_pgtable *gpukit_c_pgtable_new(bool mali, void *dev, u64 pgsize_bitmap,
					      u32 ias, u32 oas, bool coherent)
{
	struct gpukit_c_pgtable *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	t->cfg = (struct io_pgtable_cfg) {
		.pgsize_bitmap = pgsize_bitmap,
		.ias = ias,
		.oas = oas,
		.coherent_walk = coherent,
		.tlb = &gpukit_c_flush_ops,
		.iommu_dev = dev,
		.alloc = gpukit_c_table_alloc,
		.free = gpukit_c_table_free,
	};
	t->ops = alloc_io_pgtable_ops(mali ? ARM_MALI_LPAE : ARM_64_LPAE_S1, &t->cfg, t);
	if (!t->ops) {
		kfree(t);
		return NULL;
	}
	return t;
}

int gpukit_c_pgtable_map(struct gpukit_c_pgtable *t, u64 iova, u64 paddr, u64 pgsize,
			 u64 pgcount, int prot, u64 *mapped)
{
	size_t done = 0;
	int ret = t->ops->map_pages(t->ops, iova, paddr, pgsize, pgcount, prot, GFP_KERNEL,
				    &done);

	*mapped = done;
	return ret;
}

u64 gpukit_c_pgtable_unmap(struct gpukit_c_pgtable *t, u64 iova, u64 pgsize, u64 pgcount)
{
	return t->ops->unmap_pages(t->ops, iova, pgsize, pgcount, NULL);
}

u64 gpukit_c_pgtable_iova_to_phys(struct gpukit_c_pgtable *t, u64 iova)
{
	return t->ops->iova_to_phys(t->ops, iova);
}

/* The descriptors read at each level on the way to `iova`; unvisited levels stay 0. */
int gpukit_c_pgtable_walk(struct gpukit_c_pgtable *t, u64 iova, u64 *ptes)
{
	struct arm_lpae_io_pgtable_walk_data wd = {};
	int ret = t->ops->pgtable_walk(t->ops, iova, &wd);

	memcpy(ptes, wd.ptes, sizeof(wd.ptes));
	return ret;
}

void gpukit_c_pgtable_free(struct gpukit_c_pgtable *t)
{
	free_io_pgtable_ops(t->ops);
	kfree(t);
}

#endif /* CONFIG_GPUKIT_VS_C */
