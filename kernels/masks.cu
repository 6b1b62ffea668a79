// Instance-mask assembly for segmentation heads, inside the frame's one sync (vrt_ros/boxes/masks.py is the reference and
// lists the order of operations). Reads the frame's final detections from the finalize_extras result (count at
// result[0]; rows x1, y1, x2, y2 in source pixels, score, class, theta, then the mask coefficients at
// `coef_offset`), so only kept detections are assembled.
//   mask_logits : logits[d] = coefficients[d] . prototypes, at prototype resolution (no sigmoid), d < max_masks
//   mask_labels : one thread per source pixel: the first (highest-scored) detection whose box holds the pixel
//                 index (x1 <= x < x2, Ultralytics' crop_mask) and whose bilinearly sampled logit
//                 > threshold_logit labels it d + 1; 0 = background
// Batches: launched once per slot with the slot's result region, prototypes and label image, as finalize.

#define RESULT_HEADER 4

__device__ __forceinline__ int detections(const float* __restrict__ result, int max_masks) {
    const int n = ((const int*)result)[0];
    return n < max_masks ? n : max_masks;
}

// Grid (ceil(proto_w * proto_h / block), max_masks): x = prototype pixel, y = detection.
extern "C" __global__ void mask_logits(const float* __restrict__ result, int out_stride, int coef_offset,
                                       int num_masks, const float* __restrict__ protos, int proto_w, int proto_h,
                                       int max_masks, float* __restrict__ logits) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const int d = blockIdx.y;
    const int plane = proto_w * proto_h;
    if (p >= plane || d >= detections(result, max_masks)) return;
    const float* coef = result + RESULT_HEADER + (size_t)d * out_stride + coef_offset;
    float acc = 0.0f;
    for (int k = 0; k < num_masks; ++k) acc += __ldg(coef + k) * __ldg(protos + (size_t)k * plane + p);
    logits[(size_t)d * plane + p] = acc;
}

// Sample position along one axis: source pixel i -> engine input (i + 0.5) * scale + pad -> prototype
// position * proto_per_input - 0.5, clamped as kernels/preprocess.cu's tap.
__device__ __forceinline__ int mask_tap(int i, float scale, float pad, float proto_per_input, int size, int* i1,
                                        float* frac) {
    float s = (((float)i + 0.5f) * scale + pad) * proto_per_input - 0.5f;
    if (s < 0.0f) s = 0.0f;
    int i0 = (int)floorf(s);
    if (i0 > size - 1) i0 = size - 1;
    *i1 = i0 + 1 < size ? i0 + 1 : size - 1;
    *frac = *i1 == i0 ? 0.0f : s - (float)i0;
    return i0;
}

// 2-D grid over the source image. label_bytes 1 (mono8) or 2 (mono16, little-endian); max_labels = 255 or 65535.
extern "C" __global__ void mask_labels(const float* __restrict__ result, int out_stride,
                                       const float* __restrict__ logits, int proto_w, int proto_h, int max_masks,
                                       float pad_x, float pad_y, float scale_x, float scale_y, int input_w,
                                       int input_h, int src_w, int src_h, float threshold_logit, int label_bytes,
                                       int max_labels, unsigned char* __restrict__ labels) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= src_w || y >= src_h) return;
    int n = detections(result, max_masks);
    if (n > max_labels) n = max_labels;
    const float px = (float)x, py = (float)y;  // crop by pixel index, as Ultralytics' crop_mask (vrt_ros/boxes/masks.py)
    int x1i, y1i;
    float fx, fy;
    const int x0i = mask_tap(x, scale_x, pad_x, (float)proto_w / (float)input_w, proto_w, &x1i, &fx);
    const int y0i = mask_tap(y, scale_y, pad_y, (float)proto_h / (float)input_h, proto_h, &y1i, &fy);
    const size_t plane = (size_t)proto_w * proto_h;
    int label = 0;
    for (int d = 0; d < n; ++d) {
        const float* r = result + RESULT_HEADER + (size_t)d * out_stride;
        if (!(px >= r[0] && px < r[2] && py >= r[1] && py < r[3])) continue;
        const float* l = logits + (size_t)d * plane;
        const float top = l[(size_t)y0i * proto_w + x0i] * (1.0f - fx) + l[(size_t)y0i * proto_w + x1i] * fx;
        const float bottom = l[(size_t)y1i * proto_w + x0i] * (1.0f - fx) + l[(size_t)y1i * proto_w + x1i] * fx;
        if (top * (1.0f - fy) + bottom * fy > threshold_logit) { label = d + 1; break; }
    }
    const size_t o = (size_t)y * src_w + x;
    if (label_bytes == 1) {
        labels[o] = (unsigned char)label;
    } else {
        labels[2 * o] = (unsigned char)(label & 0xff);
        labels[2 * o + 1] = (unsigned char)(label >> 8);
    }
}
