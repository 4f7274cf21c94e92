/* Attention of dapo-rl's training forward on packed tokens, forward and backward, on x86 CPUs with
   AVX-512 (dapo.trainer.fused_cpu_ops wraps them in autograd; dapo.rollout.cpu_kernels builds them).

   The shared-prompt layout (dapo.trainer.batch): a micro-batch's N tokens are packed, each distinct
   prompt's tokens (a segment), then each response's continuation (a segment). A prompt token sees
   its prompt's tokens up to itself; a continuation token sees its whole prompt, then its own
   segment up to itself. For each token t, query head n and its KV head h = n / G (grouped-query):
       s_j = scale q_n . k_hj,  p = softmax(s),  out_n = sum_j p_j v_hj,  lse_n = log sum_j exp(s_j),
   over the keys j that t sees, in float32 (bf16 values read exactly; out rounded once). Backward,
   p recomputed from lse (no (queries x keys) tensor kept), as FlashAttention's:
       dp_j = g . v_j,  ds_j = p_j (dp_j - sum_l p_l dp_l),
       dq = scale sum_j ds_j k_j,  dk_j = scale sum_t ds_tj q_t,  dv_j = sum_t p_tj g_t,
   each (prompt, KV head) by one thread, so that a prompt's keys, seen by all its responses, sum
   their gradients in one place, in a fixed order (the same numbers on any thread count).

   Two query heads of a KV head go together, sharing each key's and value's load, and every sum of
   products runs in at least eight independent registers (an FMA's latency is four).

   qk: (N, (H + Hkv) d) float32 at row stride qk_stride: the rotated queries, then keys. v: (N, Hkv d)
   at row stride v_stride, bf16 where `bf16` (then out, grad_out and grad_v are too) or float32.
   Segments: prompt u starts at token prompt_start[u], prompt_length[u] long; response row r at
   row_start[r], row_length[r] long, after prompt row_prompt[r]. rows_by_prompt lists the rows
   prompt by prompt, prompt u's at [prompt_rows[u], prompt_rows[u + 1]). d % 16 == 0 (the caller
   checks; any such d: a head is read 16 floats at a time, summed 64 columns at a time). A NaN
   score makes its query's output NaN, as torch's softmax does. */
#include <string.h>

#include "vector_math.h"
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    const float *qk;
    long qk_stride;
    const void *v;
    long v_stride;
    int bf16;
    long heads, kv_heads, d, groups;
    float scale;
} Tensors;

/* The keys one segment's tokens see: `prefix` of them from prefix_start (its prompt's), then its
   own `length` from `start`, the i-th token seeing prefix + i + 1 keys. */
typedef struct {
    long prefix_start, prefix, start, length;
} Segment;

static inline long key_token(const Segment *s, long j) {
    return j < s->prefix ? s->prefix_start + j : s->start + j - s->prefix;
}

/* out_g[j] = scale x_g . row(key j of s) for j < count, g = 0, 1, row(token) at rows + token
   stride + offset, bf16 or float32: 8 keys x 2 queries at a time, 16 independent sums, their lanes
   added by one transposing add tree (sum16). x1 == x0 (a lone query head): out0 only, 8 sums. */
