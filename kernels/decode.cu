// Per-head decode: raw engine outputs -> candidates above the score threshold, compacted with an atomic counter
// into a fixed-capacity buffer. Layouts are those of vrt_ros/heads/*.py (the numpy references); every size,
// stride, channel count and threshold is an argument.
//
// Candidate row (float, `cand_stride` = CAND_HEADER + 3 * K values):
//   x1, y1, x2, y2 (engine-input pixels), score, class id, key (source order for score ties), unused,
//   then K keypoints as x, y, confidence.
// Rows that are not finite or have width/height <= 0 are dropped here (vrt_ros/boxes/postprocess.py step 1).
// count[0] counts every candidate found, also those beyond `capacity` (which are not stored).

#define CAND_HEADER 8

__device__ __forceinline__ bool finite_box(float x1, float y1, float x2, float y2, float score) {
    return isfinite(x1) && isfinite(y1) && isfinite(x2) && isfinite(y2) && isfinite(score) && x2 > x1 && y2 > y1;
}

// Reserve a candidate slot; returns the row pointer or nullptr when the buffer is full.
__device__ __forceinline__ float* reserve(float* __restrict__ cand, int cand_stride, int capacity,
                                          int* __restrict__ count) {
    const int slot = atomicAdd(count, 1);
    return slot < capacity ? cand + (size_t)slot * cand_stride : nullptr;
}

__device__ __forceinline__ void write_head(float* row, float x1, float y1, float x2, float y2, float score, int cls,
                                           int key) {
    row[0] = x1; row[1] = y1; row[2] = x2; row[3] = y2;
    row[4] = score; row[5] = (float)cls; row[6] = (float)key; row[7] = 0.0f;
}

// YOLOX [1, N, 5 + nc]: dx, dy, log_w, log_h, objectness, nc class scores; grid[i] = (gx, gy, stride).
extern "C" __global__ void decode_yolox(const float* __restrict__ out, int cells, int num_classes,
                                        const float* __restrict__ grid, float threshold,
                                        float* __restrict__ cand, int cand_stride, int capacity,
                                        int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cells) return;
    const int row_len = 5 + num_classes;
    const float* r = out + (size_t)i * row_len;
    const float obj = __ldg(r + 4);
    if (!(obj >= threshold)) return;  // score = obj * cls <= obj: exact pre-filter (NaN fails too)
    int best = 0;
    float best_score = __ldg(r + 5);
    if (isnan(best_score)) return;  // a NaN class score drops the cell, as the numpy argmax/max reference does
    for (int c = 1; c < num_classes; ++c) {
        const float s = __ldg(r + 5 + c);
        if (isnan(s)) return;
        if (s > best_score) { best_score = s; best = c; }  // first maximum, as numpy argmax
    }
    const float score = obj * best_score;
    if (!(score >= threshold)) return;
    const float gx = __ldg(grid + 3 * i), gy = __ldg(grid + 3 * i + 1), s = __ldg(grid + 3 * i + 2);
    const float cx = (__ldg(r) + gx) * s, cy = (__ldg(r + 1) + gy) * s;
    const float hw = expf(__ldg(r + 2)) * s * 0.5f, hh = expf(__ldg(r + 3)) * s * 0.5f;
    const float x1 = cx - hw, y1 = cy - hh, x2 = cx + hw, y2 = cy + hh;
    if (!finite_box(x1, y1, x2, y2, score)) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (row) write_head(row, x1, y1, x2, y2, score, best, i);
}

