// Shared postprocess after a head's decode (vrt_ros/boxes/postprocess.py and vrt_ros/boxes/nms.py are the references):
//   rank_by_score  : order candidates by score descending, ties by key ascending (numpy lexsort order)
//   nms_mask       : bit j of row i set when sorted box j (j > i) has IoU > threshold with sorted box i
//                    (and the same class unless class-agnostic)
//   nms_reduce     : greedy pass over the sorted boxes (one block), keeping the unsuppressed ones
//   finalize       : map to source pixels, clip, drop empty boxes, cap at max_detections, write the result
// Candidate rows: see decode.cu (CAND_HEADER floats then 3K keypoint values). The number of candidates is read
// from the device (count[0], capped at capacity), so nothing waits for the host between kernels.

#define CAND_HEADER 8
#define WORD_BITS 64

__device__ __forceinline__ int num_candidates(const int* __restrict__ count, int capacity) {
    const int n = *count;
    return n < capacity ? n : capacity;
}

// order[rank(i)] = i, rank by (score desc, key asc); keys are unique so ranks form a permutation.
// Block of `blockDim.x` threads; dynamic shared memory: 2 * blockDim.x floats (score and key tiles).
extern "C" __global__ void rank_by_score(const float* __restrict__ cand, int cand_stride, int capacity,
                                         const int* __restrict__ count, int* __restrict__ order) {
    extern __shared__ float tile[];
    float* ts = tile;
    float* tk = tile + blockDim.x;
    const int n = num_candidates(count, capacity);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float si = 0.0f, ki = 0.0f;
    if (i < n) {
        si = __ldg(cand + (size_t)i * cand_stride + 4);
        ki = __ldg(cand + (size_t)i * cand_stride + 6);
    }
    int rank = 0;
    for (int base = 0; base < n; base += blockDim.x) {
        const int j = base + threadIdx.x;
        if (j < n) {
            ts[threadIdx.x] = __ldg(cand + (size_t)j * cand_stride + 4);
            tk[threadIdx.x] = __ldg(cand + (size_t)j * cand_stride + 6);
        }
        __syncthreads();
        const int m = min((int)blockDim.x, n - base);
        if (i < n) {
            for (int t = 0; t < m; ++t) {
                const float sj = ts[t], kj = tk[t];
                rank += (sj > si) || (sj == si && kj < ki);
            }
        }
        __syncthreads();
    }
    if (i < n) order[rank] = i;
}

__device__ __forceinline__ float iou(const float* a, const float* b) {
    const float iw = fmaxf(fminf(a[2], b[2]) - fmaxf(a[0], b[0]), 0.0f);
    const float ih = fmaxf(fminf(a[3], b[3]) - fmaxf(a[1], b[1]), 0.0f);
    const float inter = iw * ih;
    const float area_a = fmaxf(a[2] - a[0], 0.0f) * fmaxf(a[3] - a[1], 0.0f);
    const float area_b = fmaxf(b[2] - b[0], 0.0f) * fmaxf(b[3] - b[1], 0.0f);
    const float uni = area_a + area_b - inter;
    return uni > 0.0f ? inter / uni : 0.0f;
}

// One thread per (sorted row i, 64-bit word w): mask[i * words + w]. Launched over capacity * words threads.
extern "C" __global__ void nms_mask(const float* __restrict__ cand, int cand_stride, int capacity,
                                    const int* __restrict__ count, const int* __restrict__ order, float iou_threshold,
                                    int class_agnostic, int words, unsigned long long* __restrict__ mask) {
    const int n = num_candidates(count, capacity);
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int i = (int)(t / words), w = (int)(t % words);
    if (i >= n || w * WORD_BITS >= n) return;
    const float* a = cand + (size_t)__ldg(order + i) * cand_stride;
    float box_a[4] = {__ldg(a), __ldg(a + 1), __ldg(a + 2), __ldg(a + 3)};
    const float cls_a = __ldg(a + 5);
    unsigned long long bits = 0ull;
    const int j0 = w * WORD_BITS;
    const int j1 = min(j0 + WORD_BITS, n);
    for (int j = max(j0, i + 1); j < j1; ++j) {
        const float* b = cand + (size_t)__ldg(order + j) * cand_stride;
        if (!class_agnostic && __ldg(b + 5) != cls_a) continue;
        float box_b[4] = {__ldg(b), __ldg(b + 1), __ldg(b + 2), __ldg(b + 3)};
        if (iou(box_a, box_b) > iou_threshold) bits |= 1ull << (j - j0);
    }
    mask[(size_t)i * words + w] = bits;
}