static void pair_scores(const float *x0, const float *x1, const Segment *s, long count, const void *rows, long stride,
                        long offset, int bf16, long d, float scale, float *out0, float *out1) {
    const int two = x1 != x0;
    for (long j0 = 0; j0 < count; j0 += 8) {
        const long n = count - j0 < 8 ? count - j0 : 8;
        long at[8];
        for (long k = 0; k < 8; ++k) at[k] = key_token(s, j0 + (k < n ? k : 0)) * stride + offset;
        __m512 acc[16];
        for (int k = 0; k < 16; ++k) acc[k] = _mm512_setzero_ps();
        for (long c = 0; c < d; c += 16) {
            const __m512 a = _mm512_loadu_ps(x0 + c), b = _mm512_loadu_ps(x1 + c);
            for (int k = 0; k < 8; ++k) {
                const __m512 row = load(rows, at[k] + c, bf16, 0xFFFF);
                acc[k] = _mm512_fmadd_ps(a, row, acc[k]);
                if (two) acc[8 + k] = _mm512_fmadd_ps(b, row, acc[8 + k]);
            }
        }
        const __m512 sums = _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale));
        const __mmask16 first = (__mmask16)((1u << n) - 1);
        _mm512_mask_storeu_ps(out0 + j0, first, sums);
        if (two) _mm512_mask_storeu_ps(out1 + j0, first, _mm512_shuffle_f32x4(sums, sums, 0xEE));  /* lanes 8.. */
    }
}

/* acc_g[0..d) = factor_g sum_{j < count} w_g[j] row(key j of s), g = 0, 1; row(token) at
   rows + token stride + offset, bf16 or float32; in registers 64 columns at a time. w1 == w0 (a
   lone query head): acc0 only. */
static void key_sums(const float *w0, const float *w1, const Segment *s, long count, const void *rows, long stride,
                     long offset, int bf16, long d, float f0, float f1, float *acc0, float *acc1) {
    const int two = w1 != w0;
    for (long c0 = 0; c0 < d; c0 += 64) {
        const long width = d - c0 < 64 ? d - c0 : 64;
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        __m512 b[4] = {a[0], a[0], a[0], a[0]};
        for (long j = 0; j < count; ++j) {
            const long at = key_token(s, j) * stride + offset + c0;
            const __m512 u = _mm512_set1_ps(w0[j]), w = _mm512_set1_ps(w1[j]);
            for (long k = 0; k < width / 16; ++k) {
                const __m512 row = load(rows, at + 16 * k, bf16, 0xFFFF);
                a[k] = _mm512_fmadd_ps(u, row, a[k]);
                if (two) b[k] = _mm512_fmadd_ps(w, row, b[k]);
            }
        }
        for (long k = 0; k < width / 16; ++k) {
            _mm512_storeu_ps(acc0 + c0 + 16 * k, _mm512_mul_ps(a[k], _mm512_set1_ps(f0)));
            if (two) _mm512_storeu_ps(acc1 + c0 + 16 * k, _mm512_mul_ps(b[k], _mm512_set1_ps(f1)));
        }
    }
}

/* the largest of scores[0..count), or NaN if any is NaN */
static float largest(const float *scores, long count) {
    __m512 top = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (long j = 0; j < count; j += 16) {
        const __mmask16 m = tail(count, j);
        const __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, scores + j);
        nan |= _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);
        top = _mm512_max_ps(top, s);
    }
    return nan ? NAN : _mm512_reduce_max_ps(top);
}

/* scores[j] = exp(scores[j] - shift) for j < count, zeros after it up to `padded` (a multiple of
   16); returns their sum */
static float exponentials(float *scores, long count, long padded, float shift) {
    __m512 total = _mm512_setzero_ps();
    for (long j = 0; j < padded; j += 16) {
        const __mmask16 m = j < count ? tail(count, j) : 0;
        const __m512 e = _mm512_maskz_mov_ps(m, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j),
                                                                             _mm512_set1_ps(shift))));
        _mm512_storeu_ps(scores + j, e);
        total = _mm512_add_ps(total, e);
    }
    return _mm512_reduce_add_ps(total);
}

static Segment prompt_segment(const long *prompt_start, const long *prompt_length, long u) {
    return (Segment){0, 0, prompt_start[u], prompt_length[u]};
}

static Segment row_segment(const long *prompt_start, const long *prompt_length, const long *row_start,
                           const long *row_length, const long *row_prompt, long r) {
    const long u = row_prompt[r];
    return (Segment){prompt_start[u], prompt_length[u], row_start[r], row_length[r]};
}