// YOLOv8 / YOLO11 detect [1, 4 + nc, N] (channels first): cx, cy, w, h, nc class scores; score = max class.
extern "C" __global__ void decode_yolov8(const float* __restrict__ out, int cells, int num_classes, float threshold,
                                         float* __restrict__ cand, int cand_stride, int capacity,
                                         int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cells) return;
    int best = 0;
    float best_score = __ldg(out + (size_t)4 * cells + i);
    if (isnan(best_score)) return;  // a NaN class score drops the cell, as numpy's max (NaN propagates) does
    for (int c = 1; c < num_classes; ++c) {
        const float s = __ldg(out + (size_t)(4 + c) * cells + i);
        if (isnan(s)) return;
        if (s > best_score) { best_score = s; best = c; }
    }
    if (!(best_score >= threshold)) return;
    const float cx = __ldg(out + i), cy = __ldg(out + cells + i);
    const float hw = __ldg(out + 2 * (size_t)cells + i) * 0.5f, hh = __ldg(out + 3 * (size_t)cells + i) * 0.5f;
    const float x1 = cx - hw, y1 = cy - hh, x2 = cx + hw, y2 = cy + hh;
    if (!finite_box(x1, y1, x2, y2, best_score)) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (row) write_head(row, x1, y1, x2, y2, best_score, best, i);
}

// YOLOv8 pose [1, 4 + nc + 3K, N] (channels first): cx, cy, w, h, nc class scores (1: the person score),
// K x (x, y, confidence); score = max class score (a NaN drops the cell), class = its first argmax.
extern "C" __global__ void decode_yolov8_pose(const float* __restrict__ out, int cells, int num_classes,
                                              int num_keypoints, float threshold, float* __restrict__ cand,
                                              int cand_stride, int capacity, int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cells) return;
    int best = 0;
    float score = __ldg(out + (size_t)4 * cells + i);
    if (isnan(score)) return;
    for (int c = 1; c < num_classes; ++c) {
        const float s = __ldg(out + (size_t)(4 + c) * cells + i);
        if (isnan(s)) return;
        if (s > score) { score = s; best = c; }
    }
    if (!(score >= threshold)) return;
    const float cx = __ldg(out + i), cy = __ldg(out + cells + i);
    const float hw = __ldg(out + 2 * (size_t)cells + i) * 0.5f, hh = __ldg(out + 3 * (size_t)cells + i) * 0.5f;
    const float x1 = cx - hw, y1 = cy - hh, x2 = cx + hw, y2 = cy + hh;
    if (!finite_box(x1, y1, x2, y2, score)) return;
    const float* kp = out + (size_t)(4 + num_classes) * cells + i;
    for (int k = 0; k < 3 * num_keypoints; ++k)
        if (!isfinite(__ldg(kp + (size_t)k * cells))) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (!row) return;
    write_head(row, x1, y1, x2, y2, score, best, i);
    for (int k = 0; k < 3 * num_keypoints; ++k) row[CAND_HEADER + k] = __ldg(kp + (size_t)k * cells);
}

// End-to-end [1, M, row_len]: x1, y1, x2, y2, score, class (as float). A class that is not a finite
// non-negative number drops the row (the reference marks it NaN and finish() drops it).
// One end-to-end row r (x1, y1, x2, y2 or, with `centre`, cx, cy, w, h, times (sx, sy, sx, sy); score; class; `tail`
// more values): the candidate header and the `tail` values after it (keypoints or extras), or nothing when the row
// is not a candidate (score below the threshold, class not a finite non-negative number, box or a tail value not
// finite).
__device__ __forceinline__ void end2end_row(const float* __restrict__ r, int i, bool centre, int tail,
                                            float threshold, float* __restrict__ cand, int cand_stride,
                                            int capacity, int* __restrict__ count, float sx = 1.0f,
                                            float sy = 1.0f) {
    const float score = __ldg(r + 4);
    if (!(score >= threshold)) return;
    const float cls = __ldg(r + 5);
    if (!(isfinite(cls) && cls >= 0.0f && cls < 2147483647.0f)) return;
    float x1 = __ldg(r) * sx, y1 = __ldg(r + 1) * sy, x2 = __ldg(r + 2) * sx, y2 = __ldg(r + 3) * sy;
    if (centre) {
        const float cx = x1, cy = y1, hw = x2 * 0.5f, hh = y2 * 0.5f;
        x1 = cx - hw; y1 = cy - hh; x2 = cx + hw; y2 = cy + hh;
    }
    if (!finite_box(x1, y1, x2, y2, score)) return;
    for (int k = 0; k < tail; ++k)
        if (!isfinite(__ldg(r + 6 + k))) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (!row) return;
    write_head(row, x1, y1, x2, y2, score, (int)rintf(cls), i);
    for (int k = 0; k < tail; ++k) row[CAND_HEADER + k] = __ldg(r + 6 + k);
}

