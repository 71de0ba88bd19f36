/* plan — see plan.h. Pure arithmetic: nothing here measures or prints. */
#include "plan.h"

#include <math.h>
#include <stdio.h>

static int stage_layers(const gpt_shape *s, int pp, int stage)
{
    return s->n_layer / pp + (stage < s->n_layer % pp ? 1 : 0);
}

double plan_param_floats(const gpt_shape *s, int tp, int pp, int stage)
{
    const double C = s->n_embd, Cl = C / tp, V = s->vocab_size;
    /* Per block: two LayerNorms, c_attn and mlp.c_fc cut by rows, the projections by
     * columns with whole biases (model.h). */
    const double block = 4 * C + (3 * Cl * C + 3 * Cl) + (C * Cl + C) + (4 * Cl * C + 4 * Cl) +
                         (C * 4 * Cl + C);
    double n = stage_layers(s, pp, stage) * block;
    /* The vocabulary is cut by tp too: wte's rows (and the last stage's copy). */
    if (stage == 0) n += V / tp * C + (double)s->block_size * C;
    if (stage == pp - 1) n += 2 * C + (pp > 1 ? V / tp * C : 0);
    return n;
}

double plan_act_floats(const gpt_shape *s, int tp, int pp, int stage, int Bm, int T,
                       int att_matrix)
{
    /* The buffers of model_acts.c's activation slot, for this stage's blocks: attention
     * keeps the T x T probabilities (the GPU's) or one log-sum-exp per row (the CPU's,
     * attention_cpu.h). */
    const double L = stage_layers(s, pp, stage), C = s->n_embd, Cl = C / tp,
                 NHl = (double)s->n_head / tp, BT = (double)Bm * T, V = s->vocab_size;
    const double per_block = BT * C * 6 + BT * 4 + BT * Cl * (3 + 1 + 8) +
                             (double)Bm * NHl * T * (att_matrix ? T : 1);
    const double once = BT * C * 4 + BT * 6 + BT * Cl * 11 + (stage == pp - 1 ? BT * V / tp : 0);
    return L * per_block + once;
}

double plan_block_flops(const gpt_shape *s, int tp, int Bm, int T)
{
    /* Forward 2 flops per multiply-add, backward twice that: 6 x tokens x weights of
     * the block's shard (12 C^2 / tp), plus attention's two T x T products per head. */
    const double C = s->n_embd, BT = (double)Bm * T;
    return 6.0 * BT * 12.0 * C * C / tp + 12.0 * BT * T * C / tp;
}

double plan_head_flops(const gpt_shape *s, int Bm, int T)
{
    return 6.0 * (double)Bm * T * (double)s->vocab_size * s->n_embd; /* whole; / tp */
}

double plan_allreduce_s(const plan_machine *mc, double bytes, int p, int span,
                        int ranks_per_node)
{
    if (p <= 1) return 0.0;
    const int crosses = (double)p * span > ranks_per_node;
    const double bw = crosses ? mc->inter_bw : mc->intra_bw;
    const double lat = crosses ? mc->inter_lat : mc->intra_lat;
    return 2.0 * (p - 1) / p * bytes / bw + 2.0 * (p - 1) * lat;
}

static double p2p_s(const plan_machine *mc, double bytes, int crosses)
{
    if (crosses) return mc->inter_lat + bytes / mc->inter_bw;
    if (mc->p2p_bw > 0) return mc->p2p_lat + bytes / mc->p2p_bw;
    return mc->intra_lat + bytes / mc->intra_bw;
}

/* One copy of `bytes` between the host and a GPU (0 when pcie_bw is not given). */
static double host_copy_s(const plan_machine *mc, double bytes)
{
    return mc->pcie_bw > 0 ? PLAN_PCIE_LATENCY + bytes / mc->pcie_bw : 0.0;
}

/* The all-reduce of a GPU shard's n activations through host memory: FP32 down, MPI over
 * the host's link (inside a node no faster than the GPU's link to the host), and up. */
