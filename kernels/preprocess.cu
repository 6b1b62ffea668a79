// Fused preprocess: raw 8-bit image (any row step, 1..4 samples per pixel) -> bilinear letterbox -> pad ->
// (pixel - mean) / std -> CHW planes written straight into the engine input (float32 or float16).
//
// Geometry (vrt_ros/boxes/geometry.py): tensor pixel u inside the content reads source position
//   sx = (u - pad_x + 0.5) / scale_x - 0.5   (half-pixel centres, borders clamped)
// which is OpenCV INTER_LINEAR on float data, the CPU reference (vrt_ros/intake/preprocess.py).
// Every size, the pad value, mean and std are arguments; nothing about a model is written here.

// Float to IEEE half, round to nearest even (PTX cvt; keeps NVRTC free of cuda_fp16.h).
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ void store(float* __restrict__ dst, size_t i, float v) { dst[i] = v; }
__device__ __forceinline__ void store(unsigned short* __restrict__ dst, size_t i, float v) { dst[i] = f32_to_f16(v); }

// Clamped source index and weight along one axis. Returns i0; *i1 and *frac are the second tap and its weight.
__device__ __forceinline__ int tap(int u, int pad, double inv_scale, int size, int* i1, float* frac) {
    double s = ((double)(u - pad) + 0.5) * inv_scale - 0.5;
    if (s < 0.0) s = 0.0;
    int i0 = (int)floor(s);
    if (i0 > size - 1) i0 = size - 1;
    *i1 = i0 + 1 < size ? i0 + 1 : size - 1;
    *frac = (float)(s - (double)i0);
    if (*i1 == i0) *frac = 0.0f;
    return i0;
}

// The fused letterbox shared by every encoding: `pixel(x, y, out)` writes the three samples of source pixel (x, y)
// in tensor-plane order (8-bit values as floats); this does the bilinear taps, the padding and the normalisation.
template <typename T, typename Pixel>
__device__ __forceinline__ void letterbox(
    const Pixel& pixel, int src_w, int src_h, T* __restrict__ dst, int dst_w, int dst_h,
    int pad_x, int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y,
    float pad_value, float mean0, float mean1, float mean2, float std0, float std1, float std2) {
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    const int v = blockIdx.y * blockDim.y + threadIdx.y;
    if (u >= dst_w || v >= dst_h) return;
    const size_t plane = (size_t)dst_w * dst_h;
    const size_t o = (size_t)v * dst_w + u;
    const int cu = u - pad_x, cv = v - pad_y;
    if (cu < 0 || cv < 0 || cu >= resized_w || cv >= resized_h) {
        store(dst, o, (pad_value - mean0) / std0);
        store(dst, o + plane, (pad_value - mean1) / std1);
        store(dst, o + 2 * plane, (pad_value - mean2) / std2);
        return;
    }
    int x1, y1;
    float fx, fy;
    const int x0 = tap(u, pad_x, inv_scale_x, src_w, &x1, &fx);
    const int y0 = tap(v, pad_y, inv_scale_y, src_h, &y1, &fy);
    float p00[3], p01[3], p10[3], p11[3];
    pixel(x0, y0, p00);
    pixel(x1, y0, p01);
    pixel(x0, y1, p10);
    pixel(x1, y1, p11);
    const float means[3] = {mean0, mean1, mean2};
    const float stds[3] = {std0, std1, std2};
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const float top = p00[c] * (1.0f - fx) + p01[c] * fx;
        const float bottom = p10[c] * (1.0f - fx) + p11[c] * fx;
        const float value = top * (1.0f - fy) + bottom * fy;
        store(dst, o + c * plane, (value - means[c]) / stds[c]);
    }
}

// Packed 8-bit samples: tensor plane c reads byte plane<c> of the pixel's `channels` bytes.
struct PackedU8 {
    const unsigned char* __restrict__ src;
    int step, channels, plane0, plane1, plane2;
    __device__ __forceinline__ void operator()(int x, int y, float out[3]) const {
        const unsigned char* px = src + (size_t)y * step + (size_t)x * channels;
        out[0] = (float)__ldg(px + plane0);
        out[1] = (float)__ldg(px + plane1);
        out[2] = (float)__ldg(px + plane2);
    }
};

// 8-bit packed pixels (bgr8, rgb8, bgra8, rgba8, mono8): `channels` bytes per pixel; tensor plane c reads byte
// `plane<c>` of each pixel (the channel order and the encoding's sample order combined by the host). mono16 is read
// by the same kernel with 2 bytes per pixel and every plane at the sample's high byte (1 little-endian, 0
// big-endian): the high byte is the sample >> 8, the reference's 8-bit grey.
extern "C" __global__ void letterbox_u8(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int channels,
    int plane0, int plane1, int plane2,
    float* __restrict__ dst, int dst_w, int dst_h,
    int pad_x, int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y,
    float pad_value, float mean0, float mean1, float mean2, float std0, float std1, float std2) {
    const PackedU8 pixel{src, src_step, channels, plane0, plane1, plane2};
    letterbox<float>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h, inv_scale_x,
                     inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}

