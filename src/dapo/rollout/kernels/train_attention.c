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
   their gradients in one place, in a fixed order.

   qk: (N, (H + Hkv) d) float32 at row stride qk_stride: the rotated queries, then keys. v: (N, Hkv d)
   at row stride v_stride, bf16 where `bf16` (then out, grad_out and grad_v are too) or float32.
   Segments: prompt u starts at token prompt_start[u], prompt_length[u] long; response row r at
   row_start[r], row_length[r] long, after prompt row_prompt[r]. rows_by_prompt lists the rows
   prompt by prompt, prompt u's at [prompt_rows[u], prompt_rows[u + 1]). d % 16 == 0, d <= 256 (the
   caller checks). A NaN score makes its query's output NaN, as torch's softmax does. */
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
    long heads, kv_heads, d;
    float scale;
} Tensors;

/* The keys one segment's tokens see: `prefix` (its prompt's, or none) then its own `length` from `start`. */
typedef struct {
    long prefix_start, prefix, start, length;
} Segment;

static inline long key_token(const Segment *s, long j) {
    return j < s->prefix ? s->prefix_start + j : s->start + j - s->prefix;
}

/* KV head h's keys and values of the tokens segment s sees, as float32 rows of d */
static void load_keys(const Tensors *x, const Segment *s, long h, float *keys, float *values) {
    const long d = x->d;
    for (long j = 0; j < s->prefix + s->length; ++j) {
        const long token = key_token(s, j);
        memcpy(keys + j * d, x->qk + token * x->qk_stride + (x->heads + h) * d, sizeof(float) * d);
        for (long c = 0; c < d; c += 16)
            _mm512_storeu_ps(values + j * d + c, load(x->v, token * x->v_stride + h * d + c, x->bf16, 0xFFFF));
    }
}

/* out[j] = scale (x . rows[j]) for j < count, rows of d: 16 keys at a time, each key's lanes summed
   by one transposing add tree (sum16) */
static void dots(const float *x, const float *rows, long count, long d, float scale, float *out) {
    for (long j0 = 0; j0 < count; j0 += 16) {
        __m512 acc[16];
        for (long k = 0; k < 16; ++k) {
            acc[k] = _mm512_setzero_ps();
            if (j0 + k >= count) continue;
            const float *row = rows + (j0 + k) * d;
            for (long c = 0; c < d; c += 16) acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x + c), _mm512_loadu_ps(row + c), acc[k]);
        }
        _mm512_mask_storeu_ps(out + j0, tail(count, j0), _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale)));
    }
}

/* out[0..d) = factor sum over l in [first, last) of weights[l * stride] rows[l], rows of d; in
   registers 64 columns at a time */
static void weighted_rows(const float *weights, long stride, const float *rows, long first, long last, long d,
                          float factor, float *out) {
    for (long c0 = 0; c0 < d; c0 += 64) {
        const long width = d - c0 < 64 ? d - c0 : 64;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long l = first; l < last; ++l) {
            const __m512 w = _mm512_set1_ps(weights[l * stride]);
            const float *row = rows + l * d + c0;
            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row), a0);
            if (width > 16) a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 16), a1);
            if (width > 32) a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 32), a2);
            if (width > 48) a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(row + 48), a3);
        }
        const __m512 f = _mm512_set1_ps(factor);
        _mm512_storeu_ps(out + c0, _mm512_mul_ps(a0, f));
        if (width > 16) _mm512_storeu_ps(out + c0 + 16, _mm512_mul_ps(a1, f));
        if (width > 32) _mm512_storeu_ps(out + c0 + 32, _mm512_mul_ps(a2, f));
        if (width > 48) _mm512_storeu_ps(out + c0 + 48, _mm512_mul_ps(a3, f));
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

/* scores[j] = exp(scores[j] - shift) for j < count, zeros after it up to the next multiple of 16;
   returns their sum */