static double host_path_allreduce_s(const plan_machine *mc, double n, int tp, int per_node)
{
    plan_machine host = *mc;
    if (mc->pcie_bw > 0 && mc->pcie_bw < host.intra_bw) host.intra_bw = mc->pcie_bw;
    return 2.0 * host_copy_s(mc, 4.0 * n) + plan_allreduce_s(&host, 4.0 * n, tp, 1, per_node);
}

/* What one micro-batch costs a stage besides its blocks' compute, by where the grid runs
 * (plan.h): seconds per block and per stage. */
typedef struct stage_costs {
    double block_ar;  /* one block's 4 tp all-reduces (2 forward, 2 backward) */
    double copy;      /* GPU parts: one host <-> GPU crossing of the residual stream */
    double head, head_ar; /* the last stage: embedding + head, and their tp all-reduces */
    double hop;       /* pp > 1: the activations out and their gradient back */
} stage_costs;

static stage_costs costs_of(const plan_machine *mc, const gpt_shape *s, plan_grid g, int Bm,
                            int T, int threads, int per_node)
{
    const double n = (double)Bm * T * s->n_embd, act_bytes = 4.0 * n;
    const int part = mc->gpu && (g.tp > 1 || g.pp > 1); /* src/engine/gpu_stage.h */
    stage_costs c;
    if (!part || g.tp == 1)
        c.block_ar = 4.0 * plan_allreduce_s(mc, act_bytes, g.tp, 1, per_node);
    else if (mc->tp_host)
        c.block_ar = 4.0 * host_path_allreduce_s(mc, n, g.tp, per_node);
    else /* NCCL: FP16 on the GPUs' link */
        c.block_ar = 4.0 * plan_allreduce_s(mc, 2.0 * n, g.tp, 1, per_node);
    c.copy = part ? host_copy_s(mc, act_bytes) : 0.0;
    /* The embedding and head are cut by vocabulary over tp, with 2 all-reduces of the
     * activations (embedding, head input gradient) and the loss's small ones. A GPU
     * part's run on its GPU: the 2 go as a block's do, and the loss's row statistics
     * (max, then sums and target logits) through the host, 3 Bm T floats down and up. */
    c.head = mc->t_embed_head(mc->ctx, threads, Bm) / g.tp;
    if (part)
        c.head_ar = c.block_ar / 2.0 +
                    (g.tp > 1 ? 2.0 * host_copy_s(mc, 12.0 * Bm * T) : 0.0) +
                    plan_allreduce_s(mc, 4.0 * Bm * T, g.tp, 1, per_node) +
                    plan_allreduce_s(mc, 8.0 * Bm * T, g.tp, 1, per_node);
    else
        c.head_ar = 2.0 * plan_allreduce_s(mc, act_bytes, g.tp, 1, per_node) +
                    2.0 * plan_allreduce_s(mc, 8.0 * Bm * T, g.tp, 1, per_node);
    /* Ranks fill the nodes in order: a pipeline hop crosses nodes when a replica spans
     * more ranks than a node holds. */
    c.hop = g.pp > 1 ? 2.0 * p2p_s(mc, act_bytes, g.pp * g.tp > per_node) : 0.0;
    return c;
}