// Same as letterbox_u8, writing IEEE half (engine inputs of dtype float16).
extern "C" __global__ void letterbox_u8_f16(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int channels,
    int plane0, int plane1, int plane2,
    unsigned short* __restrict__ dst, int dst_w, int dst_h,
    int pad_x, int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y,
    float pad_value, float mean0, float mean1, float mean2, float std0, float std1, float std2) {
    const PackedU8 pixel{src, src_step, channels, plane0, plane1, plane2};
    letterbox<unsigned short>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h,
                              inv_scale_x, inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}

// ---------------------------------------------------------------------------------------------------------------
// Packed 4:2:2 YUV (UYVY = ROS yuv422, YUYV = ROS yuv422_yuy2): a pixel pair shares U and V. Each bilinear tap is
// first converted to 8-bit BGR exactly as OpenCV cvtColor(COLOR_YUV2BGR_UYVY / _YUYV) does (BT.601 video range,
// 20-bit fixed point; the CPU reference vrt_ros.intake.frames.to_bgr), then interpolated like the 8-bit kernel.
// Fixed-point BT.601 coefficients of OpenCV's color_yuv (ITUR_BT_601_*): a colour standard, not a model value.
#define BT601_CY 1220542
#define BT601_CUB 2116026
#define BT601_CUG (-409993)
#define BT601_CVG (-852492)
#define BT601_CVR 1673527
#define BT601_SHIFT 20
#define BT601_Y_OFFSET 16
#define BT601_UV_OFFSET 128

