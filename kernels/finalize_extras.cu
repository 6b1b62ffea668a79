// Finalize for heads whose candidates carry extras (vrt_ros/boxes/postprocess.py is the reference; kernels/postprocess.cu
// `finalize` serves the others): one block maps the kept candidates to source pixels in score order, keeps the
// first max_detections and copies each one's `num_extras` values (at CAND_HEADER of the candidate row) after it.
//   oriented = 0 (yolov8_seg): boxes clipped to [0, src_w] x [0, src_h], empty ones dropped; theta = 0.
//   oriented = 1 (yolov8_obb): the box (own axes) is mapped, not clipped, put in the long-side form
//     (w >= h, theta in [-pi/2, pi/2): vrt_ros/boxes/rotated.py::canonical), dropped when its centre is outside
//     the image; extras[0] is the model's angle.
// result[0] (int) = detections, result[1] (int) = candidates found; rows from result + RESULT_HEADER floats:
// x1, y1, x2, y2, score, class, theta, num_extras values (out_stride = 7 + num_extras).
// Batches: launched once per slot with the slot's result region, as finalize. Dynamic shared memory: blockDim.x ints.

#define CAND_HEADER 8
#define RESULT_HEADER 4

__device__ __forceinline__ float wrap_half_turn(float t) {  // into [-pi/2, pi/2)
    const float pi = 3.14159265358979f;
    t = fmodf(t + 0.5f * pi, pi);
    if (t < 0.0f) t += pi;
    t -= 0.5f * pi;
    return t >= 0.5f * pi ? -0.5f * pi : t;
}

extern "C" __global__ void finalize_extras(const float* __restrict__ cand, int cand_stride,
                                           const int* __restrict__ order, const int* __restrict__ kept,
                                           const int* __restrict__ kept_count, const int* __restrict__ count,
                                           int num_extras, int oriented, float pad_x, float pad_y, float scale_x,
                                           float scale_y, float src_w, float src_h, int max_detections,
                                           float* __restrict__ result) {
    extern __shared__ int valid[];
    const int n = *kept_count;
    const int out_stride = 7 + num_extras;
    float* rows = result + RESULT_HEADER;
    int written = 0;  // same value in every thread
    for (int base = 0; base < n && written < max_detections; base += blockDim.x) {
        const int k = base + threadIdx.x;
        float b[4], theta = 0.0f;
        int ok = 0;
        const float* c = nullptr;
        if (k < n) {
            c = cand + (size_t)order[kept[k]] * cand_stride;
            b[0] = (c[0] - pad_x) / scale_x;
            b[1] = (c[1] - pad_y) / scale_y;
            b[2] = (c[2] - pad_x) / scale_x;
            b[3] = (c[3] - pad_y) / scale_y;
            if (oriented) {
                const float cx = (b[0] + b[2]) * 0.5f, cy = (b[1] + b[3]) * 0.5f;
                float w = b[2] - b[0], h = b[3] - b[1];
                theta = c[CAND_HEADER];
                if (w < h) { const float t = w; w = h; h = t; theta += 1.57079632679490f; }
                theta = wrap_half_turn(theta);
                b[0] = cx - w * 0.5f; b[1] = cy - h * 0.5f; b[2] = cx + w * 0.5f; b[3] = cy + h * 0.5f;
                ok = cx >= 0.0f && cx <= src_w && cy >= 0.0f && cy <= src_h && b[2] > b[0] && b[3] > b[1];
            } else {
                b[0] = fminf(fmaxf(b[0], 0.0f), src_w);
                b[1] = fminf(fmaxf(b[1], 0.0f), src_h);
                b[2] = fminf(fmaxf(b[2], 0.0f), src_w);
                b[3] = fminf(fmaxf(b[3], 0.0f), src_h);
                ok = b[2] > b[0] && b[3] > b[1];
            }
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
            o[6] = theta;
            for (int j = 0; j < num_extras; ++j) o[7 + j] = c[CAND_HEADER + j];
        }
        written = min(written + total, max_detections);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        ((int*)result)[0] = written;
        ((int*)result)[1] = *count;
    }
}