static float exponentials(float *scores, long count, float shift) {
    __m512 total = _mm512_setzero_ps();
    for (long j = 0; j < count; j += 16) {
        const __mmask16 m = tail(count, j);
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

/* floats of scratch per thread: forward (backward = 0) or backward, for the longest prompt and row */
long dapo_packed_attention_scratch(long max_prompt, long max_row, long groups, long d, int backward) {
    const long keys = max_prompt + max_row, padded = (keys + 15) / 16 * 16;
    const long lines = groups * (max_prompt > max_row ? max_prompt : max_row);
    if (!backward) return 2 * keys * d + padded + d;
    return 2 * keys * d + 2 * lines * d + 2 * lines * padded + 2 * max_prompt * d + d;
}

/* One segment's forward for KV head h: out (N, H d), lse (N, H) float32. */
static void segment_forward(const Tensors *x, const Segment *s, long h, float *scratch, void *out, float *lse) {
    const long d = x->d, groups = x->heads / x->kv_heads, keys = s->prefix + s->length;
    float *key_rows = scratch, *values = key_rows + keys * d, *probs = values + keys * d;
    float *acc = probs + (keys + 15) / 16 * 16;
    load_keys(x, s, h, key_rows, values);
    for (long i = 0; i < s->length; ++i) {
        const long token = s->start + i, count = s->prefix + i + 1;
        for (long n = h * groups; n < (h + 1) * groups; ++n) {
            dots(x->qk + token * x->qk_stride + n * d, key_rows, count, d, x->scale, probs);
            const float top = largest(probs, count);
            const float total = exponentials(probs, count, top);
            lse[token * x->heads + n] = top + logf(total);
            weighted_rows(probs, 1, values, 0, count, d, 1.0f / total, acc);
            for (long c = 0; c < d; c += 16)
                store(out, (token * x->heads + n) * d + c, x->bf16, 0xFFFF, _mm512_loadu_ps(acc + c));
        }
    }
}

void dapo_packed_attention_forward(const float *qk, long qk_stride, const void *v, long v_stride, int bf16,
                                   const long *prompt_start, const long *prompt_length, long prompts,
                                   const long *row_start, const long *row_length, const long *row_prompt, long rows,
                                   long heads, long kv_heads, long d, float scale, long max_prompt, long max_row,
                                   void *out, float *lse, float *scratch, int threads) {
    const Tensors x = {qk, qk_stride, v, v_stride, bf16, heads, kv_heads, d, scale};
    const long per_thread = dapo_packed_attention_scratch(max_prompt, max_row, heads / kv_heads, d, 0);
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

/* Where one (prompt, KV head)'s backward writes: grad_qk (N, (H + Hkv) d) float32 and grad_v
   (N, Hkv d), both contiguous; the prompt's keys' and values' gradients summed in prompt_dk and
   prompt_dv (prompt length x d) over its segment and its responses', written last. */
typedef struct {
    const void *grad_out;
    const float *lse;
    float *grad_qk;
    void *grad_v;
    float *prompt_dk, *prompt_dv;
} Gradients;

static void segment_backward(const Tensors *x, const Segment *s, long h, int is_prompt, const Gradients *out,
                             float *scratch) {
    const long d = x->d, groups = x->heads / x->kv_heads, keys = s->prefix + s->length;
    const long padded = (keys + 15) / 16 * 16, lines = s->length * groups, qk_width = (x->heads + x->kv_heads) * d;
    float *key_rows = scratch, *values = key_rows + keys * d, *query_rows = values + keys * d;
    float *grad_rows = query_rows + lines * d, *probs = grad_rows + lines * d, *dscores = probs + lines * padded;
    float *acc = dscores + lines * padded;
    load_keys(x, s, h, key_rows, values);
    for (long i = 0; i < s->length; ++i) {  /* each query line: p, ds and dq */
        const long token = s->start + i, count = s->prefix + i + 1;
        for (long n = h * groups; n < (h + 1) * groups; ++n) {
            const long line = i * groups + n - h * groups;
            float *q = query_rows + line * d, *g = grad_rows + line * d, *p = probs + line * padded;
            float *ds = dscores + line * padded;
            memcpy(q, x->qk + token * x->qk_stride + n * d, sizeof(float) * d);
            for (long c = 0; c < d; c += 16)
                _mm512_storeu_ps(g + c, load(out->grad_out, (token * x->heads + n) * d + c, x->bf16, 0xFFFF));
            dots(q, key_rows, count, d, x->scale, p);
            exponentials(p, count, out->lse[token * x->heads + n]);
            dots(g, values, count, d, 1.0f, ds);  /* dp */
            __m512 weighted = _mm512_setzero_ps();
            for (long j = 0; j < count; j += 16) {
                const __mmask16 m = tail(count, j);
                weighted = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + j), _mm512_maskz_loadu_ps(m, ds + j), weighted);
            }
            const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(weighted));
            for (long j = 0; j < count; j += 16) {
                const __mmask16 m = tail(count, j);
                const __m512 dp = _mm512_maskz_loadu_ps(m, ds + j);
                _mm512_mask_storeu_ps(ds + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), _mm512_sub_ps(dp, mean)));
            }
            weighted_rows(ds, 1, key_rows, 0, count, d, x->scale, acc);
            memcpy(out->grad_qk + token * qk_width + n * d, acc, sizeof(float) * d);
        }
    }
    /* each key's: over the lines that see it (all of them for the prompt's; from its own position on
       for the segment's own) */
    for (long j = 0; j < keys; ++j) {
        const long first = j < s->prefix ? 0 : (j - s->prefix) * groups, token = key_token(s, j);
        const int prompts_key = is_prompt || j < s->prefix;
        weighted_rows(dscores + j, padded, query_rows, first, lines, d, x->scale, acc);
        for (long c = 0; c < d; c += 16) {
            if (prompts_key) {
                float *sum = out->prompt_dk + j * d + c;
                _mm512_storeu_ps(sum, _mm512_add_ps(_mm512_loadu_ps(sum), _mm512_loadu_ps(acc + c)));
            } else {
                _mm512_storeu_ps(out->grad_qk + token * qk_width + (x->heads + h) * d + c, _mm512_loadu_ps(acc + c));
            }
        }
        weighted_rows(probs + j, padded, grad_rows, first, lines, d, 1.0f, acc);
        for (long c = 0; c < d; c += 16) {
            if (prompts_key) {
                float *sum = out->prompt_dv + j * d + c;
                _mm512_storeu_ps(sum, _mm512_add_ps(_mm512_loadu_ps(sum), _mm512_loadu_ps(acc + c)));
            } else {
                store(out->grad_v, token * x->kv_heads * d + h * d + c, x->bf16, 0xFFFF, _mm512_loadu_ps(acc + c));
            }
        }
    }
}

void dapo_packed_attention_backward(const void *grad_out, const float *qk, long qk_stride, const void *v,
                                    long v_stride, int bf16, const float *lse, const long *prompt_start,
                                    const long *prompt_length, long prompts, const long *row_start,
                                    const long *row_length, const long *row_prompt, const long *rows_by_prompt,
                                    const long *prompt_rows, long heads, long kv_heads, long d, float scale,
                                    long max_prompt, long max_row, float *grad_qk, void *grad_v, float *scratch,
                                    int threads) {
    const Tensors x = {qk, qk_stride, v, v_stride, bf16, heads, kv_heads, d, scale};
    const long per_thread = dapo_packed_attention_scratch(max_prompt, max_row, heads / kv_heads, d, 1);
    const long qk_width = (heads + kv_heads) * d;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long item = 0; item < prompts * kv_heads; ++item) {
#ifdef _OPENMP
        float *mine = scratch + (long)omp_get_thread_num() * per_thread;
#else
        float *mine = scratch;
#endif
        const long u = item / kv_heads, h = item % kv_heads, length = prompt_length[u];
        const Gradients out = {grad_out, lse, grad_qk, grad_v, mine, mine + max_prompt * d};
        float *segment_scratch = mine + 2 * max_prompt * d;
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
