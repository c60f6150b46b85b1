// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The C drm_gpuvm (drivers/gpu/drm/drm_gpuvm.c) driven from gpuvm's KUnit suite, so that the
 * same map and unmap requests can be given to both implementations and the operations they
 * produce compared. Built only in the test kernel (CONFIG_GPUKIT_VS_C selects DRM_GPUVM).
 * drm_gpuvm.h is not in Linux 7.2's Rust bindings, so the C structures stay on this side:
 * the suite sees an opaque VM and a flat record per operation.
 *
 * Each request goes through drm_gpuvm_sm_map_ops_create() / drm_gpuvm_sm_unmap_ops_create(),
 * which split and merge exactly as the immediate-mode drm_gpuvm_sm_map() does; the ops are
 * recorded, then applied to the VM's tree with drm_gpuva_map(), drm_gpuva_remap() and
 * drm_gpuva_unmap(), as a driver does.
 */
#include <linux/device/faux.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_gpuvm.h>

#if IS_ENABLED(CONFIG_GPUKIT_VS_C)

/* One operation, as both sides report it. */
struct gpukit_c_gpuva_op {
	u32 kind;		/* 0 map, 1 unmap, 2 remap */
	u32 keep;
	u64 addr, range, offset, obj;	/* the new mapping (map) or the VA it removes */
	u32 has_prev, has_next;
	u64 prev_addr, prev_range, prev_offset;
	u64 next_addr, next_range, next_offset;
};

struct gpukit_c_vm;
struct gpukit_c_vm *gpukit_c_vm_new(u64 start, u64 range, u32 objs, u64 obj_size);
int gpukit_c_vm_map(struct gpukit_c_vm *vm, u64 addr, u64 range, u32 obj, u64 offset,
		    struct gpukit_c_gpuva_op *ops, u32 cap, u32 *n);
int gpukit_c_vm_unmap(struct gpukit_c_vm *vm, u64 addr, u64 range,
		      struct gpukit_c_gpuva_op *ops, u32 cap, u32 *n);
void gpukit_c_vm_free(struct gpukit_c_vm *vm);
int gpukit_c_vm_sm_map(struct gpukit_c_vm *vm, u64 addr, u64 range, u32 obj, u64 offset);
int gpukit_c_vm_sm_unmap(struct gpukit_c_vm *vm, u64 addr, u64 range);

#define GPUKIT_C_MAX_OBJS 16

struct gpukit_c_vm {
	struct drm_gpuvm base;
	struct faux_device *fdev;
	struct drm_device *drm;
	struct drm_gem_object *resv;
	struct drm_gem_object *objs[GPUKIT_C_MAX_OBJS];
	u32 n_objs;
};

static const struct drm_driver gpukit_c_drm_driver = {
	.name = "gpukit-vs-c",
	.desc = "gpukit: drm_gpuvm comparison",
	.driver_features = DRIVER_GEM | DRIVER_GEM_GPUVA,
};

static void gpukit_c_obj_free(struct drm_gem_object *obj)
{
	drm_gem_object_release(obj);
	kfree(obj);
}

static const struct drm_gem_object_funcs gpukit_c_obj_funcs = {
	.free = gpukit_c_obj_free,
};

static void gpukit_c_vm_free_cb(struct drm_gpuvm *gpuvm)
{
	/* The VM is freed by gpukit_c_vm_free() once drm_gpuvm_put() returns. */
}

static u64 gpukit_c_obj_id(struct gpukit_c_vm *vm, struct drm_gem_object *obj)
{
	u32 i;

	for (i = 0; i < vm->n_objs; i++)
		if (vm->objs[i] == obj)
			return i + 1;
	return 0;
}

static void gpukit_c_record_va(struct gpukit_c_vm *vm, struct gpukit_c_gpuva_op *r,
			       const struct drm_gpuva *va)
{
	r->addr = va->va.addr;
	r->range = va->va.range;
	r->offset = va->gem.offset;
	r->obj = gpukit_c_obj_id(vm, va->gem.obj);
}

