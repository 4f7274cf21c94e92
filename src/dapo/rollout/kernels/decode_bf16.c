/* bf16 decode kernels for x86 CPUs with AVX512-BF16 (dapo.rollout.cpu_kernels builds and loads them).

   dapo_rms_scale_bf16: a folded RMSNorm, out = x / hypot(||x||, norm_floor) per row (the norm's weight
   and sqrt(n) live in the next matmul's weights; dapo.rollout.llama_decoder._normed_projection).

   dapo_decode_attention_bf16: one decode step's attention for each (row, KV head) pair p:
   RoPE on its G query heads and its key head (cos and sign-folded sin from the decoder's table,
   at the row's position), the rotated key and the value written into the KV cache at `slot`,
   then for each query head g, over the filled slots s <= slot,

       out[p, g] = sum_s softmax_s(scale * q[p, g] . k[p, s] + bias[p, s]) v[p, s]

   Every product of bf16 inputs is summed in float32 (vdpbf16ps for the scores, as oneDNN's bf16
   matmul); RoPE, softmax and the weighted sum of values run in float32, rounded once to bf16
   (nearest even) where the torch path rounds after each op. */
#include <string.h>

#include "vector_math.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef __AVX512BF16__ /* vdpbf16ps: built only for a CPU with AVX512-BF16 (dapo.rollout.cpu_kernels) */

#define MAX_GROUPS 16
#define MAX_HEAD_DIM 256

/* Softmax-normalised scores of one query head over slots [0, length) into probs (padded to a
   multiple of 16 with zeros). */
static void head_probabilities(const uint16_t *query, const uint16_t *keys, const uint16_t *bias,
                               long length, int head_dim, float scale, float *probs) {
    const long padded = (length + 15) / 16 * 16;
    __m512 best = _mm512_set1_ps(-INFINITY);
    for (long s0 = 0; s0 < length; s0 += 16) {
        const int n = length - s0 < 16 ? (int)(length - s0) : 16;
        __m512 dots[16];
        for (int j = 0; j < 16; ++j) {
            dots[j] = _mm512_setzero_ps();
            if (j >= n) continue;
            const uint16_t *key = keys + (s0 + j) * head_dim;
            for (int c = 0; c < head_dim; c += 32)
                dots[j] = _mm512_dpbf16_ps(dots[j], (__m512bh)_mm512_loadu_si512(query + c),
                                           (__m512bh)_mm512_loadu_si512(key + c));
        }
        const __mmask16 live = (__mmask16)((1u << n) - 1);
        const __m512 slot_bias = bf16x16_to_f32(_mm256_maskz_loadu_epi16(live, bias + s0));
        const __m512 scores = _mm512_mask_blend_ps(
            live, _mm512_set1_ps(-INFINITY), _mm512_fmadd_ps(sum16(dots), _mm512_set1_ps(scale), slot_bias));
        best = _mm512_max_ps(best, scores);
        _mm512_storeu_ps(probs + s0, scores);
    }
    const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(best));
    __m512 total = _mm512_setzero_ps();
    for (long s0 = 0; s0 < padded; s0 += 16) {
        const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(probs + s0), top));
        total = _mm512_add_ps(total, e);
        _mm512_storeu_ps(probs + s0, e);
    }
    const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    for (long s0 = 0; s0 < padded; s0 += 16)
        _mm512_storeu_ps(probs + s0, _mm512_mul_ps(_mm512_loadu_ps(probs + s0), inverse));
}

/* One head's RoPE: out[i] = x[i] cos[i] + x[(i + d/2) mod d] sin[i] (the sign of rotate_half is
   in the table's sin), in float32, rounded once. d/2 is a multiple of 16: no chunk wraps. */
static inline void rotate_head(const uint16_t *x, const uint16_t *cos_row, const uint16_t *sin_row, int head_dim,
                               uint16_t *out) {
    const int half = head_dim / 2;
    for (int i = 0; i < head_dim; i += 16) {
        const int j = i < half ? i + half : i - half;
        const __m512 rotated = _mm512_fmadd_ps(
            bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(x + i))), bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(cos_row + i))),
            _mm512_mul_ps(bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(x + j))),
                          bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(sin_row + i)))));
        _mm256_storeu_si256((__m256i *)(out + i), (__m256i)_mm512_cvtneps_pbh(rotated));
    }
}

