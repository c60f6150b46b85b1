// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A QEMU (7.2) TCG plugin for `tcg_probe.py`: counts, per guest PC, executed instructions,
 * memory accesses (loads, stores) and translation-block entries, only inside windows of
 * execution that begin when the instruction at `start` executes and end at `stop`. Windows
 * are numbered from 0 (at most 16); at exit one line per window and PC with a nonzero count
 * is written to `out`: "window pc(hex) insns loads stores tb-entries".
 *
 *   cc -O2 -shared -fPIC -fvisibility=hidden -o tcg_window.so tcg_window.c
 *   qemu-system-x86_64 ... -plugin ./tcg_window.so,start=0x...,stop=0x...,out=counts.txt
 *
 * The plugin API (version 1) is declared here by hand: Debian's QEMU ships no qemu-plugin.h.
 * Run the guest without KASLR (`nokaslr`) so that the addresses are the vmlinux ones.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
} qemu_info_t;
enum qemu_plugin_cb_flags { CB_NO_REGS, CB_R_REGS, CB_RW_REGS };
enum qemu_plugin_mem_rw { MEM_R = 1, MEM_W, MEM_RW };

typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(unsigned int, void *);
typedef void (*mem_cb)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *);
typedef void (*exit_cb)(qemu_plugin_id_t, void *);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *, udata_cb,
					  enum qemu_plugin_cb_flags, void *);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *, udata_cb,
					    enum qemu_plugin_cb_flags, void *);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *, mem_cb,
				      enum qemu_plugin_cb_flags, enum qemu_plugin_mem_rw, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, exit_cb, void *);
void qemu_plugin_outs(const char *);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define WINDOWS 64
#define MAXPCS 8

/* Counters per window, allocated the first time the site runs inside one. */
struct counts {
	uint64_t exec, loads, stores, tbs, l1miss, l2miss;
};

struct site {
	uint64_t pc;
	struct counts *w;
};

/* Per window: operations, accesses, distinct lines and pages per operation (summed), misses. */
static uint64_t marks[WINDOWS], accesses[WINDOWS], lines[WINDOWS], pages[WINDOWS],
	l1miss[WINDOWS], l2miss[WINDOWS];

/* The lines and pages of the current operation: open addressing, cleared by generation. */
#define SEEN 8192
static uint64_t seen_key[SEEN];
static uint32_t seen_gen[SEEN];
static uint32_t gen = 1, fill;

static void new_op(void)
{
	gen++;
	fill = 0;
}

static bool first_touch(uint64_t key)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 51;
	for (;;) {
		h &= SEEN - 1;
		if (seen_gen[h] != gen) {
			/* An operation that touches more than SEEN / 2 is counted in parts. */
			if (++fill > SEEN / 2)
				new_op();
			seen_gen[h] = gen;
			seen_key[h] = key;
			return true;
		}
		if (seen_key[h] == key)
			return false;
		h++;
	}
}

/* Set-associative LRU caches (tags with last-use stamps). */
struct cache {
	unsigned sets, ways;
	uint64_t *tag, *used;
};
static struct cache l1 = { 64, 8 }, l2 = { 1024, 16 };
static uint64_t tick;

static bool cache_hit(struct cache *c, uint64_t line)
{
	unsigned set = line % c->sets;
	uint64_t *tag = c->tag + set * c->ways, *used = c->used + set * c->ways;
	unsigned victim = 0;
	for (unsigned i = 0; i < c->ways; i++) {
		if (used[i] && tag[i] == line) {
			used[i] = ++tick;
			return true;
		}
		if (used[i] < used[victim])
			victim = i;
	}
	tag[victim] = line;
	used[victim] = ++tick;
	return false;
}

/* Open addressing by pc; sites live for the run (retranslation finds the same one). */
#define SLOTS (1u << 22)
static struct site **table;
static uint64_t start_pc[MAXPCS], stop_pc[MAXPCS], mark_pc[MAXPCS];
static unsigned n_start, n_stop, n_mark;
static const char *out_path = "tcg_window.txt";
static int win = -1;	  /* current window, or the last one */
static bool active;
static unsigned nwin;

static struct site *site_of(uint64_t pc)
{
	uint64_t h = (pc * 0x9e3779b97f4a7c15ull) >> 42;
	for (;;) {
		struct site *s = table[h & (SLOTS - 1)];
		if (!s) {
			s = calloc(1, sizeof(*s));
			s->pc = pc;
			table[h & (SLOTS - 1)] = s;
			return s;
		}
		if (s->pc == pc)
			return s;
		h++;
	}
}

static struct counts *counts_of(struct site *s)
{
	if (!s->w)
		s->w = calloc(WINDOWS, sizeof(*s->w));
	return &s->w[win];
}