static void gpukit_c_record(struct gpukit_c_vm *vm, struct gpukit_c_gpuva_op *r,
			    const struct drm_gpuva_op *op)
{
	memset(r, 0, sizeof(*r));
	switch (op->op) {
	case DRM_GPUVA_OP_MAP:
		r->kind = 0;
		r->addr = op->map.va.addr;
		r->range = op->map.va.range;
		r->offset = op->map.gem.offset;
		r->obj = gpukit_c_obj_id(vm, op->map.gem.obj);
		break;
	case DRM_GPUVA_OP_UNMAP:
		r->kind = 1;
		r->keep = op->unmap.keep;
		gpukit_c_record_va(vm, r, op->unmap.va);
		break;
	case DRM_GPUVA_OP_REMAP:
		r->kind = 2;
		r->keep = op->remap.unmap->keep;
		gpukit_c_record_va(vm, r, op->remap.unmap->va);
		if (op->remap.prev) {
			r->has_prev = 1;
			r->prev_addr = op->remap.prev->va.addr;
			r->prev_range = op->remap.prev->va.range;
			r->prev_offset = op->remap.prev->gem.offset;
		}
		if (op->remap.next) {
			r->has_next = 1;
			r->next_addr = op->remap.next->va.addr;
			r->next_range = op->remap.next->va.range;
			r->next_offset = op->remap.next->gem.offset;
		}
		break;
	default:
		r->kind = 99;
	}
}

/*
 * Applying one op to the VM's tree, allocating the new VAs and freeing the removed ones (a C
 * driver owns its struct drm_gpuva allocations). These are the immediate-mode callbacks of the
 * timing pass (drm_gpuvm_sm_map() / drm_gpuvm_sm_unmap() call them as they go) and what the
 * differential run applies its recorded ops lists with.
 */
static int gpukit_c_step_map(struct drm_gpuva_op *op, void *priv)
{
	struct gpukit_c_vm *vm = priv;
	struct drm_gpuva *va = kzalloc(sizeof(*va), GFP_KERNEL);

	if (!va)
		return -ENOMEM;
	drm_gpuva_map(&vm->base, va, &op->map);
	return 0;
}

static int gpukit_c_step_remap(struct drm_gpuva_op *op, void *priv)
{
	struct drm_gpuva *va = op->remap.unmap->va, *prev = NULL, *next = NULL;

	if (op->remap.prev) {
		prev = kzalloc(sizeof(*prev), GFP_KERNEL);
		if (!prev)
			return -ENOMEM;
	}
	if (op->remap.next) {
		next = kzalloc(sizeof(*next), GFP_KERNEL);
		if (!next) {
			kfree(prev);
			return -ENOMEM;
		}
	}
	drm_gpuva_remap(prev, next, &op->remap);
	kfree(va);
	return 0;
}

static int gpukit_c_step_unmap(struct drm_gpuva_op *op, void *priv)
{
	struct drm_gpuva *va = op->unmap.va;

	drm_gpuva_unmap(&op->unmap);
	kfree(va);
	return 0;
}

static const struct drm_gpuvm_ops gpukit_c_vm_ops = {
	.vm_free = gpukit_c_vm_free_cb,
	.sm_step_map = gpukit_c_step_map,
	.sm_step_remap = gpukit_c_step_remap,
	.sm_step_unmap = gpukit_c_step_unmap,
};

/* Records `ops` into `out` and applies them to the VM's tree. */
static int gpukit_c_apply(struct gpukit_c_vm *vm, struct drm_gpuva_ops *ops,
			  struct gpukit_c_gpuva_op *out, u32 cap, u32 *n)
{
	struct drm_gpuva_op *op;
	u32 count = 0;

	drm_gpuva_for_each_op(op, ops) {
		int ret;

		if (count == cap)
			return -ENOSPC;
		gpukit_c_record(vm, &out[count++], op);
		switch (op->op) {
		case DRM_GPUVA_OP_MAP:
			ret = gpukit_c_step_map(op, vm);
			break;
		case DRM_GPUVA_OP_UNMAP:
			ret = gpukit_c_step_unmap(op, vm);
			break;
		case DRM_GPUVA_OP_REMAP:
			ret = gpukit_c_step_remap(op, vm);
			break;
		default:
			ret = -EINVAL;
		}
		if (ret)
			return ret;
	}
	*n = count;
	return 0;
}

struct gpukit_c_vm *gpukit_c_vm_new(u64 start, u64 range, u32 objs, u64 obj_size)
{
	struct gpukit_c_vm *vm;
	u32 i;

