/*
 * A schedule's plan, written once for the three shims (as rlx_gemm_check.h
 * and rlx_shim_table.h are): the rlx_schedule_desc of csrc/rlx_shim.h turned
 * into steps that the shim's own entry points execute. Every run of
 * consecutive dispatch commands becomes a range of one ICB of the schedule's
 * own, encoded once at creation with icb_encode_dispatch; gemms and the
 * caller's ICB ranges are steps between them (DESIGN section 4: ICB range,
 * MPS gemm, ICB range ... in one command buffer).
 *
 * The including file defines, before including this one: cmd_barrier,
 * cmd_gemm, cmd_execute_icb, icb_create, icb_encode_dispatch, icb_free,
 * ARG_CHECK and fail (the shim's own, every one of them static or in an
 * anonymous namespace). The host shim (C++) includes it too, so the C here
 * stays the common subset of C and C++.
 */
#ifndef RLX_SCHEDULE_PLAN_H
#define RLX_SCHEDULE_PLAN_H

#include "rlx_shim.h"

#include <stdlib.h>
#include <string.h>

/* One step: an ICB range (RLX_SCHEDULE_ICB: the schedule's own or the
 * caller's) or a gemm (RLX_SCHEDULE_GEMM). */
typedef struct rlx_sched_step {
    uint32_t op;
    uint32_t barrier_before;  /* encode cmd_barrier first (a dispatch's own flag is in its ICB entry) */
    rlx_icb *icb;
    uint32_t start, count;
    rlx_gemm_desc gemm;
} rlx_sched_step;

typedef struct rlx_sched_plan {
    rlx_device *dev;
    rlx_icb *own;             /* the dispatch commands, an entry each; NULL when there are none */
    rlx_sched_step *steps;
    uint32_t n_steps;
} rlx_sched_plan;

static void sched_plan_clear(rlx_sched_plan *p) {
    if (p->own) icb_free(p->own);
    free(p->steps);
    memset(p, 0, sizeof *p);
}

/* Encodes the plan's steps into cb, in order. */
static rlx_status sched_plan_encode(rlx_cmdbuf *cb, const rlx_sched_plan *p) {
    rlx_status s = RLX_OK;
    for (uint32_t i = 0; i < p->n_steps && s == RLX_OK; ++i) {
        const rlx_sched_step *st = &p->steps[i];
        if (st->barrier_before) s = cmd_barrier(cb);
        if (s != RLX_OK) break;
        s = st->op == RLX_SCHEDULE_GEMM ? cmd_gemm(cb, &st->gemm) : cmd_execute_icb(cb, st->icb, st->start, st->count);
    }
    return s;
}

/* Validates desc and builds p: the dispatches are encoded into p->own now
 * (icb_encode_dispatch checks each one); gemms and ICB ranges are checked
 * when the caller first encodes the plan (schedule_create does, into a
 * command buffer it never commits). On failure p is left empty. */
static rlx_status sched_plan_build(rlx_device *d, const rlx_schedule_desc *desc, rlx_sched_plan *p) {
    memset(p, 0, sizeof *p);
    ARG_CHECK(d && desc, "schedule_create: NULL argument");
    ARG_CHECK((desc->flags & ~RLX_SCHEDULE_SERIAL) == 0, "schedule_create: unknown flags 0x%x", desc->flags);
    ARG_CHECK(desc->n_commands == 0 || desc->commands, "schedule_create: %u commands at NULL", desc->n_commands);
    uint32_t n_dispatch = 0;
    for (uint32_t i = 0; i < desc->n_commands; ++i) {
        const uint32_t op = desc->commands[i].op;
        ARG_CHECK(op <= RLX_SCHEDULE_ICB, "schedule_create: command %u has unknown op %u", i, op);
        n_dispatch += op == RLX_SCHEDULE_DISPATCH;
    }
    p->dev = d;
    p->steps = (rlx_sched_step *)calloc(desc->n_commands ? desc->n_commands : 1, sizeof *p->steps);
    if (!p->steps) return fail(RLX_ERR_OOM, "schedule_create: out of memory");
    rlx_status s = n_dispatch ? icb_create(d, n_dispatch, &p->own) : RLX_OK;
    uint32_t entry = 0;
    for (uint32_t i = 0; i < desc->n_commands && s == RLX_OK; ++i) {
        const rlx_schedule_cmd *c = &desc->commands[i];
        rlx_sched_step *last = p->n_steps ? &p->steps[p->n_steps - 1] : NULL;
        if (c->op == RLX_SCHEDULE_DISPATCH) {
            s = icb_encode_dispatch(p->own, entry, c->pipeline, c->n_bindings, c->buffers, c->offsets, c->groups,
                                    c->threads, c->barrier_before);
            if (s != RLX_OK) break;
            if (last && last->icb == p->own && last->start + last->count == entry) {
                ++last->count;
            } else {
                rlx_sched_step *st = &p->steps[p->n_steps++];
                st->op = RLX_SCHEDULE_ICB, st->icb = p->own, st->start = entry, st->count = 1;
            }
            ++entry;
        } else {
            rlx_sched_step *st = &p->steps[p->n_steps++];
            st->op = c->op, st->barrier_before = c->barrier_before ? 1u : 0u;
            if (c->op == RLX_SCHEDULE_GEMM) st->gemm = c->gemm;
            else st->icb = c->icb, st->start = c->start, st->count = c->count;
        }
    }
    if (s != RLX_OK) sched_plan_clear(p);
    return s;
}

/* sched_plan_build, then the plan encoded once into a command buffer that is
 * never committed, which checks every gemm and ICB range as cmd_gemm and
 * cmd_execute_icb do (the schedule_create of the host and Metal shims, whose
 * schedule is its plan encoded into each command buffer that executes it;
 * needs cmd_begin and cmd_release too, and RLX_SCHEDULE_PLAN_MAKE defined). */
#ifdef RLX_SCHEDULE_PLAN_MAKE
static rlx_status sched_plan_make(rlx_device *d, const rlx_schedule_desc *desc, rlx_sched_plan *p) {
    rlx_status s = sched_plan_build(d, desc, p);
    rlx_cmdbuf *trial = NULL;
    if (s == RLX_OK && (s = cmd_begin(d, &trial)) == RLX_OK) {
        s = sched_plan_encode(trial, p);
        cmd_release(trial);
    }
    if (s != RLX_OK) sched_plan_clear(p);
    return s;
}
#endif

#endif
