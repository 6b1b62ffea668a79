"""Summarise what `record` wrote (JSON lines) for the new-user trial (results/newuser/account.md).

Reads a .jsonl of <cam>/detections (vision_msgs/Detection2DArray) and <cam>/detections_3d
(vision_msgs/Detection3DArray) and prints, per camera: frames, detections, how the track ids persist across frames
(ids, frames per id, first/last frame, re-used ids), and for 3D: how many detections got a position, the range of
z, and how far each 3D centre and size are from the back-projection of its 2D box (centre, width and height)
through a pinhole K given on the command line (`--k cam=fx,fy,cx,cy`) at the 3D entry's own z (metres; about 0
when the node follows docs/depth.md's conventions).
Usage: python summarize.py OUT.jsonl [--k front=600,600,384,288] [--json summary.json]
"""
import argparse
import collections
import json
import math
import sys


def _stamp(h):
    return h["stamp"]["sec"] + h["stamp"]["nanosec"] * 1e-9


def summarize(path, ks):
    frames2d = collections.defaultdict(list)   # cam -> [(stamp, [(id, cls, cx, cy, w, h, score)])]
    frames3d = collections.defaultdict(dict)   # cam -> stamp -> [(id, cls, x, y, z, sx, sy, sz)]
    for line in open(path):
        rec = json.loads(line)
        cam = rec["topic"].strip("/").split("/")[0]
        msg = rec["msg"]
        t = _stamp(msg["header"])
        if rec["topic"].endswith("/detections"):
            dets = []
            for d in msg["detections"]:
                b = d["bbox"]
                hyp = d["results"][0]["hypothesis"]
                dets.append((d["id"], hyp["class_id"], b["center"]["position"]["x"], b["center"]["position"]["y"],
                             b["size_x"], b["size_y"], hyp["score"]))
            frames2d[cam].append((t, dets))
        elif rec["topic"].endswith("/detections_3d"):
            dets = []
            for d in msg["detections"]:
                c = d["bbox"]["center"]["position"]
                s = d["bbox"]["size"]
                dets.append((d["id"], d["results"][0]["hypothesis"]["class_id"], c["x"], c["y"], c["z"],
                             s["x"], s["y"], s["z"]))
            frames3d[cam][t] = (msg["header"]["frame_id"], dets)
    out = {}
    for cam in sorted(set(frames2d) | set(frames3d)):
        f2 = sorted(frames2d[cam])
        stamps = [t for t, _ in f2]
        ids = collections.defaultdict(list)
        n_det = n_id = 0
        for i, (t, dets) in enumerate(f2):
            for d in dets:
                n_det += 1
                if d[0]:
                    n_id += 1
                    ids[d[0]].append(i)
        dup_in_frame = sum(1 for _, dets in f2 for k, v in collections.Counter(d[0] for d in dets if d[0]).items()
                           if v > 1)
        spans = sorted((len(v) for v in ids.values()), reverse=True)
        cls_of_id = collections.defaultdict(set)
        for _, dets in f2:
            for d in dets:
                if d[0]:
                    cls_of_id[d[0]].add(d[1])
        cam_out = {
            "frames_2d": len(f2), "stamps_monotonic": stamps == sorted(stamps) and len(set(stamps)) == len(stamps),
            "detections": n_det, "with_track_id": n_id, "track_ids": len(ids),
            "frames_per_id_desc": spans, "ids_in_half_the_frames_or_more": sum(1 for s in spans if s >= len(f2) / 2),
            "id_twice_in_one_frame": dup_in_frame,
            "ids_changing_class": sum(1 for v in cls_of_id.values() if len(v) > 1),
            "ids_are_19_digit_ints": all(i.isdigit() and len(i) == 19 for i in ids),
        }
        f3 = frames3d.get(cam, {})
        if f3:
            zs, errs, size_errs, size_z, frame_ids = [], [], [], [], set()
            matched = unmatched = 0
            byt = dict(f2)
            for t, (fid, dets3) in f3.items():
                frame_ids.add(fid)
                d2 = byt.get(t, [])
                for d in dets3:
                    zs.append(d[4])
                    # the 2D detection with the same id (track id) and class; ids are "" before confirmation,
                    # so match on class + nearest back-projection instead when the id is empty
                    cands = [e for e in d2 if e[1] == d[1] and (e[0] == d[0] or not d[0])]
                    if cam in ks and cands:
                        fx, fy, cx, cy = ks[cam]
                        # docs/depth.md: box coordinates are continuous (pixel i covers [i, i + 1)), K's are
                        # OpenCV's (pixel centres at integers): the ray goes through (u - 0.5, v - 0.5)
                        best = min(cands, key=lambda e: math.hypot(d[4] * (e[2] - 0.5 - cx) / fx - d[2],
                                                                   d[4] * (e[3] - 0.5 - cy) / fy - d[3]))
                        errs.append(math.hypot(d[4] * (best[2] - 0.5 - cx) / fx - d[2],
                                               d[4] * (best[3] - 0.5 - cy) / fy - d[3]))
                        size_errs.append(max(abs(best[4] * d[4] / fx - d[5]), abs(best[5] * d[4] / fy - d[6])))
                        size_z.append(d[7])
                        matched += 1
                    else:
                        unmatched += 1
            cam_out.update({
                "frames_3d": len(f3), "detections_3d": len(zs), "frame_ids_3d": sorted(frame_ids),
                "z_min_m": round(min(zs), 3) if zs else None, "z_max_m": round(max(zs), 3) if zs else None,
                "backprojection_err_max_m": round(max(errs), 4) if errs else None,
                "size_xy_err_max_m": round(max(size_errs), 4) if size_errs else None,
                "size_z_max_m": round(max(size_z), 4) if size_z else None,
                "detections_3d_matched_to_2d": matched, "unmatched": unmatched,
                "detections_2d_in_frames_with_3d": sum(len(byt.get(t, [])) for t in f3),
            })
        out[cam] = cam_out
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("--k", action="append", default=[], help="cam=fx,fy,cx,cy (pixels) of the camera_info sent")
    ap.add_argument("--json", help="also write the summary here")
    a = ap.parse_args(argv)
    ks = {}
    for s in a.k:
        cam, vals = s.split("=")
        ks[cam] = tuple(float(v) for v in vals.split(","))
    out = summarize(a.jsonl, ks)
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
