/* Fused elementwise kernels of dapo-rl's training forward and backward on x86 CPUs with AVX-512
   (dapo.trainer.fused_cpu_ops wraps them in autograd; dapo.rollout.cpu_kernels builds them).

   Each replaces a chain of torch ops, every one a pass over memory, by one pass forward and one
   backward; the arithmetic is torch's, in float32 (sums in another order). A tensor is float32, or
   bf16 where its `*_bf16` flag says so: read exactly, written rounded to nearest even, once.

   RMSNorm (Llama's): y = w * (x * r), r = 1 / sqrt(mean(x^2) + eps), per row of n;
       dx = r (w g) - x r^3 sum(w g x) / n,  dw = sum over rows of g (x r).
   SwiGLU: out = silu(gate) * up, gate and up the two halves of a row of 2n (one fused matmul's
       output); in bf16 silu(gate) is rounded before the product, as torch rounds between its ops.
   RoPE: out[i] = x[i] cos[i] + x[(i + d/2) mod d] sin[i] per head of d (sin sign-folded, as
       dapo.trainer.native_forward's tables), float32 out; dx[j] = g[j] cos[j] + g[k] sin[k],
       k = (j + d/2) mod d. d/2 is a multiple of 16 (the caller checks). */
#include <string.h>

#include "vector_math.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* sigmoid(x) = 1 / (1 + e^-x), through e = exp(-|x|) <= 1 (no overflow): 1 / (1 + e) for x >= 0,
   e / (1 + e) below; NaN stays NaN. */
static inline __m512 sigmoid(__m512 x) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
    const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_mul_ps(inverse, negative, e, inverse);
}

/* x: (rows, n) float32; w: (n,) float32; y: (rows, n); rstd: (rows,) float32, r per row (for backward) */
void dapo_rms_norm_forward(const float *x, const float *w, long rows, long n, float eps, void *y, int y_bf16,
                           float *rstd, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) {
        const float *row = x + r * n;
        __m512 squares = _mm512_setzero_ps();
        for (long i = 0; i < n; i += 16) {
            const __m512 v = _mm512_maskz_loadu_ps(tail(n, i), row + i);
            squares = _mm512_add_ps(squares, _mm512_mul_ps(v, v));
        }
        const float inverse = 1.0f / sqrtf(_mm512_reduce_add_ps(squares) / (float)n + eps);
        rstd[r] = inverse;
        const __m512 factor = _mm512_set1_ps(inverse);
        for (long i = 0; i < n; i += 16) {
            const __mmask16 m = tail(n, i);
            const __m512 normed = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), factor);
            store(y, r * n + i, y_bf16, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), normed));
        }
    }
}

/* gy: (rows, n); gx: (rows, n) float32; gw: (n,) float32, written; scratch: threads * n float32 */
void dapo_rms_norm_backward(const void *gy, int gy_bf16, const float *x, const float *w, const float *rstd,
                            long rows, long n, float *gx, float *gw, float *scratch, int threads) {
    memset(scratch, 0, sizeof(float) * threads * n);
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        float *part = scratch + (long)omp_get_thread_num() * n;
#else
        float *part = scratch;
#endif
#pragma omp for schedule(static)
        for (long r = 0; r < rows; ++r) {
            const float *row = x + r * n;
            const float inverse = rstd[r];
            __m512 dots = _mm512_setzero_ps();
            for (long i = 0; i < n; i += 16) {
                const __mmask16 m = tail(n, i);
                const __m512 weighted = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), load(gy, r * n + i, gy_bf16, m));
                dots = _mm512_add_ps(dots, _mm512_mul_ps(weighted, _mm512_maskz_loadu_ps(m, row + i)));
            }
            const __m512 factor = _mm512_set1_ps(inverse);
            const __m512 coefficient = _mm512_set1_ps(inverse * inverse * inverse * _mm512_reduce_add_ps(dots) / (float)n);
            for (long i = 0; i < n; i += 16) {
                const __mmask16 m = tail(n, i);
                const __m512 g = load(gy, r * n + i, gy_bf16, m), v = _mm512_maskz_loadu_ps(m, row + i);
                const __m512 weighted = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), g);
                _mm512_mask_storeu_ps(gx + r * n + i, m,
                                      _mm512_sub_ps(_mm512_mul_ps(weighted, factor), _mm512_mul_ps(v, coefficient)));
                _mm512_mask_storeu_ps(part + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, part + i),
                                                                 _mm512_mul_ps(g, _mm512_mul_ps(v, factor))));
            }
        }
    }
    for (long i = 0; i < n; ++i) {
        float total = 0.0f;
        for (int t = 0; t < threads; ++t) total += scratch[(long)t * n + i];
        gw[i] = total;
    }
}