// Greedy suppression in score order, one block; dynamic shared memory: `words` 64-bit words.
// kept[0..kept_count) = sorted positions of the kept boxes. apply_nms = 0 keeps every candidate (end-to-end).
extern "C" __global__ void nms_reduce(const int* __restrict__ count, int capacity, const unsigned long long* __restrict__ mask,
                                      int words, int apply_nms, int* __restrict__ kept, int* __restrict__ kept_count) {
    extern __shared__ unsigned long long removed[];
    const int n = num_candidates(count, capacity);
    if (!apply_nms) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) kept[i] = i;
        if (threadIdx.x == 0) *kept_count = n;
        return;
    }
    const int used_words = (n + WORD_BITS - 1) / WORD_BITS;
    for (int w = threadIdx.x; w < used_words; w += blockDim.x) removed[w] = 0ull;
    __syncthreads();
    int nkept = 0;
    for (int i = 0; i < n; ++i) {
        const bool is_removed = (removed[i / WORD_BITS] >> (i % WORD_BITS)) & 1ull;
        __syncthreads();  // every thread has read removed[] before anyone updates it
        if (!is_removed) {
            if (threadIdx.x == 0) kept[nkept] = i;
            ++nkept;
            const unsigned long long* row = mask + (size_t)i * words;
            for (int w = i / WORD_BITS + threadIdx.x; w < used_words; w += blockDim.x) removed[w] |= __ldg(row + w);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *kept_count = nkept;
}

// One block. Maps kept boxes (engine-input pixels) to source pixels: x_src = (x - pad_x) / scale_x (same for y),
// clips to [0, src_w] x [0, src_h] (keypoints too), clips scores and keypoint confidences to [0, 1], drops boxes
// whose clipped width or height is <= 0, keeps the first max_detections.
// result[0] (int) = number of detections, result[1] (int) = candidates found by decode (before capacity),
// then rows from result + RESULT_HEADER floats: x1, y1, x2, y2, score, class, K x (x, y, confidence).
// Dynamic shared memory: blockDim.x ints.
#define RESULT_HEADER 4
extern "C" __global__ void finalize(const float* __restrict__ cand, int cand_stride, const int* __restrict__ order,
                                    const int* __restrict__ kept, const int* __restrict__ kept_count,
                                    const int* __restrict__ count, int num_keypoints, float pad_x, float pad_y,
                                    float scale_x, float scale_y, float src_w, float src_h, int max_detections,
                                    float* __restrict__ result) {
    extern __shared__ int valid[];
    const int n = *kept_count;
    const int out_stride = 6 + 3 * num_keypoints;
    float* rows = result + RESULT_HEADER;
    int written = 0;  // same value in every thread
    for (int base = 0; base < n && written < max_detections; base += blockDim.x) {
        const int k = base + threadIdx.x;
        float b[4];
        int ok = 0;
        const float* c = nullptr;
        if (k < n) {
            c = cand + (size_t)order[kept[k]] * cand_stride;
            b[0] = fminf(fmaxf((c[0] - pad_x) / scale_x, 0.0f), src_w);
            b[1] = fminf(fmaxf((c[1] - pad_y) / scale_y, 0.0f), src_h);
            b[2] = fminf(fmaxf((c[2] - pad_x) / scale_x, 0.0f), src_w);
            b[3] = fminf(fmaxf((c[3] - pad_y) / scale_y, 0.0f), src_h);
            ok = b[2] > b[0] && b[3] > b[1];
        }
        valid[threadIdx.x] = ok;
        __syncthreads();
        int pos = written;
        for (int t = 0; t < threadIdx.x; ++t) pos += valid[t];
        int total = 0;
        for (int t = 0; t < (int)blockDim.x; ++t) total += valid[t];
        if (ok && pos < max_detections) {
            float* o = rows + (size_t)pos * out_stride;
            o[0] = b[0]; o[1] = b[1]; o[2] = b[2]; o[3] = b[3];
            o[4] = fminf(fmaxf(c[4], 0.0f), 1.0f);
            o[5] = c[5];
            for (int j = 0; j < num_keypoints; ++j) {
                const float* kp = c + CAND_HEADER + 3 * j;
                o[6 + 3 * j] = fminf(fmaxf((kp[0] - pad_x) / scale_x, 0.0f), src_w);
                o[6 + 3 * j + 1] = fminf(fmaxf((kp[1] - pad_y) / scale_y, 0.0f), src_h);
                o[6 + 3 * j + 2] = fminf(fmaxf(kp[2], 0.0f), 1.0f);
            }
        }
        written = min(written + total, max_detections);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        ((int*)result)[0] = written;
        ((int*)result)[1] = *count;
    }
}
