/* The planner's cost model (plan.h) on a machine whose parts cost known amounts:
 *  - parameter counts per rank equal the model's own layouts (gpt_create_stage) for
 *    every stage and shard;
 *  - the ring all-reduce: nothing over one rank, 2 (p-1)/p bytes / bw + 2 (p-1) lat,
 *    the slower link once the group spans nodes;
 *  - a balanced pipeline of P stages and M micro-batches takes (M + P - 1) stage
 *    times, its bubble (P-1) of them; tp adds 4 all-reduces per block and the
 *    vocabulary-parallel head's 2 (and 2 small ones);
 *  - on GPUs a shard's blocks, embedding and head all-reduce over NCCL in FP16 or,
 *    through host memory, in FP32 copied down and up with an MPI all-reduce over the
 *    host's link, its loss's row statistics through the host; a part holds its ends on
 *    the GPU, so one stage never copies the residual stream, and of 2 stages the first
 *    and the last copy it twice, the first, which keeps 2 micro-batches in flight,
 *    recomputing its forward with one copy more;
 *  - steps follow S_min (1 + B_noise / B): twice the replicas, steps as predicted;
 *  - grids that do not fit are refused. */
#include <math.h>
#include <string.h>

#include "kernels_cpu.h"
#include "model.h"
#include "plan.h"
#include "testutil.h"

static double c_block(void *ctx, int threads, int tp, int Bm)
{
    (void)ctx;
    return 1e-3 * Bm / (threads * tp); /* 1 ms per sequence and thread, split by tp */
}
static double c_head(void *ctx, int threads, int Bm)
{
    (void)ctx;
    (void)threads;
    (void)Bm;
    return 0.0;
}
static double c_adam(void *ctx, int threads)
{
    (void)ctx;
    (void)threads;
    return 0.0;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 + 1e-9 * fabs(b); }

