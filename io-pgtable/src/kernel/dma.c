// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Streaming-DMA glue for io-pgtable's kernel table allocator.
 *
 * dma_map_single(), dma_mapping_error(), dma_sync_single_range_for_device() and
 * dma_unmap_single() are macros or static inline functions in <linux/dma-mapping.h>, so
 * Linux 7.2's Rust bindings have no symbol for them (its rust/helpers/dma.c covers the
 * coherent allocator and scatter-gather tables, not these). Tables are mapped DMA_TO_DEVICE:
 * the CPU writes descriptors, the walker only reads them.
 */
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/types.h>

int gpukit_io_pgtable_dma_map(struct device *dev, void *cpu, size_t size, bool coherent,
			      u64 *dma_out);
void gpukit_io_pgtable_dma_sync(struct device *dev, u64 dma, size_t off, size_t len);
void gpukit_io_pgtable_dma_unmap(struct device *dev, u64 dma, size_t size, bool coherent);

/*
 * Maps `size` bytes of kmalloc() memory at `cpu` for `dev`. For a walker that does not snoop
 * the CPU caches this also writes the (zeroed) table back to memory; a coherent walker needs
 * no cache maintenance, so it is skipped.
 */
int gpukit_io_pgtable_dma_map(struct device *dev, void *cpu, size_t size, bool coherent,
			      u64 *dma_out)
{
	unsigned long attrs = coherent ? DMA_ATTR_SKIP_CPU_SYNC : 0;
	dma_addr_t dma = dma_map_single_attrs(dev, cpu, size, DMA_TO_DEVICE, attrs);

	if (dma_mapping_error(dev, dma))
		return -ENOMEM;
	*dma_out = dma;
	return 0;
}

/* Makes `len` bytes at offset `off` of the table mapped at `dma` visible to the walker. */
void gpukit_io_pgtable_dma_sync(struct device *dev, u64 dma, size_t off, size_t len)
{
	dma_sync_single_range_for_device(dev, dma, off, len, DMA_TO_DEVICE);
}

void gpukit_io_pgtable_dma_unmap(struct device *dev, u64 dma, size_t size, bool coherent)
{
	unsigned long attrs = coherent ? DMA_ATTR_SKIP_CPU_SYNC : 0;

	dma_unmap_single_attrs(dev, dma, size, DMA_TO_DEVICE, attrs);
}

#if IS_ENABLED(CONFIG_KUNIT)

int gpukit_io_pgtable_test_dma_setup(struct device *dev);

/* Faux devices have no DMA mask; the suite gives its device a 64-bit one. */
int gpukit_io_pgtable_test_dma_setup(struct device *dev)
{
	return dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64));
}

#endif /* CONFIG_KUNIT */