extern "C" __global__ void decode_end2end(const float* __restrict__ out, int rows, int row_len, float threshold,
                                          float* __restrict__ cand, int cand_stride, int capacity,
                                          int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) end2end_row(out + (size_t)i * row_len, i, false, 0, threshold, cand, cand_stride, capacity, count);
}

// YOLO26 end-to-end pose [1, M, 6 + 3K] (vrt_ros/heads/end2end_pose.py): the row, then K x (x, y, visibility).
extern "C" __global__ void decode_end2end_pose(const float* __restrict__ out, int rows, int num_keypoints,
                                               float threshold, float* __restrict__ cand, int cand_stride,
                                               int capacity, int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int row_len = 6 + 3 * num_keypoints;
    if (i < rows)
        end2end_row(out + (size_t)i * row_len, i, false, 3 * num_keypoints, threshold, cand, cand_stride, capacity,
                    count);
}

// YOLO26 end-to-end seg [1, M, 6 + P] (vrt_ros/heads/end2end_seg.py): the row, then P mask coefficients (extras).
extern "C" __global__ void decode_end2end_seg(const float* __restrict__ out, int rows, int num_masks, float threshold,
                                              float* __restrict__ cand, int cand_stride, int capacity,
                                              int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows)
        end2end_row(out + (size_t)i * (6 + num_masks), i, false, num_masks, threshold, cand, cand_stride, capacity,
                    count);
}

// Ultralytics 8.4 RT-DETR [1, K, 6] (vrt_ros/heads/detr_topk.py): normalised cx, cy, w, h, score, class.
extern "C" __global__ void decode_detr_topk(const float* __restrict__ out, int rows, float input_w, float input_h,
                                            float threshold, float* __restrict__ cand, int cand_stride, int capacity,
                                            int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows)
        end2end_row(out + (size_t)i * 6, i, true, 0, threshold, cand, cand_stride, capacity, count, input_w, input_h);
}

// YOLO26 end-to-end OBB [1, M, 7] (vrt_ros/heads/end2end_obb.py): cx, cy, w, h (own axes), score, class, angle
// (radians, any range; the one extra).
extern "C" __global__ void decode_end2end_obb(const float* __restrict__ out, int rows, float threshold,
                                              float* __restrict__ cand, int cand_stride, int capacity,
                                              int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) end2end_row(out + (size_t)i * 7, i, true, 1, threshold, cand, cand_stride, capacity, count);
}