/* qkv: bf16 (rows, kv_heads, G + 2, head_dim), each pair's G query heads, then its key and value;
   rope: bf16 (rope_positions, 2, G + 2, head_dim), cos and sign-folded sin (every query and key
   head alike, row 0 is read); positions: int64 (rows,), each row's RoPE position (-1 is returned,
   and nothing computed, if one is outside the table; else 0);
   keys, values: bf16 (pairs, capacity, head_dim), slot `slot` written here; bias: bf16 (pairs,
   capacity); slots [0, slot] are attended. out: bf16 (pairs, G, head_dim); scratch: float32,
   threads * G * padded(slot + 1). head_dim % 32 == 0, head_dim <= MAX_HEAD_DIM and
   groups <= MAX_GROUPS (the caller checks). */
int dapo_decode_attention_bf16(const uint16_t *qkv, const uint16_t *rope, long rope_positions,
                               const int64_t *positions, long kv_heads, uint16_t *keys, uint16_t *values,
                               const uint16_t *bias, long capacity, long slot, long pairs, int groups, int head_dim,
                               float scale, uint16_t *out, float *scratch, int threads) {
    const long length = slot + 1, padded = (length + 15) / 16 * 16;
    const long heads = groups + 2;
    for (long row = 0; row < pairs / kv_heads; ++row)
        if (positions[row] < 0 || positions[row] >= rope_positions) return -1; /* outside the RoPE table */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long p = 0; p < pairs; ++p) {
#ifdef _OPENMP
        float *probs = scratch + (long)omp_get_thread_num() * groups * padded;
#else
        float *probs = scratch;
#endif
        const uint16_t *projection = qkv + p * heads * head_dim;
        const uint16_t *cos_row = rope + positions[p / kv_heads] * 2 * heads * head_dim;
        const uint16_t *sin_row = cos_row + heads * head_dim;
        uint16_t *pair_keys = keys + p * capacity * head_dim;
        uint16_t *pair_values = values + p * capacity * head_dim;
        uint16_t queries[MAX_GROUPS * MAX_HEAD_DIM];
        for (int g = 0; g < groups; ++g)
            rotate_head(projection + g * head_dim, cos_row, sin_row, head_dim, queries + g * head_dim);
        rotate_head(projection + groups * head_dim, cos_row, sin_row, head_dim, pair_keys + slot * head_dim);
        memcpy(pair_values + slot * head_dim, projection + (groups + 1) * head_dim, sizeof(uint16_t) * head_dim);
        for (int g = 0; g < groups; ++g)
            head_probabilities(queries + g * head_dim, pair_keys, bias + p * capacity, length, head_dim, scale,
                               probs + g * padded);
        uint16_t *pair_out = out + p * groups * head_dim;
        for (int c = 0; c < head_dim; c += 16) {
            __m512 acc[MAX_GROUPS];
            for (int g = 0; g < groups; ++g) acc[g] = _mm512_setzero_ps();
            for (long s = 0; s < length; ++s) {
                const __m512 value = bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(pair_values + s * head_dim + c)));
                for (int g = 0; g < groups; ++g)
                    acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(probs[g * padded + s]), value, acc[g]);
            }
            for (int g = 0; g < groups; ++g)
                _mm256_storeu_si256((__m256i *)(pair_out + g * head_dim + c), (__m256i)_mm512_cvtneps_pbh(acc[g]));
        }
    }
    return 0;
}

/* x, out: bf16 (rows, n), n % 16 == 0; out = x / hypot(||x||, norm_floor), the norm in float32. Rows
   are split between threads only when there are enough of them to pay for the fork. */
void dapo_rms_scale_bf16(const uint16_t *x, long rows, long n, float norm_floor, uint16_t *out, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * n >= 65536)
    for (long r = 0; r < rows; ++r) {
        const uint16_t *row = x + r * n;
        __m512 squares = _mm512_setzero_ps();
        for (long i = 0; i < n; i += 16) {
            const __m512 v = bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(row + i)));
            squares = _mm512_fmadd_ps(v, v, squares);
        }
        const float inverse = 1.0f / sqrtf(_mm512_reduce_add_ps(squares) + norm_floor * norm_floor);
        const __m512 factor = _mm512_set1_ps(inverse);
        for (long i = 0; i < n; i += 16) {
            const __m512 v = bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(row + i)));
            _mm256_storeu_si256((__m256i *)(out + r * n + i), (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(v, factor)));
        }
    }
}
#endif /* __AVX512BF16__ */
