"""Make a two-camera RGB-D trial bag from the shared colour-only bags (the new-user trial, results/newuser/account.md).

The docs give no way to feed depth + camera_info to the node without an RGB-D camera, so this writes one rosbag2
(mcap) with, for camera `front`, the JPEGs of vtest_compressed_mcap on /front/image_raw/compressed and, for camera
`rear`, the raw bgr8 frames of vtest_raw_sqlite3 on /rear/image_raw; for each colour frame a synthetic registered
depth image (/<cam>/depth/image_raw: front 16UC1 mm, rear 32FC1 m; a flat wall at a known distance with a band of
invalid 0 / NaN pixels) and a camera_info (/<cam>/camera_info: pinhole K, plumb_bob D = 0), both with the colour
frame's header and written 1 ms before it in the bag so they reach the node first.
Usage: python make_rgbd_bag.py SHARED_DIR OUT_BAG_DIR
"""
import sys
from pathlib import Path

import cv2
import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TS = get_typestore(Stores.ROS2_JAZZY)
Header = TS.types["std_msgs/msg/Header"]
Image = TS.types["sensor_msgs/msg/Image"]
CameraInfo = TS.types["sensor_msgs/msg/CameraInfo"]
RegionOfInterest = TS.types["sensor_msgs/msg/RegionOfInterest"]

WALL_M = {"front": 8.0, "rear": 5.0}     # the synthetic wall's distance per camera, metres
F_OVER_W = 0.8                           # fx = fy = 0.8 * width (a ~64 degree horizontal field of view)


def k_of(w, h):
    f = F_OVER_W * w
    return f, f, w / 2.0, h / 2.0


def depth_msg(header, w, h, cam):
    z = WALL_M[cam]
    if cam == "front":                                     # 16UC1, millimetres, 0 = no reading
        a = np.full((h, w), int(round(z * 1000)), np.uint16)
        a[h // 3: h // 3 + 6, :] = 0
        enc, step, data = "16UC1", w * 2, a.tobytes()
    else:                                                  # 32FC1, metres, NaN = no reading
        a = np.full((h, w), z, np.float32)
        a[h // 3: h // 3 + 6, :] = np.nan
        enc, step, data = "32FC1", w * 4, a.tobytes()
    return Image(header=header, height=h, width=w, encoding=enc, is_bigendian=0, step=step,
                 data=np.frombuffer(data, np.uint8))


def info_msg(header, w, h):
    fx, fy, cx, cy = k_of(w, h)
    k = np.array([fx, 0, cx, 0, fy, cy, 0, 0, 1], np.float64)
    p = np.array([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1, 0], np.float64)
    return CameraInfo(header=header, height=h, width=w, distortion_model="plumb_bob", d=np.zeros(5), k=k,
                      r=np.eye(3).ravel(), p=p, binning_x=0, binning_y=0,
                      roi=RegionOfInterest(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))


def main(shared, out):
    src = {"front": (Path(shared) / "data/bags/vtest_compressed_mcap", "/camera/image_raw/compressed",
                     "/front/image_raw/compressed"),
           "rear": (Path(shared) / "data/bags/vtest_raw_sqlite3", "/camera/image_raw", "/rear/image_raw")}
    with Writer(out, version=8, storage_plugin=StoragePlugin.MCAP) as wr:
        conns = {}
        for cam, (_, _, topic) in src.items():
            typ = "sensor_msgs/msg/CompressedImage" if topic.endswith("compressed") else "sensor_msgs/msg/Image"
            conns[topic] = wr.add_connection(topic, typ, typestore=TS)
            conns[f"/{cam}/depth/image_raw"] = wr.add_connection(f"/{cam}/depth/image_raw", "sensor_msgs/msg/Image",
                                                                 typestore=TS)
            conns[f"/{cam}/camera_info"] = wr.add_connection(f"/{cam}/camera_info", "sensor_msgs/msg/CameraInfo",
                                                             typestore=TS)
        items = []
        for cam, (bag, topic_in, topic_out) in src.items():
            with Reader(bag) as rd:
                for conn, t, raw in rd.messages([c for c in rd.connections if c.topic == topic_in]):
                    msg = TS.deserialize_cdr(raw, conn.msgtype)
                    if topic_out.endswith("compressed"):
                        h, w = cv2.imdecode(np.asarray(msg.data), cv2.IMREAD_UNCHANGED).shape[:2]
                    else:
                        h, w = msg.height, msg.width
                    items.append((t - 1_000_000, f"/{cam}/camera_info", info_msg(msg.header, w, h)))
                    items.append((t - 1_000_000, f"/{cam}/depth/image_raw", depth_msg(msg.header, w, h, cam)))
                    items.append((t, topic_out, raw))
        items.sort(key=lambda it: it[0])
        for t, topic, m in items:
            raw = m if isinstance(m, (bytes, bytearray, memoryview, np.ndarray)) else TS.serialize_cdr(
                m, conns[topic].msgtype)
            wr.write(conns[topic], t, bytes(raw))
        for cam in src:
            print(cam, "K (fx,fy,cx,cy) =", ",".join(f"{v:g}" for v in k_of(
                *((768, 576) if cam == "front" else (384, 288)))), "wall", WALL_M[cam], "m")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