/* gate_up: (rows, 2n), each row gate then up; out: (rows, n); both bf16 or both float32 */
void dapo_swiglu_forward(const void *gate_up, long rows, long n, int bf16, void *out, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) {
        for (long i = 0; i < n; i += 16) {
            const __mmask16 m = tail(n, i);
            const __m512 gate = load(gate_up, r * 2 * n + i, bf16, m), up = load(gate_up, r * 2 * n + n + i, bf16, m);
            const __m512 activated = rounded(_mm512_mul_ps(gate, sigmoid(gate)), bf16);
            store(out, r * n + i, bf16, m, _mm512_mul_ps(activated, up));
        }
    }
}

/* grad_out: (rows, n); gate_up: the forward's input; grad_gate_up: (rows, 2n) written; one dtype.
   d up = g silu(gate); d gate = (g up) sigmoid(gate) (1 + gate (1 - sigmoid(gate))), as torch's
   mul and silu_backward, each product rounded where torch rounds it. */
void dapo_swiglu_backward(const void *grad_out, const void *gate_up, long rows, long n, int bf16, void *grad_gate_up,
                          int threads) {
    const __m512 one = _mm512_set1_ps(1.0f);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) {
        for (long i = 0; i < n; i += 16) {
            const __mmask16 m = tail(n, i);
            const __m512 g = load(grad_out, r * n + i, bf16, m);
            const __m512 gate = load(gate_up, r * 2 * n + i, bf16, m), up = load(gate_up, r * 2 * n + n + i, bf16, m);
            const __m512 s = sigmoid(gate);
            const __m512 activated = rounded(_mm512_mul_ps(gate, s), bf16);
            const __m512 grad_activated = rounded(_mm512_mul_ps(g, up), bf16);
            const __m512 slope = _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(gate, _mm512_sub_ps(one, s))));
            store(grad_gate_up, r * 2 * n + i, bf16, m, _mm512_mul_ps(grad_activated, slope));
            store(grad_gate_up, r * 2 * n + n + i, bf16, m, _mm512_mul_ps(g, activated));
        }
    }
}

/* x: (rows, heads * d) at row stride `stride` elements, bf16 or float32; cos, sin: (rows, d)
   float32; out: (rows, heads, d) float32 */
void dapo_rope_forward(const void *x, long stride, int x_bf16, long rows, long heads, long d, const float *cos,
                       const float *sin, float *out, int threads) {
    const long half = d / 2;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) {
        for (long h = 0; h < heads; ++h) {
            const long base = r * stride + h * d;
            for (long i = 0; i < d; i += 16) {
                const long j = i < half ? i + half : i - half;
                const __m512 product = _mm512_mul_ps(load(x, base + i, x_bf16, 0xFFFF), _mm512_loadu_ps(cos + r * d + i));
                const __m512 partner = _mm512_mul_ps(load(x, base + j, x_bf16, 0xFFFF), _mm512_loadu_ps(sin + r * d + i));
                _mm512_storeu_ps(out + (r * heads + h) * d + i, _mm512_add_ps(product, partner));
            }
        }
    }
}

/* grad: (rows, heads, d) float32; grad_x: (rows, heads * d) contiguous, bf16 or float32 */
void dapo_rope_backward(const float *grad, long rows, long heads, long d, const float *cos, const float *sin,
                        void *grad_x, int x_bf16, int threads) {
    const long half = d / 2;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) {
        for (long h = 0; h < heads; ++h) {
            const float *g = grad + (r * heads + h) * d;
            for (long j = 0; j < d; j += 16) {
                const long k = j < half ? j + half : j - half;
                const __m512 direct = _mm512_mul_ps(_mm512_loadu_ps(g + j), _mm512_loadu_ps(cos + r * d + j));
                const __m512 partner = _mm512_mul_ps(_mm512_loadu_ps(g + k), _mm512_loadu_ps(sin + r * d + k));
                store(grad_x, (r * heads + h) * d + j, x_bf16, 0xFFFF, _mm512_add_ps(direct, partner));
            }
        }
    }
}