static void on_start(unsigned int vcpu, void *u)
{
	if (!active && nwin < WINDOWS) {
		win = nwin++;
		active = true;
		new_op();
	}
}

static void on_stop(unsigned int vcpu, void *u)
{
	active = false;
}

static void on_mark(unsigned int vcpu, void *u)
{
	if (active) {
		marks[win]++;
		new_op();
	}
}

static void on_insn(unsigned int vcpu, void *u)
{
	if (active)
		counts_of(u)->exec++;
}

static void on_tb(unsigned int vcpu, void *u)
{
	if (active)
		counts_of(u)->tbs++;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t va, void *u)
{
	uint64_t line = va >> 6;

	if (!active)
		return;
	if (qemu_plugin_mem_is_store(info))
		counts_of(u)->stores++;
	else
		counts_of(u)->loads++;
	accesses[win]++;
	/* Lines and pages share the table: a page key has its top bit set. */
	lines[win] += first_touch(line);
	pages[win] += first_touch((va >> 12) | (1ull << 63));
	if (!cache_hit(&l1, line)) {
		bool l2hit = cache_hit(&l2, line);

		l1miss[win]++;
		l2miss[win] += !l2hit;
		counts_of(u)->l1miss++;
		counts_of(u)->l2miss += !l2hit;
	}
}

static bool listed(const uint64_t *pcs, unsigned n, uint64_t pc)
{
	for (unsigned i = 0; i < n; i++)
		if (pcs[i] == pc)
			return true;
	return false;
}

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		struct site *s = site_of(pc);
		if (i == 0)
			qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, CB_NO_REGS, s);
		/* Stop before start, so that one pc could serve as both. */
		if (listed(stop_pc, n_stop, pc))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_stop, CB_NO_REGS, NULL);
		if (listed(start_pc, n_start, pc))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_start, CB_NO_REGS, NULL);
		if (listed(mark_pc, n_mark, pc))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, CB_NO_REGS, NULL);
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, CB_NO_REGS, s);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, CB_NO_REGS, MEM_RW, s);
	}
}

static void at_exit(qemu_plugin_id_t id, void *u)
{
	char path[4096];
	FILE *f = fopen(out_path, "w");
	if (!f)
		return;
	for (size_t i = 0; i < SLOTS; i++) {
		struct site *s = table[i];
		if (!s || !s->w)
			continue;
		for (unsigned w = 0; w < nwin; w++) {
			struct counts *c = &s->w[w];
			if (c->exec || c->tbs || c->loads || c->stores)
				fprintf(f, "%u %" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
					   "\n",
					w, s->pc, c->exec, c->loads, c->stores, c->tbs);
		}
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s.miss", out_path);
	f = fopen(path, "w");
	if (!f)
		return;
	for (size_t i = 0; i < SLOTS; i++) {
		struct site *s = table[i];
		if (!s || !s->w)
			continue;
		for (unsigned w = 0; w < nwin; w++)
			if (s->w[w].l1miss)
				fprintf(f, "%u %" PRIx64 " %" PRIu64 " %" PRIu64 "\n", w, s->pc,
					s->w[w].l1miss, s->w[w].l2miss);
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s.win", out_path);
	f = fopen(path, "w");
	if (!f)
		return;
	for (unsigned w = 0; w < nwin; w++)
		fprintf(f, "%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			w, marks[w], accesses[w], lines[w], pages[w], l1miss[w], l2miss[w]);
	fclose(f);
}

/* "0x...:0x...:..." into pcs; returns how many. */
static unsigned parse_pcs(const char *arg, uint64_t *pcs)
{
	unsigned n = 0;
	char *end;

	while (n < MAXPCS) {
		pcs[n++] = strtoull(arg, &end, 0);
		if (*end != ':')
			break;
		arg = end + 1;
	}
	return n;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							      const qemu_info_t *info, int argc,
							      char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "start=", 6))
			n_start = parse_pcs(argv[i] + 6, start_pc);
		else if (!strncmp(argv[i], "stop=", 5))
			n_stop = parse_pcs(argv[i] + 5, stop_pc);
		else if (!strncmp(argv[i], "l2kb=", 5))
			l2.sets = strtoul(argv[i] + 5, NULL, 0) * 1024 / 64 / l2.ways;
		else if (!strncmp(argv[i], "mark=", 5))
			n_mark = parse_pcs(argv[i] + 5, mark_pc);
		else if (!strncmp(argv[i], "out=", 4))
			out_path = strdup(argv[i] + 4);
	}
	table = calloc(SLOTS, sizeof(*table));
	l1.tag = calloc(l1.sets * l1.ways, 8);
	l1.used = calloc(l1.sets * l1.ways, 8);
	l2.tag = calloc(l2.sets * l2.ways, 8);
	l2.used = calloc(l2.sets * l2.ways, 8);
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
