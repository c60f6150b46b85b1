// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * dma_fence glue for jobqueue's kernel adapter.
 *
 * Linux 7.2 has no Rust abstraction of struct dma_fence. The exported part of its C API
 * (dma_fence_init, dma_fence_add_callback, dma_fence_remove_callback, dma_fence_get_status,
 * dma_fence_wait_timeout, dma_fence_context_alloc) is called from Rust through `bindings`.
 * What is here cannot be: the reference counting (dma_fence_get/put), dma_fence_is_signaled,
 * the fence lock and dma_fence_set_error are static inline functions, the lockdep signalling
 * annotations are inline no-ops without CONFIG_LOCKDEP, and a fence whose driver and
 * timeline names are per queue needs its own dma_fence_ops.
 *
 * The functions after the fence glue exist for the KUnit suite only: struct drm_syncobj,
 * dma_fence_array, irq_work and in_hardirq() are not in the Rust bindings of Linux 7.2
 * either.
 */
#include <linux/dma-fence.h>
#include <linux/dma-fence-array.h>
#include <linux/irq_work.h>
#include <linux/preempt.h>
#include <linux/slab.h>
#include <linux/types.h>

#if IS_BUILTIN(CONFIG_DRM)
#include <drm/drm_syncobj.h>
#endif

/*
 * A jobqueue fence. `base` comes first: without a release op, the last dma_fence_put()
 * frees the fence through dma_fence_free(), i.e. kfree_rcu() of `base`, which is then the
 * whole allocation. The names are static strings owned by the Rust side ('static CStr).
 */
struct gpukit_fence {
	struct dma_fence base;
	const char *driver;
	const char *timeline;
};

static const char *gpukit_fence_driver_name(struct dma_fence *f)
{
	return container_of(f, struct gpukit_fence, base)->driver;
}

static const char *gpukit_fence_timeline_name(struct dma_fence *f)
{
	return container_of(f, struct gpukit_fence, base)->timeline;
}

static const struct dma_fence_ops gpukit_fence_ops = {
	.get_driver_name = gpukit_fence_driver_name,
	.get_timeline_name = gpukit_fence_timeline_name,
};

extern const size_t gpukit_fence_size;
struct dma_fence *gpukit_fence_init(void *mem, const char *driver, const char *timeline,
				    u64 context, u64 seqno);
bool gpukit_fence_is_ours(struct dma_fence *f);
void gpukit_fence_set_seqno(struct dma_fence *f, u64 seqno);
struct dma_fence *gpukit_fence_get(struct dma_fence *f);
void gpukit_fence_put(struct dma_fence *f);
bool gpukit_fence_is_signaled(struct dma_fence *f);
bool gpukit_fence_signal(struct dma_fence *f, int error);
bool gpukit_fence_begin_signalling(void);
void gpukit_fence_end_signalling(bool cookie);
u64 gpukit_fence_context(struct dma_fence *f);
u64 gpukit_fence_seqno(struct dma_fence *f);

/* How much zeroed kmalloc() memory gpukit_fence_init() needs (allocated by the Rust side). */
const size_t gpukit_fence_size = sizeof(struct gpukit_fence);

/*
 * Makes a pending fence with its own lock (dma_fence's inline lock) in `mem`, which must be
 * gpukit_fence_size bytes of zeroed kmalloc() memory: the fence owns it from now on, and the
 * last dma_fence_put() frees it.
 */
struct dma_fence *gpukit_fence_init(void *mem, const char *driver, const char *timeline,
				    u64 context, u64 seqno)
{
	struct gpukit_fence *f = mem;

	f->driver = driver;
	f->timeline = timeline;
	dma_fence_init(&f->base, &gpukit_fence_ops, NULL, context, seqno);
	return &f->base;
}

bool gpukit_fence_is_ours(struct dma_fence *f)
{
	/*
	 * Once signalled a fence without release/wait ops may have its ops detached, but only
	 * fences made above are compared, and only before they are published.
	 */
	return rcu_access_pointer(f->ops) == &gpukit_fence_ops;
}

/*
 * Gives a jobqueue done fence its place on its queue's timeline. Called once, when the job
 * is committed, before the fence is visible outside the submitting driver.
 */
void gpukit_fence_set_seqno(struct dma_fence *f, u64 seqno)
{
	if (gpukit_fence_is_ours(f))
		WRITE_ONCE(f->seqno, seqno);
}

struct dma_fence *gpukit_fence_get(struct dma_fence *f)
{
	return dma_fence_get(f);
}

void gpukit_fence_put(struct dma_fence *f)
{
	dma_fence_put(f);
}

bool gpukit_fence_is_signaled(struct dma_fence *f)
{
	return dma_fence_is_signaled(f);
}

/*
 * Signals `f` with `error` (0 or a negative errno) unless it has signalled already; returns
 * whether this call signalled it. The check and the signal happen under the fence lock, so two
 * racing callers cannot both set an error. Safe in hard-IRQ context.
 */