// CenterFace at stride `stride` on a (h, w) grid: heat [h*w], scale [2][h*w] (log h, log w), offset [2][h*w]
// (y, x), landmarks [2K][h*w] (y, x per landmark). A face is a cell >= threshold that is the maximum of its 3x3
// neighbourhood (NaN neighbours ignored, as numpy fmax). Landmark confidence = the face score.
extern "C" __global__ void decode_centerface(const float* __restrict__ heat, const float* __restrict__ scale,
                                             const float* __restrict__ offset, const float* __restrict__ landmarks,
                                             int w, int h, float stride, int num_keypoints, float threshold,
                                             float* __restrict__ cand, int cand_stride, int capacity,
                                             int* __restrict__ count) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const size_t plane = (size_t)w * h;
    const size_t i = (size_t)y * w + x;
    const float score = __ldg(heat + i);
    if (!(score >= threshold)) return;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            const int yy = y + dy, xx = x + dx;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            const float n = __ldg(heat + (size_t)yy * w + xx);
            if (n > score) return;  // not a peak (NaN neighbour: comparison false, ignored)
        }
    }
    const float bh = expf(__ldg(scale + i)) * stride, bw = expf(__ldg(scale + plane + i)) * stride;
    const float x1 = ((float)x + __ldg(offset + plane + i) + 0.5f) * stride - bw * 0.5f;
    const float y1 = ((float)y + __ldg(offset + i) + 0.5f) * stride - bh * 0.5f;
    const float x2 = x1 + bw, y2 = y1 + bh;
    if (!finite_box(x1, y1, x2, y2, score)) return;
    for (int k = 0; k < 2 * num_keypoints; ++k)
        if (!isfinite(__ldg(landmarks + (size_t)k * plane + i))) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (!row) return;
    write_head(row, x1, y1, x2, y2, score, 0, (int)i);
    for (int k = 0; k < num_keypoints; ++k) {
        row[CAND_HEADER + 3 * k] = __ldg(landmarks + (size_t)(2 * k + 1) * plane + i) * bw + x1;
        row[CAND_HEADER + 3 * k + 1] = __ldg(landmarks + (size_t)(2 * k) * plane + i) * bh + y1;
        row[CAND_HEADER + 3 * k + 2] = score;
    }
}

// ---- Heads with per-candidate extras (vrt_ros/heads/yolov8_seg.py, yolov8_obb.py): the E extras follow the header
// (at CAND_HEADER, these heads have no keypoints) and travel through rank/NMS to finalize_extras
// (kernels/finalize_extras.cu). A non-finite extra drops the row, as vrt_ros/boxes/postprocess.py step 1.

// Best class of channels-first scores at rows [first, first + num_classes) of `out` (N = cells columns); false on NaN.
__device__ __forceinline__ bool best_class(const float* __restrict__ out, int cells, int i, int first, int num_classes,
                                           int* best, float* best_score) {
    *best = 0;
    *best_score = __ldg(out + (size_t)first * cells + i);
    if (isnan(*best_score)) return false;
    for (int c = 1; c < num_classes; ++c) {
        const float s = __ldg(out + (size_t)(first + c) * cells + i);
        if (isnan(s)) return false;
        if (s > *best_score) { *best_score = s; *best = c; }
    }
    return true;
}

// Box and best class of channels-first anchor i (cx, cy, w, h, then class scores); false when the anchor is not a
// candidate (NaN class score, best score below the threshold, box not finite or empty).
__device__ __forceinline__ bool channels_first_box(const float* __restrict__ out, int cells, int i, int num_classes,
                                                   float threshold, int* best, float* score, float b[4]) {
    if (!best_class(out, cells, i, 4, num_classes, best, score) || !(*score >= threshold)) return false;
    const float cx = __ldg(out + i), cy = __ldg(out + cells + i);
    const float hw = __ldg(out + 2 * (size_t)cells + i) * 0.5f, hh = __ldg(out + 3 * (size_t)cells + i) * 0.5f;
    b[0] = cx - hw; b[1] = cy - hh; b[2] = cx + hw; b[3] = cy + hh;
    return finite_box(b[0], b[1], b[2], b[3], *score);
}

// YOLOv8 / YOLO11 -seg [1, 4 + nc + num_masks, N]: detect channels, then num_masks mask coefficients (extras).
extern "C" __global__ void decode_yolov8_seg(const float* __restrict__ out, int cells, int num_classes, int num_masks,
                                             float threshold, float* __restrict__ cand, int cand_stride,
                                             int capacity, int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    int best;
    float score, b[4];
    if (i >= cells || !channels_first_box(out, cells, i, num_classes, threshold, &best, &score, b)) return;
    const float* coef = out + (size_t)(4 + num_classes) * cells + i;
    for (int k = 0; k < num_masks; ++k)
        if (!isfinite(__ldg(coef + (size_t)k * cells))) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (!row) return;
    write_head(row, b[0], b[1], b[2], b[3], score, best, i);
    for (int k = 0; k < num_masks; ++k) row[CAND_HEADER + k] = __ldg(coef + (size_t)k * cells);
}