int main(void)
{
    const gpt_shape s = {64, 16, 4, 4, 32};
    /* Parameter counts against the real layouts. */
    for (int pp = 1; pp <= 4; pp *= 2)
        for (int tp = 1; tp <= 4; tp *= 2)
            for (int st = 0; st < pp; st++) {
                gpt_model m;
                const int ok = gpt_create_stage(&m, s, &backend_cpu, 1, tp, 0, st, pp) == 0;
                TU_CHECK(ok && close_to(plan_param_floats(&s, tp, pp, st), (double)m.n_params),
                         "pp %d tp %d stage %d: %.0f parameters = the layout's %zu", pp, tp, st,
                         plan_param_floats(&s, tp, pp, st), ok ? m.n_params : 0);
                if (ok) gpt_free(&m);
            }

    plan_machine mc = {.nodes = 2, .slots_per_node = 4, .intra_bw = 1e9, .inter_bw = 1e8,
                       .intra_lat = 1e-6, .inter_lat = 1e-5, .t_block = c_block,
                       .t_embed_head = c_head, .t_adam = c_adam};
    TU_CHECK(plan_allreduce_s(&mc, 1e6, 1, 1, 4) == 0.0, "all-reduce over one rank is free");
    TU_CHECK(close_to(plan_allreduce_s(&mc, 1e6, 4, 1, 4), 1.5 * 1e6 / 1e9 + 6 * 1e-6),
             "4 ranks in a node: 2 (p-1)/p bytes / bw + 2 (p-1) latency");
    TU_CHECK(close_to(plan_allreduce_s(&mc, 1e6, 4, 2, 4), 1.5 * 1e6 / 1e8 + 6 * 1e-5),
             "4 ranks spaced 2 apart span 2 nodes: the slower link");

    /* Balanced pipeline: 4 layers on 2 stages, 8 ranks x 1 thread: t_block(1, 1, Bm=2)
     * = 2 ms; a stage of 2 blocks 4 ms (+ 2 hops of 4 x Bm x T x C bytes). */
    char why[120];
    plan_estimate e;
    const int B = 8, T = 16;
    TU_CHECK(plan_estimate_grid(&mc, &s, B, T, (plan_grid){4, 2, 1, 4}, 1000, 0, &e, why,
                                sizeof why) == 0,
             "dp 4 x pp 2 fits 8 cores");
    const double hop = 2 * (1e-6 + 4.0 * 2 * T * 32 / 1e9), stage = 4e-3 + hop;
    TU_CHECK(close_to(e.compute_s, (4 + 2 - 1) * stage),
             "pipeline compute %.6f s = (M + P - 1) x stage %.6f s", e.compute_s, stage);
    TU_CHECK(close_to(e.bubble_s, stage), "bubble = (P - 1) stages (%.6f s)", e.bubble_s);
    TU_CHECK(e.threads == 1 && e.global_batch == 32 && e.steps == 1000,
             "8 ranks on 8 cores: 1 thread each; global batch 4 x 8; no noise: steps kept");

    /* Tensor parallel: 4 all-reduces of Bm T C floats per block. */
    plan_estimate t2;
    TU_CHECK(plan_estimate_grid(&mc, &s, B, T, (plan_grid){1, 1, 2, 1}, 1000, 0, &t2, why,
                                sizeof why) == 0,
             "tp 2 alone fits (4 threads a rank)");
    const double ar = plan_allreduce_s(&mc, 4.0 * B * T * 32, 2, 1, 1);
    const double small = plan_allreduce_s(&mc, 8.0 * B * T, 2, 1, 1);
    TU_CHECK(close_to(t2.tp_comm_s, 4 * 4 * ar + 2 * ar + 2 * small),
             "tp comm = 4 all-reduces x 4 blocks + the vocabulary-parallel head's");

    /* GPUs, tp 2 on one node of 2: over NCCL, then through host memory. */
    plan_machine gm = mc;
    gm.gpu = 1, gm.nodes = 1, gm.slots_per_node = 2, gm.pcie_bw = 1e10;
    plan_estimate gn, gh;
    TU_CHECK(plan_estimate_grid(&gm, &s, B, T, (plan_grid){1, 1, 2, 1}, 1000, 0, &gn, why,
                                sizeof why) == 0,
             "tp 2 on 2 GPUs fits");
    const double n = (double)B * T * 32, copy = PLAN_PCIE_LATENCY + 4.0 * n / 1e10;
    /* the loss's row statistics: 3 B T floats down and up, a max and a sum all-reduce */
    const double stats = 2 * (PLAN_PCIE_LATENCY + 12.0 * B * T / 1e10) +
                         plan_allreduce_s(&gm, 4.0 * B * T, 2, 1, 2) +
                         plan_allreduce_s(&gm, 8.0 * B * T, 2, 1, 2);
    const double nccl = 4 * plan_allreduce_s(&gm, 2.0 * n, 2, 1, 2);
    const double head_ar = nccl / 2 + stats; /* the embedding's and the head's 2 */
    TU_CHECK(close_to(gn.tp_comm_s, 4 * nccl + head_ar),
             "GPUs over NCCL: tp comm = 4 blocks x 4 FP16 all-reduces + the ends' 2 and the "
             "loss's statistics (%g s)", gn.tp_comm_s);
    TU_CHECK(close_to(gn.compute_s, 4 * (4e-3 + nccl) + head_ar),
             "GPUs: a micro-batch's blocks, their all-reduces and the ends', no copy of the "
             "stream (one stage holds both ends) (%g s)", gn.compute_s);
    gm.tp_host = 1;
    plan_estimate_grid(&gm, &s, B, T, (plan_grid){1, 1, 2, 1}, 1000, 0, &gh, why, sizeof why);
    const double host = 4 * (2 * copy + plan_allreduce_s(&gm, 4.0 * n, 2, 1, 2));
    TU_CHECK(close_to(gh.tp_comm_s, 4 * host + host / 2 + stats) && gh.tp_comm_s > gn.tp_comm_s,
             "GPUs through host memory: each all-reduce copied down and up in FP32 around "
             "MPI's (%g s against NCCL's %g s)", gh.tp_comm_s, gn.tp_comm_s);

    /* GPUs, pp 2 at tp = 1, 2 micro-batches of Bm = 4: every layer of a stage on its
     * GPU, so the stream crosses only towards the other stage (out and its gradient
     * in, or in and its gradient out); the first stage recomputes its 2 blocks'
     * forward (a third of their time) and sends its output down once more. */
    plan_machine pm = mc;
    pm.gpu = 1, pm.nodes = 1, pm.slots_per_node = 2, pm.pcie_bw = 1e10;
    plan_estimate gp;
    TU_CHECK(plan_estimate_grid(&pm, &s, B, T, (plan_grid){1, 2, 1, 2}, 1000, 0, &gp, why,
                                sizeof why) == 0,
             "pp 2 on 2 GPUs fits");
    const double nm = 4.0 * T * 32, cm = PLAN_PCIE_LATENCY + 4.0 * nm / 1e10;
    const double hm = 2 * (1e-6 + 4.0 * nm / 1e9), blocks2 = 2 * 4e-3;
    const double first = blocks2 + 2 * cm + hm + blocks2 / 3 + cm,
                 last = blocks2 + 2 * cm + hm;
    TU_CHECK(close_to(gp.compute_s, first + last + first),
             "GPUs, pp 2: stages of 2 + 1 (recomputed) and 2 copies of the stream: %g s "
             "(expected %g)", gp.compute_s, first + last + first);

    /* Statistical efficiency. */
    plan_estimate one, two;
    plan_estimate_grid(&mc, &s, B, T, (plan_grid){1, 1, 1, 1}, 1000, 512, &one, why, sizeof why);
    plan_estimate_grid(&mc, &s, B, T, (plan_grid){2, 1, 1, 1}, 1000, 512, &two, why, sizeof why);
    const double s_min = 1000 / (1 + 512.0 / (B * T));
    TU_CHECK(close_to(one.steps, 1000) && close_to(two.steps, s_min * (1 + 512.0 / (2 * B * T))),
             "noise scale 512 tokens: %.1f steps at one replica's batch, %.1f at two",
             one.steps, two.steps);

    TU_CHECK(plan_estimate_grid(&mc, &s, B, T, (plan_grid){1, 1, 3, 1}, 1000, 0, &e, why,
                                sizeof why) != 0,
             "tp 3 with 4 heads is refused");
    TU_CHECK(plan_estimate_grid(&mc, &s, B, T, (plan_grid){16, 1, 1, 1}, 1000, 0, &e, why,
                                sizeof why) != 0,
             "16 ranks on 8 cores are refused");
    TU_CHECK(plan_estimate_grid(&mc, &s, B, T, (plan_grid){1, 2, 1, 3}, 1000, 0, &e, why,
                                sizeof why) != 0,
             "3 micro-batches of a batch of 8 are refused");
    return tu_finish();
}
