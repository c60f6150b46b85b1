// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A minimal drm_gpu_scheduler driver for jobqueue's comparison with drm_sched in the test
 * kernel (CONFIG_GPUKIT_VS_C selects DRM_SCHED). Its run_job hands back an already-signalled
 * hardware fence (the kernel's stub fence) and records when it ran; jobs are allocated per
 * submission and freed by free_job, as a C driver does. gpu_scheduler.h is not in Linux
 * 7.2's Rust bindings, so the scheduler's structures stay on this side.
 */
#include <linux/device/faux.h>
#include <linux/dma-fence.h>
#include <linux/slab.h>
#include <drm/gpu_scheduler.h>

#if IS_ENABLED(CONFIG_GPUKIT_VS_C)

struct gpukit_c_sched;
struct gpukit_c_sched *gpukit_c_sched_new(u32 credits);
int gpukit_c_sched_submit(struct gpukit_c_sched *s, struct dma_fence **deps, u32 n,
			  struct dma_fence **finished);
s64 gpukit_c_sched_last_run(struct gpukit_c_sched *s);
void gpukit_c_sched_free(struct gpukit_c_sched *s);

struct gpukit_c_sched {
	struct drm_gpu_scheduler sched;
	struct drm_gpu_scheduler *list[1];
	struct drm_sched_entity entity;
	struct faux_device *fdev;
	s64 last_run;
};

struct gpukit_c_job {
	struct drm_sched_job base;
	struct gpukit_c_sched *s;
};

static struct dma_fence *gpukit_c_run_job(struct drm_sched_job *job)
{
	struct gpukit_c_job *j = container_of(job, struct gpukit_c_job, base);

	WRITE_ONCE(j->s->last_run, ktime_get());
	return dma_fence_get_stub();
}

static enum drm_gpu_sched_stat gpukit_c_timedout_job(struct drm_sched_job *job)
{
	/* The timeout is MAX_SCHEDULE_TIMEOUT and the fences are signalled: never called. */
	return DRM_GPU_SCHED_STAT_RESET;
}

static void gpukit_c_free_job(struct drm_sched_job *job)
{
	drm_sched_job_cleanup(job);
	kfree(container_of(job, struct gpukit_c_job, base));
}

static const struct drm_sched_backend_ops gpukit_c_sched_ops = {
	.run_job = gpukit_c_run_job,
	.timedout_job = gpukit_c_timedout_job,
	.free_job = gpukit_c_free_job,
};

struct gpukit_c_sched *gpukit_c_sched_new(u32 credits)
{
	struct gpukit_c_sched *s = kzalloc(sizeof(*s), GFP_KERNEL);
	struct drm_sched_init_args args = {
		.ops = &gpukit_c_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = credits,
		.timeout = MAX_SCHEDULE_TIMEOUT,
		.name = "gpukit-vs-c",
	};

	if (!s)
		return NULL;
	s->fdev = faux_device_create("gpukit-sched-vs-c", NULL, NULL);
	if (!s->fdev)
		goto err_s;
	args.dev = &s->fdev->dev;
	if (drm_sched_init(&s->sched, &args))
		goto err_fdev;
	s->list[0] = &s->sched;
	if (drm_sched_entity_init(&s->entity, DRM_SCHED_PRIORITY_NORMAL, s->list, 1, NULL))
		goto err_sched;
	return s;

err_sched:
	drm_sched_fini(&s->sched);
err_fdev:
	faux_device_destroy(s->fdev);
err_s:
	kfree(s);
	return NULL;
}

/* Submits one job of one credit waiting for `deps`; `*finished` gets a reference. */
int gpukit_c_sched_submit(struct gpukit_c_sched *s, struct dma_fence **deps, u32 n,
			  struct dma_fence **finished)
{
	struct gpukit_c_job *j = kzalloc(sizeof(*j), GFP_KERNEL);
	int ret;
	u32 i;

	if (!j)
		return -ENOMEM;
	j->s = s;
	ret = drm_sched_job_init(&j->base, &s->entity, 1, NULL, 0);
	if (ret) {
		kfree(j);
		return ret;
	}
	for (i = 0; i < n; i++) {
		ret = drm_sched_job_add_dependency(&j->base, dma_fence_get(deps[i]));
		if (ret) {
			drm_sched_job_cleanup(&j->base);
			kfree(j);
			return ret;
		}
	}
	drm_sched_job_arm(&j->base);
	*finished = dma_fence_get(&j->base.s_fence->finished);
	drm_sched_entity_push_job(&j->base);
	return 0;
}

s64 gpukit_c_sched_last_run(struct gpukit_c_sched *s)
{
	return READ_ONCE(s->last_run);
}

void gpukit_c_sched_free(struct gpukit_c_sched *s)
{
	drm_sched_entity_destroy(&s->entity);
	drm_sched_fini(&s->sched);
	faux_device_destroy(s->fdev);
	kfree(s);
}

#endif /* CONFIG_GPUKIT_VS_C */
