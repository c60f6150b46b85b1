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

#define WINDOWS 16

struct site {
	uint64_t pc;
	uint64_t exec[WINDOWS], loads[WINDOWS], stores[WINDOWS], tbs[WINDOWS];
};

/* Open addressing by pc; sites live for the run (retranslation finds the same one). */
#define SLOTS (1u << 22)
static struct site **table;
static uint64_t start_pc, stop_pc;
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

static void on_start(unsigned int vcpu, void *u)
{
	if (!active && nwin < WINDOWS) {
		win = nwin++;
		active = true;
	}
}

static void on_stop(unsigned int vcpu, void *u)
{
	active = false;
}

static void on_insn(unsigned int vcpu, void *u)
{
	if (active)
		((struct site *)u)->exec[win]++;
}

static void on_tb(unsigned int vcpu, void *u)
{
	if (active)
		((struct site *)u)->tbs[win]++;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t va, void *u)
{
	if (!active)
		return;
	if (qemu_plugin_mem_is_store(info))
		((struct site *)u)->stores[win]++;
	else
		((struct site *)u)->loads[win]++;
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
		if (pc == stop_pc)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_stop, CB_NO_REGS, NULL);
		if (pc == start_pc)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_start, CB_NO_REGS, NULL);
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, CB_NO_REGS, s);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, CB_NO_REGS, MEM_RW, s);
	}
}

static void at_exit(qemu_plugin_id_t id, void *u)
{
	FILE *f = fopen(out_path, "w");
	if (!f)
		return;
	for (size_t i = 0; i < SLOTS; i++) {
		struct site *s = table[i];
		if (!s)
			continue;
		for (unsigned w = 0; w < nwin; w++)
			if (s->exec[w] || s->tbs[w] || s->loads[w] || s->stores[w])
				fprintf(f, "%u %" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
					   "\n",
					w, s->pc, s->exec[w], s->loads[w], s->stores[w], s->tbs[w]);
	}
	fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							      const qemu_info_t *info, int argc,
							      char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "start=", 6))
			start_pc = strtoull(argv[i] + 6, NULL, 0);
		else if (!strncmp(argv[i], "stop=", 5))
			stop_pc = strtoull(argv[i] + 5, NULL, 0);
		else if (!strncmp(argv[i], "out=", 4))
			out_path = strdup(argv[i] + 4);
	}
	table = calloc(SLOTS, sizeof(*table));
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
