// Per-box robust depth statistic (issue 25); the CPU reference is vrt_ros/depth/stats.py (box_stats).
//   depth_box_stats : one block per detection row of the postprocess result (postprocess.cu's finalize): the
//                     valid depth inside the row's box, the nearest-rank percentiles p_lo, p_mid, p_hi
//
// A pixel is read as float metres v / units_per_m (IEEE division: NVRTC's default -prec-div=true), valid when finite,
// > 0 and inside [near_m, far_m]. The k-th smallest valid value, k = max(1, ceil(p * n / 100)) in double, is found
// exactly by a radix select over the float's bit pattern (positive floats order as their unsigned bits): four passes
// over the box's pixels, each a 256-bin histogram of the next 8 bits among the values matching the prefix found so
// far; the three percentiles are selected in the same passes. So the result is bitwise the CPU reference's.
// Box pixels: those whose centre lies in the box scaled by `scale` (depth pixels per colour pixel), computed in
// float as pixel_span() does. The number of rows is read from the device (result[0]), so nothing waits on the host.
// out: per row 4 floats: valid pixel count, depth at p_lo, p_mid, p_hi (metres; NaN when no pixel is valid).

#define HIST_BINS 256
#define PERCENTILES 3

__device__ __forceinline__ void pixel_span(float a, float b, float scale, int size, int* lo, int* hi) {
    const float a_s = a * scale, b_s = b * scale;
    int l = (int)ceilf(a_s - 0.5f), h = (int)ceilf(b_s - 0.5f);
    l = min(max(l, 0), size);
    h = min(max(h, 0), size);
    if (h <= l) {
        const float mid = (a_s + b_s) * 0.5f;
        l = min(max((int)floorf(mid), 0), size - 1);
        h = l + 1;
    }
    *lo = l;
    *hi = h;
}

// Bits of the pixel's depth in metres when valid, 0 (never a valid positive float's pattern) otherwise.
__device__ __forceinline__ unsigned int valid_bits(const unsigned char* __restrict__ depth, int pitch, int x, int y,
                                                   int is_u16, float units_per_m, float near_m, float far_m) {
    const unsigned char* row = depth + (size_t)y * pitch;
    const float v = is_u16 ? (float)__ldg((const unsigned short*)row + x) : __ldg((const float*)row + x);
    const float z = v / units_per_m;
    if (!isfinite(z) || !(z > 0.0f) || z < near_m || z > far_m) return 0u;
    return __float_as_uint(z);
}

extern "C" __global__ void depth_box_stats(const unsigned char* __restrict__ depth, int pitch, int depth_w,
                                           int depth_h, int is_u16, float units_per_m, float near_m, float far_m,
                                           float scale, const float* __restrict__ result, int result_header,
                                           int row_stride, int max_rows, double p_lo, double p_mid, double p_hi,
                                           float* __restrict__ out) {
    __shared__ unsigned int hist[PERCENTILES][HIST_BINS];
    __shared__ unsigned int prefix[PERCENTILES];
    __shared__ unsigned int rank[PERCENTILES];
    __shared__ unsigned int valid;
    const int n_rows = min(__ldg((const int*)result), max_rows);
    const int row = blockIdx.x;
    if (row >= n_rows) return;
    const float* box = result + result_header + (size_t)row * row_stride;
    int x0, x1, y0, y1;
    pixel_span(__ldg(box + 0), __ldg(box + 2), scale, depth_w, &x0, &x1);
    pixel_span(__ldg(box + 1), __ldg(box + 3), scale, depth_h, &y0, &y1);
    const int bw = x1 - x0, count = bw * (y1 - y0);
    if (threadIdx.x < PERCENTILES) prefix[threadIdx.x] = 0u;
    if (threadIdx.x == 0) valid = 0u;
    unsigned int mask = 0u;
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        for (int i = threadIdx.x; i < PERCENTILES * HIST_BINS; i += blockDim.x) (&hist[0][0])[i] = 0u;
        __syncthreads();
        unsigned int mine = 0u;
        for (int i = threadIdx.x; i < count; i += blockDim.x) {
            const unsigned int u = valid_bits(depth, pitch, x0 + i % bw, y0 + i / bw, is_u16, units_per_m, near_m, far_m);
            if (u == 0u) continue;
            ++mine;
            for (int j = 0; j < PERCENTILES; ++j)
                if (((u ^ prefix[j]) & mask) == 0u) atomicAdd(&hist[j][(u >> shift) & 0xffu], 1u);
        }
        if (pass == 0 && mine) atomicAdd(&valid, mine);
        __syncthreads();
        if (pass == 0 && threadIdx.x < PERCENTILES) {
            const double p = threadIdx.x == 0 ? p_lo : (threadIdx.x == 1 ? p_mid : p_hi);
            const double k = ceil(p * (double)valid / 100.0);
            rank[threadIdx.x] = k < 1.0 ? 1u : (unsigned int)k;
        }
        __syncthreads();
        if (valid == 0u) break;
        if (threadIdx.x < PERCENTILES) {  // thread j walks histogram j to the bin holding rank j
            const int j = threadIdx.x;
            unsigned int below = 0u;
            int bin = 0;
            for (; bin < HIST_BINS - 1 && below + hist[j][bin] < rank[j]; ++bin) below += hist[j][bin];
            rank[j] -= below;
            prefix[j] |= (unsigned int)bin << shift;
        }
        mask |= 0xffu << shift;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float* o = out + (size_t)row * 4;
        o[0] = (float)valid;
        for (int j = 0; j < PERCENTILES; ++j) o[1 + j] = valid ? __uint_as_float(prefix[j]) : __int_as_float(0x7fc00000);
    }
}