static long padded_keys(long prefix, long length) {  /* three spare columns, zeros, past the last key */
    return (prefix + length + 3 + 15) / 16 * 16;
}

/* Backward holds p and ds of at most this many of a segment's query tokens at once (their G lines
   each against the segment's keys): a thread's memory stays O(keys), not O(tokens x keys). */
#define BLOCK_TOKENS 64

/* floats of scratch per thread: for the forward (backward = 0) or backward, for the longest prompt
   and row. Backward: p and ds of one block of lines; the keys' and values' gradient sums of a
   prompt (over all its segments) and of a row's own tokens; four vectors of d. */
long dapo_packed_attention_scratch(long max_prompt, long max_row, long groups, long d, int backward) {
    const long padded = padded_keys(max_prompt, max_row), longest = max_prompt > max_row ? max_prompt : max_row;
    const long lines = groups * (longest < BLOCK_TOKENS ? longest : BLOCK_TOKENS);
    return backward ? 2 * lines * padded + 2 * (max_prompt + max_row) * d + 4 * d : 2 * padded + 2 * d;
}

/* One segment's forward for KV head h: out (N, H d), lse (N, H) float32. */
static void segment_forward(const Tensors *x, const Segment *s, long h, float *scratch, void *out, float *lse) {
    const long d = x->d, padded = padded_keys(s->prefix, s->length);
    float *p0 = scratch, *p1 = p0 + padded, *acc0 = p1 + padded, *acc1 = acc0 + d;
    for (long i = 0; i < s->length; ++i) {
        const long token = s->start + i, count = s->prefix + i + 1;
        for (long n = h * x->groups; n < (h + 1) * x->groups; n += 2) {
            const int pair = n + 1 < (h + 1) * x->groups;
            const float *q0 = x->qk + token * x->qk_stride + n * d, *q1 = pair ? q0 + d : q0;
            pair_scores(q0, q1, s, count, x->qk, x->qk_stride, (x->heads + h) * d, 0, d, x->scale, p0, p1);
            float inverse[2];
            for (int g = 0; g < 1 + pair; ++g) {
                float *p = g ? p1 : p0;
                const float top = largest(p, count), total = exponentials(p, count, count, top);
                lse[token * x->heads + n + g] = top + logf(total);
                inverse[g] = 1.0f / total;
            }
            key_sums(p0, pair ? p1 : p0, s, count, x->v, x->v_stride, h * d, x->bf16, d, inverse[0],
                     pair ? inverse[1] : inverse[0], acc0, acc1);
            for (int g = 0; g < 1 + pair; ++g)
                for (long c = 0; c < d; c += 16)
                    store(out, (token * x->heads + n + g) * d + c, x->bf16, 0xFFFF, _mm512_loadu_ps((g ? acc1 : acc0) + c));
        }
    }
}

void dapo_packed_attention_forward(const float *qk, long qk_stride, const void *v, long v_stride, int bf16,
                                   const long *prompt_start, const long *prompt_length, long prompts,
                                   const long *row_start, const long *row_length, const long *row_prompt, long rows,
                                   long heads, long kv_heads, long d, float scale, long max_prompt, long max_row,
                                   void *out, float *lse, float *scratch, int threads) {
    const long groups = heads / kv_heads;
    const Tensors x = {qk, qk_stride, v, v_stride, bf16, heads, kv_heads, d, groups, scale};
    const long per_thread = dapo_packed_attention_scratch(max_prompt, max_row, groups, d, 0);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long item = 0; item < (prompts + rows) * kv_heads; ++item) {
#ifdef _OPENMP
        float *mine = scratch + (long)omp_get_thread_num() * per_thread;
#else
        float *mine = scratch;
#endif
        const long index = item / kv_heads, h = item % kv_heads;
        const Segment s = index < prompts ? prompt_segment(prompt_start, prompt_length, index)
                                          : row_segment(prompt_start, prompt_length, row_start, row_length, row_prompt,
                                                        index - prompts);
        segment_forward(&x, &s, h, mine, out, lse);
    }
}

