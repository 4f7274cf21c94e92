/* Vector helpers shared by dapo-rl's CPU kernels (decode_bf16.c, train_fused.c, train_attention.c):
   AVX-512 F, BW and VL; AVX512-BF16 where the build has it (__AVX512BF16__). */
#ifndef DAPO_VECTOR_MATH_H
#define DAPO_VECTOR_MATH_H
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

/* exp(x) for x <= 0, to float32 precision (|r| <= ln2/2: degree-7 Taylor, error below 1e-8
   relative); lanes below -87 (masked slots' -inf included) give exactly 0, NaN lanes NaN (a NaN
   score must reach the output, as in torch's softmax, not vanish as a zero weight). */
static inline __m512 exp_nonpositive(__m512 x) {
    const __m512 input = x;
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* r = x - n ln2, with ln2 split in two so that n ln2 is exact to float32 */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 poly = _mm512_set1_ps(1.0f / 5040);
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 720));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 120));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 24));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 6));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(0.5f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
    return _mm512_mask_blend_ps(nan, _mm512_maskz_scalef_ps(live, poly, n), input); /* poly * 2^n */
}

/* r[j] = the sum of a[j]'s 16 lanes, j < 16: a transposing add tree (45 ops, where 16
   horizontal sums take about 150). */
static inline __m512 sum16(const __m512 *a) {
    __m512 quads[4];
    for (int q = 0; q < 4; ++q) {
        const __m512 *b = a + 4 * q;
        const __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
        const __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
        quads[q] = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, 0x44), _mm512_shuffle_ps(t0, t1, 0xEE));
    }
    const __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x88),
                                    _mm512_shuffle_f32x4(quads[0], quads[1], 0xDD));
    const __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x88),
                                    _mm512_shuffle_f32x4(quads[2], quads[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xDD));
}

static inline __m512 bf16x16_to_f32(__m256i bits) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

/* a mask of the lanes i .. i + 15 that are below n */
static inline __mmask16 tail(long n, long i) {
    return n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
}

/* the lanes m of p[i .. i + 15] as float32 (bf16 read exactly), zeros elsewhere */
static inline __m512 load(const void *p, long i, int bf16, __mmask16 m) {
    if (bf16) return bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
    return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

/* v rounded to bf16, to nearest even, as 16 bf16 bit patterns: AVX512-BF16's vcvtneps2bf16, or on
   a CPU without it the same in integer ops, bit for bit: a NaN made quiet (its top 16 bits, bit 6
   set), a zero or float32 denormal to a zero of its sign (the instruction reads denormals as zero;
   a normal float32 never rounds to a bf16 denormal) */
static inline __m256i f32_to_bf16x16(__m512 v) {
#ifdef __AVX512BF16__
    return (__m256i)_mm512_cvtneps_pbh(v);
#else
    const __m512i bits = _mm512_castps_si512(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __mmask16 tiny = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7F800000)); /* exponent 0 */
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i out = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
    out = _mm512_mask_mov_epi32(out, nan, _mm512_or_si512(bits, _mm512_set1_epi32(0x00400000)));
    out = _mm512_mask_mov_epi32(out, tiny, _mm512_and_si512(bits, _mm512_set1_epi32((int)0x80000000)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(out, 16));
#endif
}

/* the lanes m of v to p[i .. i + 15]: float32, or bf16 rounded to nearest even */
static inline void store(void *p, long i, int bf16, __mmask16 m, __m512 v) {
    if (bf16) _mm256_mask_storeu_epi16((uint16_t *)p + i, m, f32_to_bf16x16(v));
    else _mm512_mask_storeu_ps((float *)p + i, m, v);
}

/* v as a bf16 tensor holds it (an intermediate that torch rounds), or v itself in float32 */
static inline __m512 rounded(__m512 v, int bf16) {
    return bf16 ? bf16x16_to_f32(f32_to_bf16x16(v)) : v;
}

#endif
