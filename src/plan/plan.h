/* plan — the cost model behind `gentrain plan`: for a model, a batch and a machine,
 * the projected step time, memory and time to a target loss of every dp x pp x tp grid.
 *
 * Step time of a grid (dp replicas x pp stages x tp shards, M micro-batches of Bm =
 * batch_size / M sequences; a rank runs `threads` threads):
 *   stage s, one micro-batch:  t_s = n_s x (t_block + 4 x allreduce(Bm T C floats, tp))
 *                                    + (last stage) t_embed_head / tp
 *                                      + 2 x allreduce(Bm T C, tp) + 2 small ones
 *                                    + 2 x p2p(Bm T C) (pp > 1)
 *     (tp also cuts the vocabulary: the embedding and head, model.h)
 *   on GPUs, a part (pp > 1 or tp > 1, src/engine/gpu_stage.h: every layer of it on the
 *   GPU, the ends vocabulary-parallel with tp > 1) also moves its residual stream
 *   between host and GPU, copies of Bm T C floats over pcie_bw: in and out, forward and
 *   backward, but none at an end its GPU holds (the first stage 2, the last 2, a middle
 *   one 4; one stage none); its 4 tp all-reduces a block, and the embedding's and the
 *   head's 2, go over NCCL in FP16 (allreduce of Bm T C halves over the GPUs' link), or
 *   through host memory (tp_host: each copied down and up in FP32 over pcie_bw, and an
 *   MPI all-reduce of Bm T C floats over the host's link, inside a node no faster than
 *   pcie_bw); the loss's row statistics go through the host (3 Bm T floats down and
 *   up, a max and a sum all-reduce of them);
 *     + a GPU stage keeping more than one micro-batch in flight recomputes its
 *       forward before its backward (gpu_stage.h): n_s x (t_block / 3 + 2 tp
 *       all-reduces) and half its copies of the stream again
 *   pipeline (1F1B):           sum_s t_s + (M - 1) x max_s t_s
 *     (the first micro-batch crosses every stage, then the slowest stage sets the
 *      pace; the bubble is what this adds to M x max_s t_s)
 *   data parallel:             the gradient all-reduce over dp, of which what the
 *                              last micro-batch's backward (2/3 of its stage time)
 *                              cannot hide is exposed, and at least its last bucket
 *   optimizer:                 n_rank x t_adam_float
 * t_block (one block's forward + backward on Bm x T, a 1/tp shard of it) and
 * t_embed_head come from the machine (plan_machine): measured on this allocation by
 * `--measure`, or flops / (peak x efficiency) for a described cluster. All-reduce:
 * ring, 2 (p-1)/p bytes / bw + 2 (p-1) latency, over the slower link the group spans.
 *
 * Statistical efficiency (McCandlish et al.): with the gradient noise scale B_noise
 * (tokens, logged by data-parallel training), reaching a loss takes
 * S(B) = S_min (1 + B_noise / B) steps at a global batch of B tokens. The config's
 * `steps` are taken as what one replica's batch (batch_size x block_size tokens) needs,
 * which fixes S_min; a grid with dp replicas trains on dp times that batch. */
#ifndef GT_PLAN_H
#define GT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h" /* defines: gpt_shape */

/* Where the grid runs and what its parts cost. */
typedef struct plan_machine {
    int nodes;
    int slots_per_node;     /* cores (CPU: ranks share them) or GPUs (one rank each) */
    int gpu;                /* 1: one rank per GPU; 0: CPU ranks share the cores */
    double intra_bw, inter_bw;   /* bytes/s of a rank's link inside / between nodes */
    double intra_lat, inter_lat; /* seconds per message */
    double p2p_bw, p2p_lat;      /* point to point inside a node (0: the link's) */
    /* GPUs: bytes/s between a GPU and its host (PCIe; 0: copies not counted), and
     * whether the shards' blocks all-reduce through host memory (1) or over NCCL (0). */
    double pcie_bw;
    int tp_host;
    /* Compute costs, seconds: one block forward + backward on a Bm x T micro-batch
     * (its 1/tp shard), the embedding + final LayerNorm + head the same way, and AdamW
     * per parameter, for a rank of `threads` threads. */
    double (*t_block)(void *ctx, int threads, int tp, int Bm);
    double (*t_embed_head)(void *ctx, int threads, int Bm);
    double (*t_adam)(void *ctx, int threads);
    void *ctx;
} plan_machine;

/* Seconds per host <-> GPU copy besides its bytes (a launch and a wait). */
#define PLAN_PCIE_LATENCY 10e-6

typedef struct plan_grid {
    int dp, pp, tp, micro;
} plan_grid;

typedef struct plan_estimate {
    plan_grid g;
    int threads;            /* per rank */
    double compute_s;       /* the pipeline's compute, bubble included */
    double bubble_s;        /* what the pipeline adds to M x slowest stage */
    double tp_comm_s, pp_comm_s, dp_exposed_s, optimizer_s;
    double step_s;          /* all of the above */
    double mem_bytes;       /* per rank: parameters, gradients, AdamW, activations */
    double global_batch;    /* sequences */
    double steps;           /* to the target */
    double total_s;         /* steps x step_s */
} plan_estimate;

/* Ring all-reduce of `bytes` over p ranks spaced `span` ranks apart, ranks_per_node to
 * a node (the group crosses nodes when p x span > ranks_per_node). */
double plan_allreduce_s(const plan_machine *mc, double bytes, int p, int span,
                        int ranks_per_node);

/* The estimate of one grid for shape s with per-replica batch B, context T; steps_ref
 * and noise_tokens as above (noise_tokens <= 0: steps do not depend on the batch).
 * Returns 0, or -1 when the grid does not fit the machine or the model (the reason in
 * why). */
int plan_estimate_grid(const plan_machine *mc, const gpt_shape *s, int B, int T,
                       plan_grid g, double steps_ref, double noise_tokens,
                       plan_estimate *out, char *why, size_t cap);

/* Floats a rank holds: parameters of its part, and activations of one micro-batch
 * slot of Bm x T (att_matrix: attention keeps its T x T probabilities, as the GPU
 * engine does; else a log-sum-exp per row, as the CPU's). */
double plan_param_floats(const gpt_shape *s, int tp, int pp, int stage);
double plan_act_floats(const gpt_shape *s, int tp, int pp, int stage, int Bm, int T,
                       int att_matrix);

/* Floating-point work of one block's forward + backward on Bm x T (a 1/tp shard), and
 * of the embedding + head: what a described cluster's compute times come from. */
double plan_block_flops(const gpt_shape *s, int tp, int Bm, int T);
double plan_head_flops(const gpt_shape *s, int Bm, int T);

#endif