/* acc[k][0..d) = factor sum over lines l in [first, lines) of w[l stride + k] row(l), k < 4 (four
   keys' sums sharing each row's load); line l = i G + g is row origin + i row_stride + g d of rows,
   bf16 or float32; acc: 4 rows of d */
static void line_sums(const float *w, long stride, const void *rows, long origin, long row_stride, int bf16, long groups,
                      long first, long lines, long d, float factor, float *acc) {
    for (long c0 = 0; c0 < d; c0 += 64) {
        const long chunks = (d - c0 < 64 ? d - c0 : 64) / 16;
        __m512 a[4][4];
        for (int k = 0; k < 4; ++k)
            for (int c = 0; c < 4; ++c) a[k][c] = _mm512_setzero_ps();
        long i = first / groups, g = first % groups;  /* line l's token and head, stepped (no division per line) */
        for (long l = first; l < lines; ++l) {
            const long at = origin + i * row_stride + g * d + c0;
            if (++g == groups) g = 0, ++i;
            const float *weights = w + l * stride;
            for (long c = 0; c < chunks; ++c) {
                const __m512 row = load(rows, at + 16 * c, bf16, 0xFFFF);
                for (int k = 0; k < 4; ++k) a[k][c] = _mm512_fmadd_ps(_mm512_set1_ps(weights[k]), row, a[k][c]);
            }
        }
        for (int k = 0; k < 4; ++k)
            for (long c = 0; c < chunks; ++c)
                _mm512_storeu_ps(acc + k * d + c0 + 16 * c, _mm512_mul_ps(a[k][c], _mm512_set1_ps(factor)));
    }
}

/* Where one (prompt, KV head)'s backward writes: grad_qk (N, (H + Hkv) d) float32 and grad_v
   (N, Hkv d), both contiguous; the prompt's keys' and values' gradients summed in prompt_dk and
   prompt_dv (prompt length x d) over its segment and its responses', written last; a response's
   own keys' and values' in row_dk and row_dv (row length x d) over its blocks of lines. */
typedef struct {
    const void *grad_out;
    const float *lse;
    float *grad_qk;
    void *grad_v;
    float *prompt_dk, *prompt_dv, *row_dk, *row_dv;
} Gradients;

/* p_j = exp(s_j - lse) into p, ds_j = p_j (dp_j - sum_l p_l dp_l) into ds (which holds dp), for
   j < count; zeros up to stride */
static void softmax_gradient(float *p, float *ds, long count, long stride, float lse) {
    exponentials(p, count, stride, lse);
    __m512 weighted = _mm512_setzero_ps();
    for (long j = 0; j < count; j += 16) {
        const __mmask16 m = tail(count, j);
        weighted = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + j), _mm512_maskz_loadu_ps(m, ds + j), weighted);
    }
    const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(weighted));
    for (long j = 0; j < stride; j += 16) {
        const __mmask16 m = j < count ? tail(count, j) : 0;
        _mm512_storeu_ps(ds + j, _mm512_maskz_mul_ps(m, _mm512_loadu_ps(p + j), _mm512_sub_ps(_mm512_loadu_ps(ds + j), mean)));
    }
}

static void add_to(float *sum, const float *value, long d) {
    for (long c = 0; c < d; c += 16)
        _mm512_storeu_ps(sum + c, _mm512_add_ps(_mm512_loadu_ps(sum + c), _mm512_loadu_ps(value + c)));
}

/* Query tokens [first, last) of segment s, KV head h: p, ds and dq of each of their lines (line
   (i - first) G + g: token i, query head h G + g), p and ds at row stride `stride` */