// YOLOv8 / YOLO11 -obb [1, 4 + nc + 1, N]: cx, cy, w, h (the box in its own axes), nc scores, angle (radians).
// The row holds the own-axis box x1..y2 and the angle as its one extra.
extern "C" __global__ void decode_yolov8_obb(const float* __restrict__ out, int cells, int num_classes,
                                             float threshold, float* __restrict__ cand, int cand_stride,
                                             int capacity, int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    int best;
    float score, b[4];
    if (i >= cells || !channels_first_box(out, cells, i, num_classes, threshold, &best, &score, b)) return;
    const float angle = __ldg(out + (size_t)(4 + num_classes) * cells + i);
    if (!isfinite(angle)) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (!row) return;
    write_head(row, b[0], b[1], b[2], b[3], score, best, i);
    row[CAND_HEADER] = angle;
}

// DETR family (vrt_ros/heads/detr.py): boxes [Q, box_stride] normalised cx, cy, w, h; class values [Q, logit_stride]
// from column logit_offset (the logits output, or Ultralytics' [Q, 4 + C] row after its box). One thread per
// (query, class) pair, t = q * num_classes + c (the reference's candidate order, so `key` = t ranks ties the same).
// activation 0 = none, 1 = sigmoid (every pair a candidate), 2 = softmax over the values, the last class dropped
// (num_classes counts the kept ones). For none and softmax only the query's best class is a candidate (thread c == 0).
extern "C" __global__ void decode_detr(const float* __restrict__ boxes, const float* __restrict__ logits, int queries,
                                       int num_classes, int box_stride, int logit_stride, int logit_offset,
                                       int activation, float input_w, float input_h, float threshold,
                                       float* __restrict__ cand, int cand_stride, int capacity,
                                       int* __restrict__ count) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)queries * num_classes) return;
    const int q = (int)(t / num_classes), c = (int)(t % num_classes);
    const float* v = logits + (size_t)q * logit_stride + logit_offset;
    int cls = c;
    float score;
    if (activation == 1) {
        score = 1.0f / (1.0f + expf(-__ldg(v + c)));
    } else {
        if (c != 0) return;
        const int n = activation == 2 ? num_classes + 1 : num_classes;
        float top = __ldg(v);
        for (int k = 1; k < n; ++k) top = fmaxf(top, __ldg(v + k));
        float sum = 0.0f;
        if (activation == 2)
            for (int k = 0; k < n; ++k) sum += expf(__ldg(v + k) - top);
        cls = 0;
        score = activation == 2 ? expf(__ldg(v) - top) / sum : __ldg(v);
        for (int k = 1; k < num_classes; ++k) {
            const float s = activation == 2 ? expf(__ldg(v + k) - top) / sum : __ldg(v + k);
            if (s > score) { score = s; cls = k; }
        }
    }
    if (!(score >= threshold)) return;
    const float* b = boxes + (size_t)q * box_stride;
    const float cx = __ldg(b) * input_w, cy = __ldg(b + 1) * input_h;
    const float hw = __ldg(b + 2) * input_w * 0.5f, hh = __ldg(b + 3) * input_h * 0.5f;
    const float x1 = cx - hw, y1 = cy - hh, x2 = cx + hw, y2 = cy + hh;
    if (!finite_box(x1, y1, x2, y2, score)) return;
    float* row = reserve(cand, cand_stride, capacity, count);
    if (row) write_head(row, x1, y1, x2, y2, score, cls, (int)t);
}