bool gpukit_fence_signal(struct dma_fence *f, int error)
{
	unsigned long flags;
	bool done = false;

	dma_fence_lock_irqsave(f, flags);
	if (!dma_fence_test_signaled_flag(f)) {
		if (error)
			dma_fence_set_error(f, error);
		dma_fence_signal_locked(f);
		done = true;
	}
	dma_fence_unlock_irqrestore(f, flags);
	return done;
}

bool gpukit_fence_begin_signalling(void)
{
	return dma_fence_begin_signalling();
}

void gpukit_fence_end_signalling(bool cookie)
{
	dma_fence_end_signalling(cookie);
}

u64 gpukit_fence_context(struct dma_fence *f)
{
	return f->context;
}

u64 gpukit_fence_seqno(struct dma_fence *f)
{
	return READ_ONCE(f->seqno);
}

#if IS_ENABLED(CONFIG_KUNIT)

struct gpukit_test_irq;
struct gpukit_test_irq *gpukit_test_irq_queue(void (*fn)(void *), void *data);
int gpukit_test_irq_done(struct gpukit_test_irq *t);
void gpukit_test_irq_free(struct gpukit_test_irq *t);
struct dma_fence *gpukit_test_array_of_one(struct dma_fence *f);

/*
 * Runs a function from an interrupt: an irq_work raised on this CPU runs in hard-IRQ context
 * (a self-IPI) on a kernel without PREEMPT_RT, the context in which a GPU's interrupt handler
 * signals fences. (A hard-mode hrtimer is not a valid place: lockdep's wait-context check
 * rejects taking a fence's spinlock_t there, as PREEMPT_RT would sleep on it.)
 */
struct gpukit_test_irq {
	struct irq_work work;
	void (*fn)(void *);
	void *data;
	bool in_hardirq;
	atomic_t done;
};

static void gpukit_test_irq_fn(struct irq_work *w)
{
	struct gpukit_test_irq *t = container_of(w, struct gpukit_test_irq, work);

	t->in_hardirq = in_hardirq();
	t->fn(t->data);
	atomic_set_release(&t->done, 1);
}

struct gpukit_test_irq *gpukit_test_irq_queue(void (*fn)(void *), void *data)
{
	struct gpukit_test_irq *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	t->fn = fn;
	t->data = data;
	init_irq_work(&t->work, gpukit_test_irq_fn);
	irq_work_queue(&t->work);
	return t;
}

/* 0 while pending; once run, 2 if it ran in hard-IRQ context and 1 otherwise. */
int gpukit_test_irq_done(struct gpukit_test_irq *t)
{
	if (!atomic_read_acquire(&t->done))
		return 0;
	return t->in_hardirq ? 2 : 1;
}

void gpukit_test_irq_free(struct gpukit_test_irq *t)
{
	irq_work_sync(&t->work);
	kfree(t);
}

/*
 * A fence of another implementation (dma_fence_array) that signals, with `f`'s error, once
 * `f` has: what a dependency from another driver looks like. Returns NULL without memory.
 */
struct dma_fence *gpukit_test_array_of_one(struct dma_fence *f)
{
	struct dma_fence **fences = kmalloc_array(1, sizeof(*fences), GFP_KERNEL);
	struct dma_fence_array *array;

	if (!fences)
		return NULL;
	fences[0] = dma_fence_get(f);
	array = dma_fence_array_create(1, fences, dma_fence_context_alloc(1), 1);
	if (!array) {
		dma_fence_put(fences[0]);
		kfree(fences);
		return NULL;
	}
	return &array->base;
}

#if IS_BUILTIN(CONFIG_DRM)

struct drm_syncobj *gpukit_test_syncobj_create(void);
void gpukit_test_syncobj_replace_fence(struct drm_syncobj *s, struct dma_fence *f);
struct dma_fence *gpukit_test_syncobj_fence_get(struct drm_syncobj *s);
void gpukit_test_syncobj_put(struct drm_syncobj *s);

/* A binary syncobj with no fence (no file or handle: the test holds the reference). */
struct drm_syncobj *gpukit_test_syncobj_create(void)
{
	struct drm_syncobj *s;

	if (drm_syncobj_create(&s, 0, NULL))
		return NULL;
	return s;
}

void gpukit_test_syncobj_replace_fence(struct drm_syncobj *s, struct dma_fence *f)
{
	drm_syncobj_replace_fence(s, f);
}

struct dma_fence *gpukit_test_syncobj_fence_get(struct drm_syncobj *s)
{
	return drm_syncobj_fence_get(s);
}

void gpukit_test_syncobj_put(struct drm_syncobj *s)
{
	drm_syncobj_put(s);
}

#endif /* CONFIG_DRM */
#endif /* CONFIG_KUNIT */