static void block_scores(const Tensors *x, const Segment *s, long h, const Gradients *out, long first, long last,
                         long stride, float *probs, float *dscores, float *work) {
    const long d = x->d, groups = x->groups, qk_width = (x->heads + x->kv_heads) * d;
    float *acc0 = work, *acc1 = acc0 + d, *g0 = acc1 + d, *g1 = g0 + d;
    for (long i = first; i < last; ++i) {
        const long token = s->start + i, count = s->prefix + i + 1;
        for (long n = h * groups; n < (h + 1) * groups; n += 2) {
            const int pair = n + 1 < (h + 1) * groups;
            const long line = (i - first) * groups + n - h * groups;
            float *p0 = probs + line * stride, *p1 = pair ? p0 + stride : p0;  /* a lone head: p0 alone */
            float *ds0 = dscores + line * stride, *ds1 = pair ? ds0 + stride : ds0;
            const float *q0 = x->qk + token * x->qk_stride + n * d, *q1 = pair ? q0 + d : q0;
            for (long c = 0; c < d; c += 16) {
                _mm512_storeu_ps(g0 + c, load(out->grad_out, (token * x->heads + n) * d + c, x->bf16, 0xFFFF));
                if (pair) _mm512_storeu_ps(g1 + c, load(out->grad_out, (token * x->heads + n + 1) * d + c, x->bf16, 0xFFFF));
            }
            pair_scores(q0, q1, s, count, x->qk, x->qk_stride, (x->heads + h) * d, 0, d, x->scale, p0, p1);
            pair_scores(g0, pair ? g1 : g0, s, count, x->v, x->v_stride, h * d, x->bf16, d, 1.0f, ds0, ds1); /* dp */
            if (pair) softmax_gradient(p1, ds1, count, stride, out->lse[token * x->heads + n + 1]);
            softmax_gradient(p0, ds0, count, stride, out->lse[token * x->heads + n]);
            key_sums(ds0, pair ? ds1 : ds0, s, count, x->qk, x->qk_stride, x->heads * d + h * d, 0, d, x->scale,
                     x->scale, acc0, acc1);  /* dq */
            memcpy(out->grad_qk + token * qk_width + n * d, acc0, sizeof(float) * d);
            if (pair) memcpy(out->grad_qk + token * qk_width + (n + 1) * d, acc1, sizeof(float) * d);
        }
    }
}

/* One segment's backward for KV head h, BLOCK_TOKENS query tokens at a time: their p, ds and dq,
   then what their lines give the keys and values they see, four keys at a time (all the block's
   lines for the prompt's keys; for the segment's own key k, the lines from token k on: ds and p
   are zero before), summed in the prompt's and the row's accumulators (out); a response's own
   keys and values are written at the end. */
