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
// float as pixel_span() does. Oriented boxes (theta_col >= 0: the row's column holding theta, yolov8_obb; the box is
// the rectangle in its own axes): the pixels whose centre is inside the rotated rectangle, or that hold its centre,
// searched over its enclosing rectangle; every float step as rotated_cover() (vrt_ros/depth/stats.py) computes it,
// with __f*_rn intrinsics (no contraction into fused multiply-adds) and cos/sin rounded from double. The number of rows is read from the device (result[0]), so nothing waits on the host.
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

// An oriented box in depth pixels (rotated_cover in vrt_ros/depth/stats.py).
struct RotatedBox {
    float cx, cy, hw, hh, c, s;
    int ci, cj;
};

__device__ __forceinline__ void rotated_span(const float* box, float theta, float scale, int depth_w, int depth_h,
                                             RotatedBox* r, int* x0, int* x1, int* y0, int* y1) {
    const float bx1 = __ldg(box + 0), by1 = __ldg(box + 1), bx2 = __ldg(box + 2), by2 = __ldg(box + 3);
    r->cx = __fmul_rn(__fmul_rn(__fadd_rn(bx1, bx2), 0.5f), scale);
    r->cy = __fmul_rn(__fmul_rn(__fadd_rn(by1, by2), 0.5f), scale);
    r->hw = __fmul_rn(__fmul_rn(__fsub_rn(bx2, bx1), 0.5f), scale);
    r->hh = __fmul_rn(__fmul_rn(__fsub_rn(by2, by1), 0.5f), scale);
    r->c = (float)cos((double)theta);
    r->s = (float)sin((double)theta);
    const float ex = __fadd_rn(fabsf(__fmul_rn(r->hw, r->c)), fabsf(__fmul_rn(r->hh, r->s)));
    const float ey = __fadd_rn(fabsf(__fmul_rn(r->hw, r->s)), fabsf(__fmul_rn(r->hh, r->c)));
    r->ci = min(max((int)floorf(r->cx), 0), depth_w - 1);
    r->cj = min(max((int)floorf(r->cy), 0), depth_h - 1);
    *x0 = min(min(max((int)floorf(__fsub_rn(r->cx, ex)) - 1, 0), depth_w), r->ci);
    *x1 = max(min(max((int)ceilf(__fadd_rn(r->cx, ex)) + 1, 0), depth_w), r->ci + 1);
    *y0 = min(min(max((int)floorf(__fsub_rn(r->cy, ey)) - 1, 0), depth_h), r->cj);
    *y1 = max(min(max((int)ceilf(__fadd_rn(r->cy, ey)) + 1, 0), depth_h), r->cj + 1);
}

__device__ __forceinline__ bool rotated_covers(const RotatedBox& r, int x, int y) {
    if (x == r.ci && y == r.cj) return true;
    const float dx = __fsub_rn(__fadd_rn((float)x, 0.5f), r.cx), dy = __fsub_rn(__fadd_rn((float)y, 0.5f), r.cy);
    const float u = __fadd_rn(__fmul_rn(dx, r.c), __fmul_rn(dy, r.s));
    const float v = __fsub_rn(__fmul_rn(dy, r.c), __fmul_rn(dx, r.s));
    return u >= -r.hw && u < r.hw && v >= -r.hh && v < r.hh;
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
                                           int row_stride, int theta_col, int max_rows, double p_lo, double p_mid,
                                           double p_hi, float* __restrict__ out) {
    __shared__ unsigned int hist[PERCENTILES][HIST_BINS];
    __shared__ unsigned int prefix[PERCENTILES];
    __shared__ unsigned int rank[PERCENTILES];
    __shared__ unsigned int valid;
    const int n_rows = min(__ldg((const int*)result), max_rows);
    const int row = blockIdx.x;
    if (row >= n_rows) return;
    const float* box = result + result_header + (size_t)row * row_stride;
    int x0, x1, y0, y1;
    RotatedBox rb;
    const bool rotated = theta_col >= 0;
    if (rotated) {
        rotated_span(box, __ldg(box + theta_col), scale, depth_w, depth_h, &rb, &x0, &x1, &y0, &y1);
    } else {
        pixel_span(__ldg(box + 0), __ldg(box + 2), scale, depth_w, &x0, &x1);
        pixel_span(__ldg(box + 1), __ldg(box + 3), scale, depth_h, &y0, &y1);
    }
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
            const int x = x0 + i % bw, y = y0 + i / bw;
            if (rotated && !rotated_covers(rb, x, y)) continue;
            const unsigned int u = valid_bits(depth, pitch, x, y, is_u16, units_per_m, near_m, far_m);
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