int plan_estimate_grid(const plan_machine *mc, const gpt_shape *s, int B, int T,
                       plan_grid g, double steps_ref, double noise_tokens,
                       plan_estimate *out, char *why, size_t cap)
{
    const int ranks = g.dp * g.pp * g.tp, slots = mc->nodes * mc->slots_per_node;
    if (s->n_head % g.tp != 0 || g.pp > s->n_layer || g.micro < 1 || B % g.micro != 0 ||
        ranks > slots || (mc->gpu && ranks != slots)) {
        snprintf(why, cap, "does not fit");
        return -1;
    }
    const int threads = mc->gpu ? 1 : slots / ranks;
    if (!mc->gpu && (slots % ranks != 0 || threads < 1)) {
        snprintf(why, cap, "ranks do not share the cores evenly");
        return -1;
    }
    const int Bm = B / g.micro;
    const int per_node = (ranks + mc->nodes - 1) / mc->nodes;
    const double tb = mc->t_block(mc->ctx, threads, g.tp, Bm);
    const stage_costs c = costs_of(mc, s, g, Bm, T, threads, per_node);
    double sum = 0.0, slowest = 0.0, tp_comm = 0.0, pp_comm = 0.0, max_params = 0.0,
           max_mem = 0.0;
    for (int st = 0; st < g.pp; st++) {
        const int n = stage_layers(s, g.pp, st);
        const int in_flight = g.pp - st < g.micro ? g.pp - st : g.micro;
        /* A GPU part's residual stream crosses the bus in and out, forward and backward,
         * but not at an end its GPU holds: the first stage starts from tokens, the last
         * ends in the loss. */
        const int copies = 2 * (st > 0) + 2 * (st < g.pp - 1);
        double t = n * (tb + c.block_ar) + copies * c.copy + c.hop;
        tp_comm += n * c.block_ar;
        /* A GPU holds one micro-batch's activations: a stage with more in flight runs
         * its forward again before its backward (src/engine/gpu_stage.h), a third of a
         * block's forward + backward, with its 2 tp all-reduces, the stream in and out
         * once more. */
        if (mc->gpu && in_flight > 1) {
            t += n * (tb / 3.0 + c.block_ar / 2.0) + copies / 2 * c.copy;
            tp_comm += n * c.block_ar / 2.0;
        }
        if (st == g.pp - 1) {
            t += c.head + c.head_ar;
            tp_comm += c.head_ar;
        }
        pp_comm += c.hop;
        sum += t;
        if (t > slowest) slowest = t;
        const double params = plan_param_floats(s, g.tp, g.pp, st);
        if (params > max_params) max_params = params;
        const double acts = plan_act_floats(s, g.tp, g.pp, st, Bm, T, mc->gpu);
        const double mem = 16.0 * params + 4.0 * in_flight * acts;
        if (mem > max_mem) max_mem = mem;
    }
    const double compute = sum + (g.micro - 1) * slowest;
    /* Data parallel: the reduction of the largest part's gradients, hidden behind the
     * last micro-batch's backward except its last bucket (25 MiB by default). */
    const double grad_bytes = 4.0 * max_params;
    const double ar = plan_allreduce_s(mc, grad_bytes, g.dp, g.pp * g.tp, per_node);
    const double last_bucket = plan_allreduce_s(
        mc, grad_bytes < 25.0 * 1048576 ? grad_bytes : 25.0 * 1048576, g.dp, g.pp * g.tp,
        per_node);
    double exposed = ar - 2.0 / 3.0 * slowest;
    if (exposed < last_bucket) exposed = last_bucket;
    if (g.dp == 1) exposed = 0.0;
    const double opt = max_params * mc->t_adam(mc->ctx, threads);

    out->g = g;
    out->threads = threads;
    out->compute_s = compute;
    out->bubble_s = compute - g.micro * slowest;
    out->tp_comm_s = tp_comm * g.micro;
    out->pp_comm_s = pp_comm * g.micro;
    out->dp_exposed_s = exposed;
    out->optimizer_s = opt;
    out->step_s = compute + exposed + opt;
    out->mem_bytes = max_mem;
    out->global_batch = (double)B * g.dp;
    if (noise_tokens > 0) {
        const double b_ref = (double)B * T, b = out->global_batch * T;
        const double s_min = steps_ref / (1.0 + noise_tokens / b_ref);
        out->steps = s_min * (1.0 + noise_tokens / b);
    } else {
        out->steps = steps_ref;
    }
    out->total_s = out->steps * out->step_s;
    return 0;
}