static void segment_backward(const Tensors *x, const Segment *s, long h, int is_prompt, const Gradients *out,
                             float *scratch) {
    const long d = x->d, groups = x->groups, qk_width = (x->heads + x->kv_heads) * d;
    const long stride = padded_keys(s->prefix, s->length);
    const long block_lines = groups * (s->length < BLOCK_TOKENS ? s->length : BLOCK_TOKENS);
    float *probs = scratch, *dscores = probs + block_lines * stride, *sums = dscores + block_lines * stride;
    if (!is_prompt) {
        memset(out->row_dk, 0, sizeof(float) * s->length * d);
        memset(out->row_dv, 0, sizeof(float) * s->length * d);
    }
    for (long first = 0; first < s->length; first += BLOCK_TOKENS) {
        const long last = s->length - first < BLOCK_TOKENS ? s->length : first + BLOCK_TOKENS;
        const long lines = (last - first) * groups, keys = s->prefix + last;  /* the keys the block sees */
        block_scores(x, s, h, out, first, last, stride, probs, dscores, sums);
        const long q_origin = (s->start + first) * x->qk_stride + h * groups * d;
        const long g_origin = ((s->start + first) * x->heads + h * groups) * d;
        for (long j = 0; j < keys; j += 4) {
            const long own = j - s->prefix - first, from = own > 0 ? own * groups : 0;  /* lines before see none */
            for (int kind = 0; kind < 2; ++kind) {  /* 0: keys (dk = scale sum ds q), 1: values (dv = sum p g) */
                if (kind == 0)
                    line_sums(dscores + j, stride, x->qk, q_origin, x->qk_stride, 0, groups, from, lines, d, x->scale,
                              sums);
                else
                    line_sums(probs + j, stride, out->grad_out, g_origin, x->heads * d, x->bf16, groups, from, lines, d,
                              1.0f, sums);
                for (long k = j; k < j + 4 && k < keys; ++k) {
                    const int prompts_key = is_prompt || k < s->prefix;
                    float *into = prompts_key ? (kind ? out->prompt_dv : out->prompt_dk) + k * d
                                              : (kind ? out->row_dv : out->row_dk) + (k - s->prefix) * d;
                    add_to(into, sums + (k - j) * d, d);
                }
            }
        }
    }
    if (is_prompt) return;  /* the prompt's keys are written by the caller, after all its segments */
    for (long k = 0; k < s->length; ++k) {
        const long token = s->start + k;
        memcpy(out->grad_qk + token * qk_width + (x->heads + h) * d, out->row_dk + k * d, sizeof(float) * d);
        for (long c = 0; c < d; c += 16)
            store(out->grad_v, token * x->kv_heads * d + h * d + c, x->bf16, 0xFFFF,
                  _mm512_loadu_ps(out->row_dv + k * d + c));
    }
}

void dapo_packed_attention_backward(const void *grad_out, const float *qk, long qk_stride, const void *v,
                                    long v_stride, int bf16, const float *lse, const long *prompt_start,
                                    const long *prompt_length, long prompts, const long *row_start,
                                    const long *row_length, const long *row_prompt, const long *rows_by_prompt,
                                    const long *prompt_rows, long heads, long kv_heads, long d, float scale,
                                    long max_prompt, long max_row, float *grad_qk, void *grad_v, float *scratch,
                                    int threads) {
    const long groups = heads / kv_heads, qk_width = (heads + kv_heads) * d;
    const Tensors x = {qk, qk_stride, v, v_stride, bf16, heads, kv_heads, d, groups, scale};
    const long per_thread = dapo_packed_attention_scratch(max_prompt, max_row, groups, d, 1);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long item = 0; item < prompts * kv_heads; ++item) {
#ifdef _OPENMP
        float *mine = scratch + (long)omp_get_thread_num() * per_thread;
#else
        float *mine = scratch;
#endif
        const long u = item / kv_heads, h = item % kv_heads, length = prompt_length[u];
        float *prompt_sums = mine, *row_sums = mine + 2 * max_prompt * d;
        const Gradients out = {grad_out, lse, grad_qk, grad_v, prompt_sums, prompt_sums + max_prompt * d, row_sums,
                               row_sums + max_row * d};
        float *segment_scratch = row_sums + 2 * max_row * d;
        memset(mine, 0, sizeof(float) * 2 * max_prompt * d);
        const Segment own = prompt_segment(prompt_start, prompt_length, u);
        segment_backward(&x, &own, h, 1, &out, segment_scratch);
        for (long k = prompt_rows[u]; k < prompt_rows[u + 1]; ++k) {
            const Segment row = row_segment(prompt_start, prompt_length, row_start, row_length, row_prompt,
                                            rows_by_prompt[k]);
            if (row.length > 0) segment_backward(&x, &row, h, 0, &out, segment_scratch);
        }
        for (long j = 0; j < length; ++j) {
            const long token = prompt_start[u] + j;
            memcpy(grad_qk + token * qk_width + (heads + h) * d, out.prompt_dk + j * d, sizeof(float) * d);
            for (long c = 0; c < d; c += 16)
                store(grad_v, token * kv_heads * d + h * d + c, bf16, 0xFFFF, _mm512_loadu_ps(out.prompt_dv + j * d + c));
        }
    }
}