	if (objs > GPUKIT_C_MAX_OBJS)
		return NULL;
	vm = kzalloc(sizeof(*vm), GFP_KERNEL);
	if (!vm)
		return NULL;
	vm->fdev = faux_device_create("gpukit-gpuvm-vs-c", NULL, NULL);
	if (!vm->fdev)
		goto err_vm;
	vm->drm = drm_dev_alloc(&gpukit_c_drm_driver, &vm->fdev->dev);
	if (IS_ERR(vm->drm))
		goto err_fdev;
	vm->resv = drm_gpuvm_resv_object_alloc(vm->drm);
	if (!vm->resv)
		goto err_drm;
	for (i = 0; i < objs; i++) {
		struct drm_gem_object *obj = kzalloc(sizeof(*obj), GFP_KERNEL);

		if (!obj)
			goto err_objs;
		obj->funcs = &gpukit_c_obj_funcs;
		drm_gem_private_object_init(vm->drm, obj, obj_size);
		vm->objs[vm->n_objs++] = obj;
	}
	drm_gpuvm_init(&vm->base, "gpukit-vs-c", 0, vm->drm, vm->resv, start, range, 0, 0,
		       &gpukit_c_vm_ops);
	return vm;

err_objs:
	for (i = 0; i < vm->n_objs; i++)
		drm_gem_object_put(vm->objs[i]);
	drm_gem_object_put(vm->resv);
err_drm:
	drm_dev_put(vm->drm);
err_fdev:
	faux_device_destroy(vm->fdev);
err_vm:
	kfree(vm);
	return NULL;
}

int gpukit_c_vm_map(struct gpukit_c_vm *vm, u64 addr, u64 range, u32 obj, u64 offset,
		    struct gpukit_c_gpuva_op *out, u32 cap, u32 *n)
{
	struct drm_gpuvm_map_req req = {
		.map.va.addr = addr,
		.map.va.range = range,
		.map.gem.offset = offset,
		.map.gem.obj = obj ? vm->objs[obj - 1] : NULL,
	};
	struct drm_gpuva_ops *ops;
	int ret;

	if (obj > vm->n_objs)
		return -EINVAL;
	ops = drm_gpuvm_sm_map_ops_create(&vm->base, &req);
	if (IS_ERR(ops))
		return PTR_ERR(ops);
	ret = gpukit_c_apply(vm, ops, out, cap, n);
	drm_gpuva_ops_free(&vm->base, ops);
	return ret;
}

int gpukit_c_vm_unmap(struct gpukit_c_vm *vm, u64 addr, u64 range,
		      struct gpukit_c_gpuva_op *out, u32 cap, u32 *n)
{
	struct drm_gpuva_ops *ops = drm_gpuvm_sm_unmap_ops_create(&vm->base, addr, range);
	int ret;

	if (IS_ERR(ops))
		return PTR_ERR(ops);
	ret = gpukit_c_apply(vm, ops, out, cap, n);
	drm_gpuva_ops_free(&vm->base, ops);
	return ret;
}

int gpukit_c_vm_sm_map(struct gpukit_c_vm *vm, u64 addr, u64 range, u32 obj, u64 offset)
{
	struct drm_gpuvm_map_req req = {
		.map.va.addr = addr,
		.map.va.range = range,
		.map.gem.offset = offset,
		.map.gem.obj = obj ? vm->objs[obj - 1] : NULL,
	};

	if (obj > vm->n_objs)
		return -EINVAL;
	return drm_gpuvm_sm_map(&vm->base, vm, &req);
}

int gpukit_c_vm_sm_unmap(struct gpukit_c_vm *vm, u64 addr, u64 range)
{
	return drm_gpuvm_sm_unmap(&vm->base, vm, addr, range);
}

void gpukit_c_vm_free(struct gpukit_c_vm *vm)
{
	struct drm_gpuva *va, *tmp;
	u32 i;

	drm_gpuvm_for_each_va_safe(va, tmp, &vm->base) {
		drm_gpuva_remove(va);
		kfree(va);
	}
	drm_gpuvm_put(&vm->base);
	for (i = 0; i < vm->n_objs; i++)
		drm_gem_object_put(vm->objs[i]);
	drm_gem_object_put(vm->resv);
	drm_dev_put(vm->drm);
	faux_device_destroy(vm->fdev);
	kfree(vm);
}

#endif /* CONFIG_GPUKIT_VS_C */
