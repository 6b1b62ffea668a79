// Rotated NMS bitmask for oriented boxes (vrt_ros/boxes/rotated.py is the reference): the probabilistic IoU of
// Ultralytics (ultralytics/utils/metrics.py::batch_probiou) between sorted candidates, the same bitmask layout as
// nms_mask in kernels/postprocess.cu, so the shared greedy pass nms_reduce and finalize_extras follow unchanged.
// Candidate rows (kernels/decode.cu): x1, y1, x2, y2 of the box in its own axes, score, class, key, -, then the
// angle (radians) at `angle_offset`. Batches: launched once per slot with that slot's buffers, as nms_mask.

#define WORD_BITS 64

__device__ __forceinline__ int num_candidates(const int* __restrict__ count, int capacity) {
    const int n = *count;
    return n < capacity ? n : capacity;
}

struct Gauss { float x, y, a, b, c; };

// Centre and covariance of a box as a uniform rectangle: (w^2/12, h^2/12) rotated by the angle.
__device__ __forceinline__ Gauss gauss(const float* r, int angle_offset) {
    const float w = r[2] - r[0], h = r[3] - r[1], t = r[angle_offset];
    const float a = w * w / 12.0f, b = h * h / 12.0f, co = cosf(t), si = sinf(t);
    Gauss g;
    g.x = (r[0] + r[2]) * 0.5f;
    g.y = (r[1] + r[3]) * 0.5f;
    g.a = a * co * co + b * si * si;
    g.b = a * si * si + b * co * co;
    g.c = (a - b) * co * si;
    return g;
}

__device__ __forceinline__ float probiou(const Gauss& p, const Gauss& q) {
    const float eps = 1e-7f;
    const float dx = p.x - q.x, dy = p.y - q.y;
    const float sa = p.a + q.a, sb = p.b + q.b, sc = p.c + q.c;
    const float den = sa * sb - sc * sc;
    const float t1 = (sa * dy * dy + sb * dx * dx) / (den + eps) * 0.25f;
    const float t2 = (sc * (-dx) * dy) / (den + eps) * 0.5f;
    const float d1 = fmaxf(p.a * p.b - p.c * p.c, 0.0f), d2 = fmaxf(q.a * q.b - q.c * q.c, 0.0f);
    const float t3 = logf(den / (4.0f * sqrtf(d1 * d2) + eps) + eps) * 0.5f;
    const float bd = fminf(fmaxf(t1 + t2 + t3, eps), 100.0f);
    return 1.0f - sqrtf(1.0f - expf(-bd) + eps);
}

// One thread per (sorted row i, 64-bit word w): bit j of mask[i * words + w] set when sorted box j (j > i) has
// probiou > iou_threshold with sorted box i (and the same class unless class-agnostic).
extern "C" __global__ void nms_mask_rotated(const float* __restrict__ cand, int cand_stride, int capacity,
                                            const int* __restrict__ count, const int* __restrict__ order,
                                            float iou_threshold, int class_agnostic, int words, int angle_offset,
                                            unsigned long long* __restrict__ mask) {
    const int n = num_candidates(count, capacity);
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int i = (int)(t / words), w = (int)(t % words);
    if (i >= n || w * WORD_BITS >= n) return;
    const float* a = cand + (size_t)__ldg(order + i) * cand_stride;
    const Gauss ga = gauss(a, angle_offset);
    const float cls_a = a[5];
    unsigned long long bits = 0ull;
    const int j0 = w * WORD_BITS;
    const int j1 = min(j0 + WORD_BITS, n);
    for (int j = max(j0, i + 1); j < j1; ++j) {
        const float* b = cand + (size_t)__ldg(order + j) * cand_stride;
        if (!class_agnostic && b[5] != cls_a) continue;
        if (probiou(ga, gauss(b, angle_offset)) > iou_threshold) bits |= 1ull << (j - j0);
    }
    mask[(size_t)i * words + w] = bits;
}