__device__ __forceinline__ float u8_sat(int v) { return (float)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// BGR of pixel x of a 4:2:2 row; y_offset/u_offset/v_offset: byte positions inside a 4-byte pixel pair.
__device__ __forceinline__ void yuv422_bgr(const unsigned char* __restrict__ row, int x, int y_offset, int u_offset,
                                           int v_offset, float bgr[3]) {
    const unsigned char* pair = row + (size_t)(x >> 1) * 4;
    const int u = (int)__ldg(pair + u_offset) - BT601_UV_OFFSET;
    const int v = (int)__ldg(pair + v_offset) - BT601_UV_OFFSET;
    const int yy = max(0, (int)__ldg(pair + y_offset + 2 * (x & 1)) - BT601_Y_OFFSET) * BT601_CY;
    const int half = 1 << (BT601_SHIFT - 1);
    bgr[0] = u8_sat((yy + half + BT601_CUB * u) >> BT601_SHIFT);
    bgr[1] = u8_sat((yy + half + BT601_CVG * v + BT601_CUG * u) >> BT601_SHIFT);
    bgr[2] = u8_sat((yy + half + BT601_CVR * v) >> BT601_SHIFT);
}

// 4:2:2 pixels: tensor plane c reads BGR channel plane<c> (0 = B, 1 = G, 2 = R) of the converted pixel.
struct Yuv422 {
    const unsigned char* __restrict__ src;
    int step, y_offset, u_offset, v_offset, plane0, plane1, plane2;
    __device__ __forceinline__ void operator()(int x, int y, float out[3]) const {
        float bgr[3];
        yuv422_bgr(src + (size_t)y * step, x, y_offset, u_offset, v_offset, bgr);
        out[0] = bgr[plane0];
        out[1] = bgr[plane1];
        out[2] = bgr[plane2];
    }
};

// 4:2:2 YUV -> letterboxed, normalised CHW float32. plane<c>: BGR channel (0 = B, 1 = G, 2 = R) of tensor plane c.
extern "C" __global__ void letterbox_yuv422(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int y_offset, int u_offset,
    int v_offset, int plane0, int plane1, int plane2, float* __restrict__ dst, int dst_w, int dst_h, int pad_x,
    int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y, float pad_value, float mean0,
    float mean1, float mean2, float std0, float std1, float std2) {
    const Yuv422 pixel{src, src_step, y_offset, u_offset, v_offset, plane0, plane1, plane2};
    letterbox<float>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h, inv_scale_x,
                     inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}

// Same as letterbox_yuv422, writing IEEE half.
extern "C" __global__ void letterbox_yuv422_f16(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int y_offset, int u_offset,
    int v_offset, int plane0, int plane1, int plane2, unsigned short* __restrict__ dst, int dst_w, int dst_h,
    int pad_x, int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y, float pad_value,
    float mean0, float mean1, float mean2, float std0, float std1, float std2) {
    const Yuv422 pixel{src, src_step, y_offset, u_offset, v_offset, plane0, plane1, plane2};
    letterbox<unsigned short>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h,
                              inv_scale_x, inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}

// ---------------------------------------------------------------------------------------------------------------
// 8-bit Bayer mosaic (ROS bayer_rggb8 / bggr8 / gbrg8 / grbg8). Each bilinear tap is first demosaiced exactly as
// OpenCV cvtColor(COLOR_Bayer*2BGR) does (the CPU reference vrt_ros.intake.frames.to_bgr; OpenCV demosaicing.cpp,
// Bayer2RGB_): at a red or blue site the missing colours are the rounded means (sum + 2) >> 2 of the 4 diagonal and
// of the 4 edge neighbours; at a green site they are the rounded means (sum + 1) >> 1 of the 2 horizontal and of
// the 2 vertical neighbours (the colour of the horizontal pair is the one of the site's row). OpenCV computes the
// interior 1 <= x <= w-2, 1 <= y <= h-2 and copies the nearest interior pixel into the border rows and columns,
// which is reading the interior pixel at the clamped position; images narrower or lower than 3 pixels come out
// black. red_x, red_y: parity (0 or 1) of the column and row of the red sites.
__device__ __forceinline__ void bayer_bgr(const unsigned char* __restrict__ src, int src_w, int src_h, int src_step,
                                          int red_x, int red_y, int x, int y, float bgr[3]) {
    if (src_w < 3 || src_h < 3) {
        bgr[0] = bgr[1] = bgr[2] = 0.0f;
        return;
    }
    x = min(max(x, 1), src_w - 2);
    y = min(max(y, 1), src_h - 2);
    const unsigned char* up = src + (size_t)(y - 1) * src_step + x;
    const unsigned char* mid = up + src_step;
    const unsigned char* down = mid + src_step;
    const int c = __ldg(mid);
    const int left = __ldg(mid - 1), right = __ldg(mid + 1), top = __ldg(up), bottom = __ldg(down);
    const bool red_row = (y & 1) == red_y, red_col = (x & 1) == red_x;
    if (red_row == red_col) {  // red or blue site
        const int cross = (left + right + top + bottom + 2) >> 2;
        const int diag = (__ldg(up - 1) + __ldg(up + 1) + __ldg(down - 1) + __ldg(down + 1) + 2) >> 2;
        bgr[0] = (float)(red_row ? diag : c);
        bgr[1] = (float)cross;
        bgr[2] = (float)(red_row ? c : diag);
    } else {  // green site: the horizontal pair has the colour of this row
        const int horz = (left + right + 1) >> 1;
        const int vert = (top + bottom + 1) >> 1;
        bgr[0] = (float)(red_row ? vert : horz);
        bgr[1] = (float)c;
        bgr[2] = (float)(red_row ? horz : vert);
    }
}

// Bayer pixels: tensor plane c reads BGR channel plane<c> of the demosaiced pixel.
struct Bayer8 {
    const unsigned char* __restrict__ src;
    int width, height, step, red_x, red_y, plane0, plane1, plane2;
    __device__ __forceinline__ void operator()(int x, int y, float out[3]) const {
        float bgr[3];
        bayer_bgr(src, width, height, step, red_x, red_y, x, y, bgr);
        out[0] = bgr[plane0];
        out[1] = bgr[plane1];
        out[2] = bgr[plane2];
    }
};

// 8-bit Bayer -> demosaiced, letterboxed, normalised CHW float32. plane<c>: BGR channel of tensor plane c.
extern "C" __global__ void letterbox_bayer8(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int red_x, int red_y,
    int plane0, int plane1, int plane2, float* __restrict__ dst, int dst_w, int dst_h, int pad_x, int pad_y,
    int resized_w, int resized_h, double inv_scale_x, double inv_scale_y, float pad_value, float mean0, float mean1,
    float mean2, float std0, float std1, float std2) {
    const Bayer8 pixel{src, src_w, src_h, src_step, red_x, red_y, plane0, plane1, plane2};
    letterbox<float>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h, inv_scale_x,
                     inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}

// Same as letterbox_bayer8, writing IEEE half.
extern "C" __global__ void letterbox_bayer8_f16(
    const unsigned char* __restrict__ src, int src_w, int src_h, int src_step, int red_x, int red_y,
    int plane0, int plane1, int plane2, unsigned short* __restrict__ dst, int dst_w, int dst_h, int pad_x,
    int pad_y, int resized_w, int resized_h, double inv_scale_x, double inv_scale_y, float pad_value, float mean0,
    float mean1, float mean2, float std0, float std1, float std2) {
    const Bayer8 pixel{src, src_w, src_h, src_step, red_x, red_y, plane0, plane1, plane2};
    letterbox<unsigned short>(pixel, src_w, src_h, dst, dst_w, dst_h, pad_x, pad_y, resized_w, resized_h,
                              inv_scale_x, inv_scale_y, pad_value, mean0, mean1, mean2, std0, std1, std2);
}
