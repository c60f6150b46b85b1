// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A minimal drm_gpu_scheduler driver for jobqueue's comparison with drm_sched in the test
 * kernel (CONFIG_GPUKIT_VS_C selects DRM_SCHED). Its run_job hands back either an
 * already-signalled hardware fence (the kernel's stub fence) or one of the simulated ring
 * below, and records when it ran; jobs are allocated per submission and freed by free_job, as
 * a C driver does. gpu_scheduler.h is not in Linux 7.2's Rust bindings, so the scheduler's
 * structures stay on this side.
 *
 * The simulated ring is the "hardware" both sides of the timer workloads share: it executes
 * jobs one after the other, each taking a fixed time, and signals each job's hardware fence
 * from a soft hrtimer when it is done (softirq context, as a GPU's completion interrupt
 * handler would). Its fences are allocated and initialised before the timed part, in run
 * order, on one fence context, so that run_job allocates nothing on either side.
 */
#include <linux/device/faux.h>
#include <linux/dma-fence.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <drm/gpu_scheduler.h>

#if IS_ENABLED(CONFIG_GPUKIT_VS_C)

struct gpukit_c_hw;
struct gpukit_c_hw *gpukit_c_hw_new(u32 jobs, s64 job_ns);
struct dma_fence *gpukit_c_hw_run(struct gpukit_c_hw *hw);
void gpukit_c_hw_free(struct gpukit_c_hw *hw);
void gpukit_c_hw_stats(struct gpukit_c_hw *hw, s64 *first_run, s64 *idle_ns, s64 *last_done);

struct gpukit_c_sched;
struct gpukit_c_sched *gpukit_c_sched_new(u32 credits, struct gpukit_c_hw *hw);
int gpukit_c_sched_submit(struct gpukit_c_sched *s, struct dma_fence **deps, u32 n,
			  struct dma_fence **finished);
s64 gpukit_c_sched_last_run(struct gpukit_c_sched *s);
void gpukit_c_sched_free(struct gpukit_c_sched *s);

/*
 * The simulated ring. `lock` guards the run queue (`next`, `head`, `busy_until`, `armed`,
 * and the statistics `first_run` and `idle_ns`);
 * the fences use `fence_lock`, which the timer takes only after dropping `lock`, so a fence
 * callback that runs the next job (and so takes `lock`) cannot deadlock with the timer.
 */
struct gpukit_c_hw {
	spinlock_t lock;
	spinlock_t fence_lock;
	struct hrtimer timer;
	s64 job_ns;
	ktime_t busy_until;
	bool armed;
	u32 cap, next, head;
	ktime_t first_run;
	s64 idle_ns;
	struct dma_fence **fences;
	ktime_t *deadline;
};

static const char *gpukit_c_hw_driver_name(struct dma_fence *f)
{
	return "gpukit-vs-c";
}

static const char *gpukit_c_hw_timeline_name(struct dma_fence *f)
{
	return "simulated-ring";
}

static const struct dma_fence_ops gpukit_c_hw_fence_ops = {
	.get_driver_name = gpukit_c_hw_driver_name,
	.get_timeline_name = gpukit_c_hw_timeline_name,
};

static enum hrtimer_restart gpukit_c_hw_tick(struct hrtimer *t)
{
	struct gpukit_c_hw *hw = container_of(t, struct gpukit_c_hw, timer);
	ktime_t now = ktime_get();
	enum hrtimer_restart ret = HRTIMER_NORESTART;
	unsigned long flags;
	u32 from, to;

	spin_lock_irqsave(&hw->lock, flags);
	from = hw->head;
	while (hw->head < hw->next && hw->deadline[hw->head] <= now)
		hw->head++;
	to = hw->head;
	if (hw->head < hw->next) {
		hrtimer_set_expires(t, hw->deadline[hw->head]);
		ret = HRTIMER_RESTART;
	} else {
		hw->armed = false;
	}
	spin_unlock_irqrestore(&hw->lock, flags);
	for (; from < to; from++)
		dma_fence_signal(hw->fences[from]);
	return ret;
}

struct gpukit_c_hw *gpukit_c_hw_new(u32 jobs, s64 job_ns)
{
	struct gpukit_c_hw *hw = kzalloc(sizeof(*hw), GFP_KERNEL);
	u64 context;
	u32 i;

	if (!hw)
		return NULL;
	hw->fences = kcalloc(jobs, sizeof(*hw->fences), GFP_KERNEL);
	hw->deadline = kcalloc(jobs, sizeof(*hw->deadline), GFP_KERNEL);
	if (!hw->fences || !hw->deadline)
		goto err;
	spin_lock_init(&hw->lock);
	spin_lock_init(&hw->fence_lock);
	hrtimer_setup(&hw->timer, gpukit_c_hw_tick, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	hw->job_ns = job_ns;
	context = dma_fence_context_alloc(1);
	for (i = 0; i < jobs; i++) {
		hw->fences[i] = kzalloc(sizeof(struct dma_fence), GFP_KERNEL);
		if (!hw->fences[i])
			goto err;
		dma_fence_init(hw->fences[i], &gpukit_c_hw_fence_ops, &hw->fence_lock, context,
			       i + 1);
		hw->cap = i + 1;
	}
	return hw;

err:
	gpukit_c_hw_free(hw);
	return NULL;
}

/*
 * Starts the next job on the ring and returns a reference to its hardware fence, or NULL
 * when the ring has run as many jobs as it was made for.
 */
struct dma_fence *gpukit_c_hw_run(struct gpukit_c_hw *hw)
{
	ktime_t now = ktime_get(), start;
	unsigned long flags;
	struct dma_fence *f = NULL;

	spin_lock_irqsave(&hw->lock, flags);
	if (hw->next < hw->cap) {
		/* The ring had finished everything before this job came: it stood idle. */
		if (hw->next == 0)
			hw->first_run = now;
		else if (now > hw->busy_until)
			hw->idle_ns += ktime_to_ns(ktime_sub(now, hw->busy_until));
		start = max(now, hw->busy_until);
		hw->busy_until = ktime_add_ns(start, hw->job_ns);
		hw->deadline[hw->next] = hw->busy_until;
		f = dma_fence_get(hw->fences[hw->next]);
		hw->next++;
		if (!hw->armed) {
			hw->armed = true;
			hrtimer_start(&hw->timer, hw->busy_until, HRTIMER_MODE_ABS_SOFT);
		}
	}
	spin_unlock_irqrestore(&hw->lock, flags);
	return f;
}

/*
 * When the first job was run, how long the ring stood idle between its first job and its
 * last (waiting for a job to run), and when its last job run so far finishes (0: none ran).
 */
void gpukit_c_hw_stats(struct gpukit_c_hw *hw, s64 *first_run, s64 *idle_ns, s64 *last_done)
{
	unsigned long flags;

	spin_lock_irqsave(&hw->lock, flags);
	*first_run = ktime_to_ns(hw->first_run);
	*idle_ns = hw->idle_ns;
	*last_done = hw->next ? ktime_to_ns(hw->deadline[hw->next - 1]) : 0;
	spin_unlock_irqrestore(&hw->lock, flags);
}

/* Stops the ring; fences of jobs it had not finished signal -ECANCELED. */
void gpukit_c_hw_free(struct gpukit_c_hw *hw)
{
	u32 i;

	if (hw->cap)
		hrtimer_cancel(&hw->timer);
	for (i = 0; i < hw->cap; i++) {
		if (i >= hw->head && i < hw->next) {
			dma_fence_set_error(hw->fences[i], -ECANCELED);
			dma_fence_signal(hw->fences[i]);
		}
		dma_fence_put(hw->fences[i]);
	}
	kfree(hw->deadline);
	kfree(hw->fences);
	kfree(hw);
}

struct gpukit_c_sched {
	struct drm_gpu_scheduler sched;
	struct drm_gpu_scheduler *list[1];
	struct drm_sched_entity entity;
	struct faux_device *fdev;
	struct gpukit_c_hw *hw;
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
	if (j->s->hw)
		return gpukit_c_hw_run(j->s->hw) ?: ERR_PTR(-ENOSPC);
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

/* A scheduler whose jobs complete at once (`hw` NULL) or on the simulated ring `hw`. */
struct gpukit_c_sched *gpukit_c_sched_new(u32 credits, struct gpukit_c_hw *hw)
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
	s->hw = hw;
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
