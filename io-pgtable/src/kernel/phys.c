// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Address translation for io-pgtable's kernel table allocator.
 *
 * virt_to_phys() and phys_to_virt() are inline functions in the architecture headers, so
 * Linux 7.2's Rust bindings have no symbol for them; these two out-of-line wrappers give the
 * allocator the physical address a coherent table walker uses, as io-pgtable-arm.c does.
 */
#include <linux/io.h>
#include <linux/types.h>

phys_addr_t gpukit_io_pgtable_virt_to_phys(const void *addr);
void *gpukit_io_pgtable_phys_to_virt(phys_addr_t phys);

phys_addr_t gpukit_io_pgtable_virt_to_phys(const void *addr)
{
	return virt_to_phys((void *)addr);
}

void *gpukit_io_pgtable_phys_to_virt(phys_addr_t phys)
{
	return phys_to_virt(phys);
}
