#!/usr/bin/env python3
"""Mutation check of the fault wiring and the rest of issue 26: each mutation breaks one line (of the fault handling,
the launch file, the parameter reader, the buffer pools, ...) in a scratch copy of the tree, runs the tests that
guard it, and must make one of them fail.

Usage (after ``make venv``; DDS kept on localhost with its own domain id, as ``make test`` does)::

    ROS_DOMAIN_ID=61 .venv/bin/python scripts/mutations.py [--out results/mutations.md] [--only NAME ...]

It copies the working tree (tracked and untracked, not ignored, files) to a temporary folder, runs the selected
tests there once unmutated (they must pass), then per mutation: applies it (the text it replaces must occur exactly
once, so a mutation that no longer applies is an error, not a silent pass), runs its tests with the venv's pytest
(stopping at the first failure), restores the file. Prints a table (mutation, tests run, failed yes/no) and writes
it to ``--out``; exits 1 when a mutation left its tests green or the baseline failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    """One broken line: ``old`` (exactly once in ``path``) becomes ``new``; ``tests`` are pytest node ids."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


FT = "test/test_fault_table.py"
NF = "test/test_node_faults.py"
LS = "test/test_launch_static.py"
HC = "test/test_standby_hc23.py"
JB = "test/test_compressed_batch.py"
CT = "test/test_camera_transport.py"
NT = "test/test_node_transport.py"
MUTATIONS = (
    Mutation("no reset of the failure run after a good frame", "vrt_ros/ros/worker.py",
             "            self.faults.success()\n", "            pass\n",
             (f"{FT}::test_a_good_frame_ends_the_run_of_engine_failures",)),
    Mutation("only explicit causes (__cause__) searched, not __context__", "vrt_ros/faults.py",
             "        exc = exc.__cause__ or exc.__context__\n", "        exc = exc.__cause__\n",
             (f"{FT}::test_a_sticky_cuda_error_behind_another_error_is_fatal_at_once",
              f"{FT}::test_a_frame_error_chained_inside_another_exception_is_an_input_fault")),
    Mutation("every bad frame fed to the fault policy", "vrt_ros/ros/worker_faults.py",
             "        if fault.kind == INPUT:\n            self.drop(cam, fault.reason, fault.message)\n",
             "        if False:\n            self.drop(cam, fault.reason, fault.message)\n",
             (f"{FT}::test_bad_compressed_frames_are_input_faults_on_the_cpu_decode",)),
    Mutation("the raw-bytes reader's own errors not classed as the read stage", "vrt_ros/ros/worker.py",
             "            self.fault(cam, fault, READ)\n", "            self.fault(cam, fault)\n",
             (f"{FT}::test_any_exception_of_the_raw_bytes_reader_is_an_input_fault",)),
    Mutation("a FrameError counts only at the top of the chain", "vrt_ros/faults.py",
             "    found = next((e for e in exception_chain(exc) if isinstance(e, FrameError)), None)\n",
             "    found = exc if isinstance(exc, FrameError) else None\n",
             (f"{FT}::test_a_frame_error_chained_inside_another_exception_is_an_input_fault",)),
    Mutation("the node's CPU decode not classed as the decode stage", "vrt_ros/ros/batch_input.py",
             "                    self._fault(frame.cam, exc, DECODE)\n", "                    self._fault(frame.cam, exc)\n",
             (f"{FT}::test_any_exception_of_the_nodes_cpu_decode_is_an_input_fault",)),
    Mutation("OpenCV's own errors not turned into FrameError", "vrt_ros/intake/compressed.py",
             "    except Exception as exc:  # cv2.error", "    except ZeroDivisionError as exc:  # cv2.error",
             ("test/test_fuzz_headers.py::test_opencv_errors_become_frame_faults",
              f"{FT}::test_bad_compressed_frames_are_input_faults_on_the_gpu_decode_path")),
    Mutation("no JPEG declared-size check", "vrt_ros/intake/compressed.py",
             '        _check_size("JPEG", *jpeg_header(buf)[:2])\n', "",
             ("test/test_fuzz_headers.py::test_absurd_declared_sizes_are_refused_before_decoding",
              f"{FT}::test_bad_compressed_frames_are_input_faults_on_the_cpu_decode")),
    Mutation("no PNG declared-size check", "vrt_ros/intake/compressed.py",
             '        _check_size("PNG", width, height)\n', "",
             ("test/test_fuzz_headers.py::test_absurd_declared_sizes_are_refused_before_decoding",
              "test/test_fuzz_headers.py::test_fuzz_png_ihdr")),
    Mutation("size limit compared per side only (not the pixel count)", "vrt_ros/intake/compressed.py",
             " or width * height > MAX_PIXELS:", ":",
             ("test/test_fuzz_headers.py::test_absurd_declared_sizes_are_refused_before_decoding",)),
    Mutation("a sticky CUDA error checked before a FrameError in the chain (the FrameError no longer wins)",
             "vrt_ros/faults.py",
             "    for row in FAULT_TABLE:\n", "    for row in (FAULT_TABLE[1], FAULT_TABLE[0], *FAULT_TABLE[2:]):\n",
             (f"{FT}::test_fault_table_rows", "test/test_fault_codes.py::test_frame_error_in_the_chain_wins")),
    Mutation("K-th failure in a row not fatal (off by one)", "vrt_ros/faults.py",
             "self.consecutive >= self.max_consecutive_failures", "self.consecutive > self.max_consecutive_failures",
             (f"{NF}::test_fault_policy_counts_consecutive_failures", f"{NF}::test_k_consecutive_engine_failures_are_fatal")),
    Mutation("worker keeps taking frames after a fatal fault", "vrt_ros/ros/worker_faults.py",
             "            self._stop()\n            self._on_fatal(fatal)\n",
             "            self._on_fatal(fatal)\n",
             (f"{NF}::test_k_consecutive_engine_failures_are_fatal",
              f"{FT}::test_a_sticky_cuda_error_behind_another_error_is_fatal_at_once")),
    Mutation("a fatal node shuts down its (host's) context", "vrt_ros/ros/node.py",
             "            self._fatal_signal.trigger()", "            self.context.try_shutdown()",
             (f"{NF}::test_a_fatal_node_leaves_the_host_context_and_its_other_nodes_alone",)),
    Mutation("main() does not stop on a fatal node", "vrt_ros/ros/main.py",
             "    while executor.context.ok() and not stop.requested() and not any(n.fatal_error for n in nodes):\n",
             "    while executor.context.ok() and not stop.requested():\n",
             (f"{NF}::test_main_exits_3_on_a_fatal_fault",)),
    Mutation("managed node: fatal fault does not wake errorprocessing", "vrt_ros/ros/lifecycle_node.py",
             "        self._fault_signal.trigger()\n", "",
             ("test/test_lifecycle.py::test_consecutive_engine_failures_go_to_errorprocessing",)),
    # issue 27 item 1: the fast fatal exit
    Mutation("main() exits before the worker has published the fatal ERROR", "vrt_ros/ros/main.py",
             "            _wait_reported(nodes)\n", "            pass\n",
             (f"{NF}::test_fatal_exit_is_fast_and_the_error_reaches_diagnostics_in_another_process",)),
    Mutation("main() tears the process down after a fatal fault", "vrt_ros/ros/main.py",
             "            startup.exit_now(status)\n", "            pass\n",
             (f"{NF}::test_fatal_exit_is_fast_and_the_error_reaches_diagnostics_in_another_process",)),
    Mutation("managed node: the poisoned context's pipeline closed", "vrt_ros/ros/lifecycle_node.py",
             "self._cleanup(close_pipeline=not poisoned)", "self._cleanup()",
             ("test/test_lifecycle.py::test_main_lifecycle_exits_fast_on_a_poisoned_context_with_the_error_on_diagnostics",)),
    Mutation("managed node: no ERROR on /diagnostics before the fatal exit", "vrt_ros/ros/lifecycle_node.py",
             "                self.publish_fatal_diagnostics()", "                pass",
             ("test/test_lifecycle.py::test_main_lifecycle_exits_fast_on_a_poisoned_context_with_the_error_on_diagnostics",)),
    # the rest of issue 26: launch, parameters, caches, TensorRT messages
    Mutation("launch: a start-up failure (exit 2) respawned instead of ending the launch", "vrt_ros/settings/launch_args.py",
             "    if returncode == 0 or (respawn and returncode != EXIT_STARTUP):\n",
             "    if returncode == 0 or respawn:\n",
             (f"{LS}::test_launch_exit_handlers_end_the_launch_naming_the_node_and_reason",)),
    Mutation("launch: autostart activates after any configure", "launch/detector.launch.py",
             "if ours and context.locals.event.goal_state", "if context.locals.event.goal_state",
             (f"{LS}::test_launch_lifecycle_logic_with_stand_in_launch_api",)),
    Mutation("launch: node processes not told to exit with their parent", "launch/detector.launch.py",
             ' "--exit-with-parent",', "",
             (f"{LS}::test_launch_logic_with_stand_in_launch_api",)),
    Mutation("a camera name that is no ROS name accepted", "vrt_ros/settings/config.py",
             '    bad_names = [c for c in value if not _RELATIVE_NAME.match(c)] if name == "cameras" else []\n',
             "    bad_names = []\n",
             ("test/test_node.py::test_main_refuses_a_camera_name_that_is_no_topic_name",)),
    Mutation("parameter files: only the first YAML document read", "vrt_ros/settings/param_files.py",
             "    for root in documents:", "    for root in documents[:1]:",
             ("test/test_param_files.py::test_multi_document_files_read_as_rcl_reads_them",)),
    Mutation("parameter files: aliases accepted", "vrt_ros/settings/param_files.py",
             "            if isinstance(event, yaml.AliasEvent):\n", "            if False:\n",
             ("test/test_param_files.py::test_bad_files_fail_in_one_line_naming_file_and_problem",)),
    Mutation("parameter files: node keys not checked as rcl checks them", "vrt_ros/settings/param_files.py",
             "            section_key = _section_key(path, file, key_node.start_mark.line + 1)\n",
             '            section_key = "/" + "/".join(p.strip("/") for p in path)\n',
             ("test/test_param_files.py::test_bad_files_fail_in_one_line_naming_file_and_problem",)),
    Mutation("geometry pool never grows (11 cameras reallocate every frame)", "vrt_ros/pools/keyed_cache.py",
             "                self.capacity = min(2 * self.capacity, self.limit)\n",
             "                self.capacity = self.capacity\n",
             ("test/test_geometry_caches.py",)),
    Mutation("start-up inference on memory nothing wrote", "vrt_ros/inference/backends/cuda.py",
             "            rt.memset32(self._input.ptr, 0, input_words, self.stream)\n", "",
             ("test/test_gpu_glue.py::test_start_up_inference_reads_a_zeroed_input_not_memory_nothing_wrote",)),
    Mutation("TensorRT message quotes the last two errors ever logged", "vrt_ros/engines/trt_logging.py",
             '        return " | ".join(self.errors_since(mark)) or default\n',
             '        return " | ".join(self.errors_since(0)[-2:]) or default\n',
             ("test/test_tensorrt.py::test_enqueue_failure_quotes_the_failing_calls_errors_only",)),
    Mutation("warm standby: no restart after a fatal exit", "vrt_ros/ros/supervisor_states.py",
             "    return status == EXIT_FATAL or status < 0\n", "    return status < 0\n",
             ("test/test_standby.py::test_a_fatal_exit_hands_over_to_the_standby_which_had_the_active_childs_imports",)),
    Mutation("warm standby: the standby not told the node's imports", "vrt_ros/ros/supervisor.py",
             '            self._standby.send("import " + ",".join(self._imports))\n', "",
             ("test/test_standby.py::test_a_fatal_exit_hands_over_to_the_standby_which_had_the_active_childs_imports",)),
    Mutation("warm standby: Ctrl-C not passed on to the node's child", "vrt_ros/ros/supervisor.py",
             "            active.proc.send_signal(self._stopping)\n", "            pass\n",
             ("test/test_standby.py::test_sigint_to_the_supervisor_goes_to_the_active_child_and_ends_it_without_a_restart",)),
    Mutation("warm standby: no hidden node (no DDS participant before the take-over)", "vrt_ros/ros/main.py",
             "            link.placeholder = standby.participant_node()", "            link.placeholder = None",
             ("test/test_standby_node.py::test_ctrl_c_to_the_supervisor_ends_the_node_and_the_standby_with_status_0",)),
    Mutation("warm standby: children outlive a killed supervisor (no PDEATHSIG before exec)", "vrt_ros/ros/supervisor.py",
             "preexec_fn=_die_with(os.getpid())", "preexec_fn=None",
             ("test/test_standby_node.py::test_children_do_not_outlive_a_killed_supervisor",
              f"{HC}::test_HC_23_children_die_with_a_supervisor_killed_while_they_start")),
    Mutation("python -m vrt_ros.settings.config: the node's start-up checks (model and labels files) skipped", "vrt_ros/settings/config.py",
             "            errors = [] if args.schema_only else start_up_errors(values)\n", "            errors = []\n",
             ("test/test_config.py::test_cli_says_ok_only_for_a_file_the_node_gets_past_start_up_with",)),
    # issue 34: masks (each mask its frame's; bounded frame buffers)
    Mutation("masks: the GPU label image returned as a view of the reused pinned image", "vrt_ros/gpu/masks.py",
             ".view(self.label_dtype).reshape(shape).copy()", ".view(self.label_dtype).reshape(shape)",
             ("test/test_gpu_frame_buffers.py::test_a_returned_label_image_is_the_calls_own_on_the_stand_in",)),
    Mutation("masks: the CPU label image written into a buffer reused per frame size", "vrt_ros/inference/backends/cpu.py",
             "params, self.mask_dtype, None)",
             "params, self.mask_dtype, self.__dict__.setdefault('_reused', {}).setdefault((slot, lb.src_height, "
             "lb.src_width), np.zeros((lb.src_height, lb.src_width), self.mask_dtype)))",
             ("test/test_node_mask_frames.py::test_two_nodes_on_one_cpu_pipeline_publish_each_frames_own_mask",)),
    Mutation("masks: frame buffers not bounded in bytes", "vrt_ros/pools/buffer_budget.py",
             "        if self.used + nbytes > self.limit:\n            self.refused += 1\n",
             "        if False:\n            self.refused += 1\n",
             ("test/test_gpu_frame_buffers.py::test_two_hundred_frame_sizes_stay_within_the_frame_buffer_bound",)),
    Mutation("masks: label images outside the byte bound", "vrt_ros/gpu/label_images.py",
             '"label images of instance masks", budget)', '"label images of instance masks", None)',
             ("test/test_gpu_frame_buffers.py::test_two_hundred_frame_sizes_stay_within_the_frame_buffer_bound",)),
    Mutation("masks: what the call holds evicted for room", "vrt_ros/pools/keyed_cache.py",
             "            if self._budget is None or entry[3] != epoch:\n", "            if True:\n",
             ("test/test_gpu_frame_buffers.py::test_pools_sharing_a_budget_free_the_least_recently_used_and_never_what_the_call_holds",)),
    Mutation("masks: label image not taken with the frame's staging", "vrt_ros/inference/backends/cuda_staging.py",
             "            reserve(len(staged.taken), sources[i], wants[i])\n", "            pass\n",
             ("test/test_gpu_frame_buffers.py::test_a_batch_frame_over_the_bound_is_dropped_before_its_engine_call",)),
    # issue 34: downstream (oriented boxes in depth and tracking, track ids)
    Mutation("depth: oriented boxes read as image-aligned (CPU reference)", "vrt_ros/depth/stats.py",
             "    geometry = geometry_of(theta)\n", "    geometry = geometry_of(None)\n",
             ("test/test_depth_oriented.py::test_HC_24_thin_tilted_object_before_a_wall_is_placed_on_the_object",)),
    Mutation("depth: the GPU kernel not told the rows' theta column", "vrt_ros/inference/backends/cuda.py",
             "THETA_COLUMN if self.head.oriented else -1, self.max_batch)", "-1, self.max_batch)",
             ("test/test_depth_oriented.py::test_HC_24_gpu_glue_reads_theta_from_the_rows_on_the_stand_in",)),
    Mutation("3D: the rotated extent not back-projected (no yaw)", "vrt_ros/depth/boxes3d.py",
             "    if theta is None:\n        pts = ", "    if True:\n        pts = ",
             ("test/test_depth_oriented.py::test_HC_24_thin_tilted_object_before_a_wall_is_placed_on_the_object",)),
    Mutation("tracking: oriented boxes associated as image-aligned", "vrt_ros/tracking/output.py",
             "dets.class_ids, dets.theta, estimated)", "dets.class_ids, None, estimated)",
             ("test/test_tracking_oriented.py",)),
    Mutation("tracking: rotated pairs gated too tightly", "vrt_ros/boxes/kinds.py",
             "ROTATED_GATE = 2.5\n", "ROTATED_GATE = 0.5\n",
             ("test/test_tracking_oriented.py::test_rotated_pairs_give_every_pair_that_can_pass_a_gate",)),
    Mutation("tracking: class keys in float32", "vrt_ros/boxes/kinds.py",
             "det_rows[::2] + offsets_b), axis=1)", "det_rows[::2] + offsets_b), axis=1, dtype=np.float32)",
             ("test/test_tracking_ids.py",)),
    Mutation("tracking: the id counter not kept across cleanup/configure", "vrt_ros/ros/camera.py",
             "track_ids.setdefault(name, TrackIds())", "TrackIds()",
             ("test/test_node_tracking.py::test_HC_25_ids_never_repeat_across_cleanup_configure_and_a_restart",)),
    Mutation("tracking: no per-start epoch in the ids", "vrt_ros/ros/camera.py",
             "track_ids.setdefault(name, TrackIds())", "track_ids.setdefault(name, TrackIds(0))",
             ("test/test_node_tracking.py::test_HC_25_ids_never_repeat_across_cleanup_configure_and_a_restart",)),
    Mutation("tracking: an unstamped frame timed on the monotonic clock", "vrt_ros/ros/camera.py",
             "        return arrival_ns - self.stamp_delay_ns, True\n", "        return int(arrived * 1e9), False\n",
             ("test/test_node_tracking.py::test_an_unstamped_frame_in_a_stamped_stream_keeps_the_tracks",)),
    Mutation("tracking: an estimated time taken as a measured stamp", "vrt_ros/tracking/tracker.py",
             "        if not estimated:\n            self._measured_ns = stamp_ns",
             "        if True:\n            self._measured_ns = stamp_ns",
             ("test/test_tracking_ids.py::test_an_estimated_time_never_resets_the_tracks",)),
    Mutation("depth: the node's 3D step not given the detections' theta", "vrt_ros/ros/depth_input.py",
             "                                  self.percentile, theta=dets.theta)", "                                  self.percentile)",
             ("test/test_node_depth_oriented.py",)),
    # issue 34: heads and labels refuse what they cannot decode
    Mutation("yolov8 family: any fixed anchor count accepted (YOLOX-nano taken by yolov8_obb)", "vrt_ros/heads/yolov8.py",
             "    if not dim_is(n, cells):\n        raise head._error(", "    if False:\n        raise head._error(",
             ("test/test_heads_refusals.py::test_yolov8_family_refuses_an_anchor_count_that_is_not_the_cell_count",
              "test/test_heads_refusals.py::test_real_yolox_nano_with_every_wrong_head_is_refused_at_start_up")),
    Mutation("auto: a per-anchor [1,N,4] + [1,N,C] pair taken for DETR", "vrt_ros/heads/detr.py",
             "    return outputs[0].shape[1] == outputs[1].shape[1] == cells and", "    return False and",
             ("test/test_heads_refusals.py::test_auto_refuses_a_per_anchor_box_and_score_pair",)),
    Mutation("labels: a file with another count than the model's classes accepted", "vrt_ros/model/labels.py",
             "    if len(labels) != class_count:\n", "    if False:\n",
             ("test/test_heads_refusals.py::test_labels_count_must_be_the_model_class_count",)),
    Mutation("labels: the node never checks the count", "vrt_ros/ros/node.py",
             "        check_label_count(self._labels,", "        (lambda *_a: None)(self._labels,",
             ("test/test_heads_refusals.py::test_node_refuses_five_names_for_the_80_class_model",)),
    # issue 36: YOLO26 end-to-end heads
    Mutation("end2end_obb: centre boxes read as corners", "vrt_ros/heads/end2end_obb.py",
             "            boxes=boxes_from_cxcywh(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]),",
             "            boxes=np.ascontiguousarray(rows[:, :4]),",
             ("test/test_heads_end2end.py::test_end2end_obb_angle_and_rectangle_without_nms",)),
    Mutation("end2end_seg: mask coefficients read one column early", "vrt_ros/heads/end2end_seg.py",
             "extras=np.ascontiguousarray(rows[:, ROW : ROW + self.num_masks])",
             "extras=np.ascontiguousarray(rows[:, ROW - 1 : ROW - 1 + self.num_masks])",
             ("test/test_heads_end2end.py::test_end2end_seg_masks_follow_their_rows",)),
    Mutation("yolov8_pose: one class assumed (YOLO26-pose from its yaml has 80)", "vrt_ros/heads/yolov8_pose.py",
             "        self.num_classes = 1 if (c - 5) % 3 == 0 else int(c) - coco\n",
             "        self.num_classes = 1\n",
             ("test/test_heads_end2end.py::test_multiclass_pose_decodes_class_and_keypoints",)),
    Mutation("auto: the task metadata does not reach a head shapes alone did not match", "vrt_ros/heads/__init__.py",
             "        head(outputs, input_spec)\n    except ModelError:\n        return False\n    return True\n",
             "        head(outputs, input_spec)\n    except ModelError:\n        return False\n    return False\n",
             ("test/test_heads_end2end.py::test_auto_picks_the_head_of_every_export",)),
    Mutation("end2end rows: a row length that is the cell count taken as rows", "vrt_ros/heads/end2end.py",
             "    if c == grid_cells(input_spec.width, input_spec.height, STRIDES):\n        return None\n", "",
             ("test/test_heads_refusals.py::test_every_wrong_head_is_refused_naming_the_shapes",)),
    Mutation("detr_topk: normalised boxes not scaled to the input", "vrt_ros/heads/detr_topk.py",
             "        b = rows[:, :4] * self._scale\n", "        b = rows[:, :4]\n",
             ("test/test_heads_end2end.py::test_rtdetr_topk_rows_in_source_pixels",)),
    Mutation("auto: RT-DETR's ranked rows taken for the one-output DETR layout", "vrt_ros/heads/__init__.py",
             "        if DetrTopkHead.matches_rows(outputs, input_spec) and _class_count(metadata) != 2:",
             "        if False:",
             ("test/test_heads_end2end.py::test_auto_picks_the_head_of_every_export",)),
    Mutation("GPU path: auto without the model's metadata", "vrt_ros/inference/backends/cuda.py",
             "onnx_metadata(values[\"model.path\"]))", "{})",
             ("test/test_heads_end2end.py::test_gpu_path_auto_reads_the_model_metadata",)),
    Mutation("onnx_metadata: entries skipped", "vrt_ros/model/model_file.py",
             "                        found[key] = value\n", "                        pass\n",
             ("test/test_heads_end2end.py::test_metadata_read_without_onnx_matches_onnxruntime",)),
    # issue 33: supervisor
    Mutation("supervisor: a stop passed on by the signal handler to the child active then (lost in a spawn)",
             "vrt_ros/ros/supervisor.py",
             "        self._stopping, self._signals = signum, self._signals + 1\n",
             "        self._stopping, self._signals = signum, self._signals + 1\n        self._forwarded = self._signals\n"
             "        if self._active is not None and self._active.proc.poll() is None:\n"
             "            self._active.proc.send_signal(signum)\n",
             (f"{HC}::test_HC_23_a_stop_during_a_spawn_reaches_the_new_child",
              f"{HC}::test_HC_23_a_stop_during_a_take_over_reaches_the_standby_that_was_told_go")),
    Mutation("supervisor: no check for a stop right before a restart", "vrt_ros/ros/supervisor.py",
             "        if self._stopping is not None:  # a signal since this turn's start: the next turn stops\n"
             "            return\n", "",
             (f"{HC}::test_HC_23_a_stop_during_the_restart_delay_starts_nothing_and_ends_every_child",)),
    Mutation("supervisor: stopping not absorbing (a delay's end after a stop restarts)",
             "vrt_ros/ros/supervisor_states.py",
             '        if event == "stop" or before is State.STOPPING:\n', '        if event == "stop":\n',
             ("test/test_supervisor_states.py",)),
    Mutation("supervisor: a dead standby not seen (not reaped, not replaced)", "vrt_ros/ros/supervisor.py",
             "        status = sb.proc.poll()\n", "        status = None\n",
             (f"{HC}::test_HC_23_a_standby_killed_before_a_fault_is_reaped_replaced_and_the_new_one_takes_over",)),
    Mutation("supervisor: a dead standby reaped but not replaced", "vrt_ros/ros/supervisor.py",
             "        self._standby_at = now + delay\n", "        self._standby_at = float('inf')\n",
             (f"{HC}::test_HC_23_a_standby_killed_before_a_fault_is_reaped_replaced_and_the_new_one_takes_over",)),
    Mutation("supervisor: no deadline for the answer to go", "vrt_ros/ros/supervisor.py",
             "                standby.go_deadline = time.monotonic()", "                standby.go_deadline = None and time.monotonic()",
             (f"{HC}::test_HC_23_a_hung_standby_is_killed_when_it_does_not_answer_go_and_a_cold_start_follows",)),
    Mutation("supervisor: no back-off (the restart delay for ever)", "vrt_ros/ros/supervisor_states.py",
             "        return (min(self.max_s, max(self.base_s, MIN_STEP_S) * 2 ** k),",
             "        return (self.base_s,",
             (f"{HC}::test_HC_23_a_node_that_fails_at_once_is_restarted_with_growing_delays_and_the_reason",)),
    Mutation("supervisor: a healthy run does not reset the back-off", "vrt_ros/ros/supervisor_states.py",
             "            self.in_a_row = 0\n", "            pass\n",
             ("test/test_supervisor_states.py::test_a_healthy_run_resets_the_back_off",)),
    Mutation("supervisor: main(argv)'s children run python -m vrt_ros.ros.main (any copy)", "vrt_ros/ros/supervisor.py",
             '    return [sys.executable, "-c", code, *argv[1:]]\n',
             '    return [sys.executable, "-m", "vrt_ros.ros.main", *argv[1:]]\n',
             ("test/test_standby_node.py::test_HC_23_children_of_main_called_with_argv_run_the_supervisors_own_vrt_ros",)),
    Mutation("recovery bench: a take-over that did not happen kept as an instance", "vrt_ros/bench/restart/recovery_procs.py",
             "                out.pop()  # that take-over did not happen", "                pass  # that take-over did not happen",
             ("test/test_bench_recovery_respawn.py::test_a_take_over_that_did_not_happen_starts_no_instance_the_cold_start_does",)),
    # issue 33: faults (a sticky CUDA fault recognised by its code; a FrameError in the chain wins)
    Mutation("sticky CUDA fault recognised by its text again", "vrt_ros/faults.py",
             "        sticky = _STICKY_BY_CODE.get(cuda_error_code(link))\n",
             "        sticky = next((e for e in STICKY_ERRORS if e.name in str(link) or e.runtime_name in str(link)\n"
             "                       or e.text.lower() in str(link).lower()), None)\n",
             ("test/test_fault_codes.py::test_sticky_wording_without_a_code_is_not_fatal",)),
    Mutation("sticky CUDA fault by its text, checked before the FrameError row (the issue's bug)", "vrt_ros/faults.py",
             '    for row in FAULT_TABLE:\n        if row.stage in ("any", stage):\n            found = row.match(exc)\n',
             '    for row in (FAULT_TABLE[1], FAULT_TABLE[0], *FAULT_TABLE[2:]):\n        if row.stage in ("any", stage):\n'
             '            found = row.match(exc) if row.kind != FATAL else (ENGINE_ERROR, "") if any(\n'
             '                e.text in str(x) or e.name in str(x) for x in exception_chain(exc) for e in STICKY_ERRORS) else None\n',
             ("test/test_hc22_sticky_text.py::test_HC_22_sticky_error_text_in_frame_fields_is_an_input_fault_on_the_cpu_path",
              "test/test_hc22_sticky_text.py::test_HC_22_sticky_error_text_in_frame_fields_is_an_input_fault_on_the_gpu_path")),
    Mutation("GpuError raised without its CUresult", "vrt_ros/gpu/runtime.py",
             "{text.decode() if text else ''}\", code=int(err), name=err.name)", "{text.decode() if text else ''}\")",
             ("test/test_fault_codes.py::test_a_failed_cuda_call_raises_its_curesult_as_the_code",)),
    Mutation("torch.AcceleratorError's error_code not read", "vrt_ros/faults.py",
             '        return _int_or_none(getattr(exc, "error_code", None))\n', "        return None\n",
             ("test/test_fault_codes.py::test_each_sticky_code_is_fatal",)),
    Mutation("cuda.core CUDAError's CUresult name not read", "vrt_ros/faults.py",
             "        return sticky.code if sticky is not None else None\n", "        return None\n",
             ("test/test_fault_codes.py::test_each_sticky_code_is_fatal",
              "test/test_gpu_glue.py::test_poisoned_context_error_is_fatal")),
    Mutation("any exception's code attribute read as a CUDA code", "vrt_ros/faults.py",
             "    return None\n\n\ndef _int_or_none", "    return _int_or_none(getattr(exc, 'code', None))\n\n\ndef _int_or_none",
             ("test/test_fault_codes.py::test_only_the_libraries_types_are_read",)),
    Mutation("a failed stream sync raised without the driver's CUresult", "vrt_ros/gpu/runtime.py",
             "            err = _stream_error(stream)\n", "            err = None\n",
             ("test/test_fault_codes.py::test_a_failed_stream_sync_carries_the_drivers_curesult",)),
    # issue 33: stop at any moment, make test's legs, test gaps
    Mutation("stop: rclpy's own signal handlers installed by the node", "vrt_ros/ros/startup.py",
             "        rclpy.init(args=list(argv), signal_handler_options=SignalHandlerOptions.NO)\n",
             "        rclpy.init(args=list(argv))\n",
             ("test/test_stop_any_moment.py::test_node_stops_cleanly_at_any_moment[SIGTERM]",)),
    Mutation("stop: the node's spin loop ignores the stop request", "vrt_ros/ros/main.py",
             "    while executor.context.ok() and not stop.requested() and not any(",
             "    while executor.context.ok() and not any(",
             ("test/test_stop_any_moment.py::test_node_stops_cleanly_at_any_moment[SIGTERM]",)),
    Mutation("stop: the process ends through the interpreter's finalization", "vrt_ros/ros/main.py",
             "    status = run(argv, child_command)\n    stop.end_process(status)\n",
             "    status = run(argv, child_command)\n",
             ("test/test_stop_any_moment.py::test_node_stops_cleanly_at_any_moment[SIGINT]",)),
    Mutation("stop: the console tools' first signal raises nothing", "vrt_ros/tools/tool.py",
             "        stop.install(prog, raise_first=True)\n", "        stop.install(prog, raise_first=False)\n",
             ("test/test_stop_any_moment.py::test_replay_stops_cleanly_at_any_moment[SIGINT]",)),
    Mutation("stop: the worker keeps a thread that never started", "vrt_ros/ros/worker.py",
             "        thread.start()\n        self._thread = thread",
             "        self._thread = thread\n        thread.start()",
             ("test/test_stop_any_moment.py::test_a_worker_whose_start_was_interrupted_stops_without_error",)),
    Mutation("make test: the legs stop at the first failing one", "scripts/test_legs.sh",
             "    failed=1\n", "    failed=1\n    break\n",
             ("test/test_test_legs.py::test_every_leg_runs_when_the_main_leg_fails",)),
    Mutation("make test: no summary of the legs", "scripts/test_legs.sh",
             'echo "legs: summary"\n', 'exit "$failed"\n',
             ("test/test_test_legs.py::test_every_leg_runs_when_the_main_leg_fails",)),
    Mutation("make test: pytest's exit 5 passes the main leg", "scripts/run_tests.sh",
             'if [ "$rc" -eq 5 ]; then', 'if false; then',
             ("test/test_test_legs.py::test_main_leg_turns_pytest_exit_5_into_a_failure",)),
    Mutation("no reset of the failure run after a good batch", "vrt_ros/ros/worker.py",
             "        if done:\n            self.faults.success()\n", "        if done:\n",
             ("test/test_node_batching.py::test_a_good_batch_ends_the_run_of_engine_failures",)),
    Mutation("mask labels launched with a scale 2 % off", "vrt_ros/gpu/masks.py",
             "scale_x=lb.scale_x,", "scale_x=lb.scale_x * 1.02,",
             ("test/test_gpu_heads.py::test_seg_mask_glue_feeds_the_kernels_the_frames_rows_and_prototypes",)),
    # issue 34: shared pipeline (per-call results and parameters with several nodes on one pipeline)
    Mutation("shared pipeline: the depth statistic read from the pipeline after its lock", "vrt_ros/ros/depth_input.py",
             "pair.stats, pair.boxes = dets.depth_stats, dets.boxes",
             "pair.stats, pair.boxes = pipeline._depth.read(len(dets)), dets.boxes",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_gpu_pipeline_publish_each_frames_own_3d",)),
    Mutation("shared pipeline: the GPU depth statistic returned as a view of the reused pinned buffer",
             "vrt_ros/gpu/depth.py", ".view(np.float32).reshape(n, STATS).copy()",
             ".view(np.float32).reshape(n, STATS)",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_gpu_pipeline_publish_each_frames_own_3d",)),
    Mutation("shared pipeline: a frame's stage times read from the pipeline after its lock", "vrt_ros/ros/worker.py",
             "timings = dict(next((r.timings for r in results if isinstance(r, Detections)), {}))",
             "timings = dict(self.pipeline.last_timings)",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_gpu_pipeline_report_each_frames_own_stage_times",)),
    Mutation("shared pipeline: a batch's stage times read from the pipeline after its lock", "vrt_ros/ros/worker.py",
             "timings = dict(next((r.timings for r in results if isinstance(r, Detections)), {}))",
             "timings = dict(self.pipeline.last_timings)",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_batching_pipeline_report_each_batchs_own_stage_times",)),
    Mutation("shared pipeline: a serial batch sums the pipeline's last times, not its frames' own",
             "vrt_ros/inference/batch_serial.py", "        for stage, ms in dets.timings.items():",
             "        for stage, ms in pipe.last_timings.items():",
             ("test/test_batch_serial.py",)),
    Mutation("shared pipeline: the node's parameters applied only when they change", "vrt_ros/ros/instance_mask.py",
             "            return\n        self._pipeline.set_postprocess(self._params)",
             "            return\n        if self._params is not getattr(self, '_applied', None):\n"
             "            self._applied = self._params\n            self._pipeline.set_postprocess(self._params)",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_pipeline_each_apply_their_own_postprocess_parameters",)),
    Mutation("shared pipeline: a lock per node, not per pipeline", "vrt_ros/ros/worker.py",
             "self._pipeline_lock = call_lock(pipeline)", "self._pipeline_lock = threading.Lock()",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_pipeline_each_apply_their_own_postprocess_parameters",)),
    Mutation("shared pipeline: the CPU path's stage times not the call's", "vrt_ros/inference/backends/cpu.py",
             "                results[i].timings = timings  # type: ignore[union-attr]\n",
             "                pass\n",
             ("test/test_node_shared_pipeline.py::test_two_nodes_on_one_batching_pipeline_report_each_batchs_own_stage_times",)),
    # issue 36: parity with Ultralytics
    Mutation("masks: cropped by pixel centre (not Ultralytics' pixel index)", "vrt_ros/boxes/masks.py",
             "    first = max(0, int(math.ceil(lo)))", "    first = max(0, int(math.ceil(lo - 0.5)))",
             ("test/test_heads_seg.py::test_label_image_crops_to_the_box_by_pixel_index_and_thresholds_by_probability",)),
    Mutation("preprocess: std applied as a reciprocal (1 ulp off Ultralytics' / 255)", "vrt_ros/intake/preprocess.py",
             "        t /= self._std  #", "        t *= 1.0 / self._std  #",
             ("test/test_preprocess.py::test_unresized_frame_gives_ultralytics_tensor_bit_for_bit",)),
    # flaky helper: a standby's wait for go and the stop
    Mutation("standby: the wait for go ignores the stop request", "vrt_ros/ros/standby.py",
             "        stop.on_request(self._end_wait)  # at once when the request came before the wait\n",
             "        pass\n",
             ("test/test_standby_stop.py::test_a_standby_waiting_for_go_returns_on_a_stop_without_the_deadline[SIGINT]",
              "test/test_standby_stop.py::test_a_stop_that_came_before_the_wait_ends_it_at_once")),
    # flaky helper: the input queue keeps the frames the executor has not taken yet
    Mutation("input: depth 1 by default (frames replaced unseen in the DDS queue)", "vrt_ros/settings/config.py",
             'ParamSpec("input.depth", "int", 5,', 'ParamSpec("input.depth", "int", 1,',
             ("test/test_replay_delivery.py::test_frames_that_arrive_while_the_executor_is_busy_are_all_seen_and_counted",)),
    # issue 35: jpegbatch (a batch's JPEGs in one GPU decoder call)
    Mutation("jpeg batch: a decoder call failing as a whole is not retried frame by frame", "vrt_ros/intake/compressed_route.py",
             "        if refused and (whole or len(infos) > 1):\n",
             "        if refused and len(infos) > 1 and not whole:\n",
             (f"{JB}::test_a_batch_call_that_fails_as_a_whole_is_retried_frame_by_frame",)),
    Mutation("jpeg batch: a corrupt JPEG's CPU verdict fails the whole batch", "vrt_ros/intake/compressed_route.py",
             "            except Exception as exc:  # noqa: BLE001 - the CPU decode's verdict on this frame alone",
             "            except KeyError as exc:  # noqa: BLE001 - the CPU decode's verdict on this frame alone",
             (f"{JB}::test_a_corrupt_jpeg_in_the_batch_fails_its_own_slot_only",)),
    Mutation("jpeg batch: a bad payload's FrameError fails the whole batch", "vrt_ros/intake/compressed_route.py",
             "            except Exception as exc:  # noqa: BLE001 - returned for that frame alone",
             "            except KeyError as exc:  # noqa: BLE001 - returned for that frame alone",
             (f"{JB}::test_png_12_bit_and_bad_payloads_mixed_in_fall_back_per_frame",)),
    Mutation("jpeg batch: the batch's JPEGs decoded one call each", "vrt_ros/intake/compressed_route.py",
             "            images = list(self.decoder.decode_batch(infos, stream, qslots))",
             "            images = [self._one(i, stream, s)[0] for i, s in zip(infos, qslots)]",
             (f"{JB}::test_a_batch_of_jpegs_is_one_decoder_call_each_slot_equal_to_the_frame_alone[8]",)),
    Mutation("jpeg batch: nvImageCodec's None for a stream it cannot decode not handled", "vrt_ros/gpu/jpeg.py",
             "                out[k] = None if image is None else _device_image(image)",
             "                out[k] = _device_image(image)",
             (f"{JB}::test_nvimagecodec_decoder_decodes_a_batch_in_one_call_into_the_slots_kept_images",)),
    Mutation("jpeg batch: the slots' kept images not passed to the list call", "vrt_ros/gpu/jpeg.py",
             "            images = self._call([infos[k].handle for k in reuse], handle, [kept[k] for k in reuse])",
             "            images = self._call([infos[k].handle for k in reuse], handle, None)",
             (f"{JB}::test_nvimagecodec_decoder_decodes_a_batch_in_one_call_into_the_slots_kept_images",)),
    Mutation("jpeg batch: no room made in the byte bound before nvImageCodec allocates", "vrt_ros/gpu/jpeg.py",
             "        if self._budget is None:\n            return fresh", "        if True:\n            return fresh",
             (f"{JB}::test_nvimagecodec_decoder_images_are_bounded_by_bytes_with_the_pipelines_budget",)),
    Mutation("jpeg batch: a frame over the byte bound decoded on the CPU instead of dropped", "vrt_ros/intake/compressed_route.py",
             "        except FrameError as exc:\n            return exc, \"\"\n", "",
             (f"{JB}::test_nvimagecodec_decoder_images_are_bounded_by_bytes_with_the_pipelines_budget",)),
    # issue 37: docs (generated blocks of README.md and docs/, the docs leg's check)
    Mutation("docs: a stale generated block passes the check", "scripts/docs_gen.py",
             "            old_blocks = dict(BLOCK.findall(text))\n", "            continue\n",
             ("test/test_docs.py::test_a_schema_change_makes_the_parameter_page_stale",
              "test/test_docs.py::test_a_changed_result_makes_the_performance_page_stale")),
    Mutation("docs: a block without its end marker accepted", "scripts/docs_gen.py",
             "    if len(opened) != len(closed):\n", "    if False:\n",
             ("test/test_docs.py::test_an_unknown_or_unterminated_block_is_an_error",)),
    # issue 37: geometry (Detections know their box geometry; vrt_ros/boxes/kinds.py)
    Mutation("geometry: a rotated box covers the pixels of its unturned rectangle", "vrt_ros/boxes/kinds.py",
             "        return rotated_cover(box, theta, scale, width, height)", "        return rotated_cover(box, 0.0, scale, width, height)",
             ("test/test_boxes.py::test_pixels_are_those_whose_centre_is_inside",)),
    Mutation("geometry: rotated corners turned the other way", "vrt_ros/boxes/rotated.py",
             "    ux, uy, vx, vy = 0.5 * w * c, 0.5 * w * s, -0.5 * h * s, 0.5 * h * c\n",
             "    ux, uy, vx, vy = 0.5 * w * c, -0.5 * w * s, 0.5 * h * s, 0.5 * h * c\n",
             ("test/test_boxes.py::test_corners_are_opencvs_box_points",)),
    Mutation("geometry: an axis-aligned set against a rotated one compared as axis-aligned", "vrt_ros/boxes/kinds.py",
             "AXIS_ALIGNED if theta_a is None and theta_b is None else ROTATED", "AXIS_ALIGNED if theta_a is None or theta_b is None else ROTATED",
             ("test/test_boxes.py::test_rotated_iou_is_the_probabilistic_iou_and_an_axis_aligned_set_counts_as_turned_by_zero",)),
    Mutation("geometry: the depth reference reads the covered span, not the covered pixels", "vrt_ros/depth/stats.py",
             "        z = depth[r0:r1, c0:c1] if inside is None else depth[r0:r1, c0:c1][inside]\n", "        z = depth[r0:r1, c0:c1]\n",
             ("test/test_new_rotated_head.py::test_depth_measures_the_new_heads_thin_tilted_object_not_the_wall",)),
    Mutation("geometry: a matched oriented track keeps its birth angle", "vrt_ros/tracking/tracker.py",
             "            g[_THETA] = det_theta[on]\n", "",
             ("test/test_tracking_oriented.py",)),
    Mutation("geometry: the tracker's pairs taken as axis-aligned whatever the detections", "vrt_ros/tracking/tracker.py",
             "rows, cols, iou = geometry.pairs(", "rows, cols, iou = geometry_of(None).pairs(",
             ("test/test_new_rotated_head.py::test_tracking_keeps_the_new_heads_crossing_sticks_apart",)),
    Mutation("geometry: axis-aligned outlines drawn anti-aliased", "vrt_ros/boxes/draw.py",
             "cv2.LINE_8 if crisp else cv2.LINE_AA", "cv2.LINE_AA",
             ("test/test_new_rotated_head.py::test_axis_aligned_boxes_draw_the_pixels_of_cv2_rectangle",)),
    Mutation("geometry: Detection2D written without the box's theta", "vrt_ros/boxes/kinds.py",
             "        out[:, 4] = self.angles(b.shape[0], theta)\n", "        out[:, 4] = 0.0\n",
             ("test/test_new_rotated_head.py::test_the_message_writer_publishes_the_new_heads_theta",)),
    Mutation("geometry: model.head choices a list of their own, not the HEADS registry", "vrt_ros/settings/config.py",
             "HEAD_NAMES = (AUTO, *HEADS)\n", "HEAD_NAMES = (AUTO, *list(HEADS)[:-1])\n",
             ("test/test_new_rotated_head.py::test_a_head_registered_in_heads_is_a_model_head_value_without_another_edit",)),
    # issue 37: edges (a new user's rough edges)
    Mutation("replay: one bag topic published only on its last --topic mapping", "vrt_ros/tools/replay.py",
             "            self._out_topic[conn.id] = outs\n", "            self._out_topic[conn.id] = outs[-1:]\n",
             ("test/test_replay_delivery.py::test_replay_publishes_one_bag_topic_on_every_topic_it_is_mapped_to",)),
    Mutation("start-up: a parameter file for no node not said before the start-up error", "vrt_ros/ros/main.py",
             "args.peer_names) if link is None else {}", "args.peer_names) if False else {}",
             ("test/test_startup_no_node.py::test_a_file_for_no_node_is_named_before_the_start_up_error",)),
    Mutation("seg_picture: --help not an option (taken for the shared folder)", "scripts/seg_picture.py",
             "    args = build_parser().parse_args(argv)\n",
             "    args = build_parser().parse_args([a for a in argv if a != '--help'])\n",
             ("test/test_seg_picture.py::test_help_prints_the_usage",)),
    Mutation("silent camera: the topic's publishers not looked up (no DDS profile advice)", "vrt_ros/ros/node.py",
             "started=self._started, publishers=self.get_publishers_info_by_topic)", "started=self._started)",
             ("test/test_node_silent_camera.py::test_a_camera_whose_topic_has_a_silent_publisher_is_told_about_the_publishers_dds_profile",)),
    Mutation("silent camera: DDS profile advice also after frames arrived", "vrt_ros/ros/camera_log.py",
             "if self._publishers is not None and not received else []", "if self._publishers is not None else []",
             ("test/test_camera_log.py::test_a_silent_camera_with_publishers_names_them_and_their_dds_profile_only_when_nothing_ever_arrived",)),
    Mutation("publish_images: --frame-id not in the header", "vrt_ros/tools/publish_images.py",
             "frame_id=self._frame_id)", "frame_id='')",
             ("test/test_publish_images.py::test_a_folder_of_photos_gets_detections_for_each_from_a_running_node[raw]",)),
    Mutation("publish_images: --compressed published on the raw topic name", "vrt_ros/tools/publish_images.py",
             "f\"{topic.rstrip('/')}/compressed\" if compressed else topic", "topic",
             ("test/test_publish_images.py::test_a_folder_of_photos_gets_detections_for_each_from_a_running_node[compressed]",)),
    # issue 35: transport (per-camera raw / compressed input)
    Mutation("transport: a compressed camera not in 'cameras' accepted", "vrt_ros/settings/config.py",
             "    unknown = [c for c in listed if c not in cameras]\n", "    unknown = []\n",
             (f"{CT}::test_a_bad_list_names_the_parameter_and_the_file",
              f"{CT}::test_the_checker_cli_refuses_a_camera_not_in_cameras",
              f"{CT}::test_the_list_is_checked_against_the_cameras_the_node_gets")),
    Mutation("transport: a compressed camera listed twice accepted", "vrt_ros/settings/config.py",
             "    if len(set(listed)) != len(listed):\n", "    if False:\n",
             (f"{CT}::test_a_bad_list_names_the_parameter_and_the_file",)),
    Mutation("transport: input.compressed true beside a list accepted (one silently wins)", "vrt_ros/settings/config.py",
             '    if values["input.compressed"]:\n        errors.append(', '    if False:\n        errors.append(',
             (f"{CT}::test_a_bad_list_names_the_parameter_and_the_file",)),
    Mutation("transport: cross-parameter checks never run", "vrt_ros/settings/config.py",
             "        errors += _transport_errors(out, source)\n", "        pass\n",
             (f"{CT}::test_a_bad_list_names_the_parameter_and_the_file",)),
    Mutation("transport: the list ignored (input.compressed alone decides)", "vrt_ros/settings/config.py",
             '"compressed" if every or c in listed else "raw"', '"compressed" if every else "raw"',
             (f"{CT}::test_each_camera_gets_its_transport", f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera")),
    Mutation("transport: every camera subscribed on image_raw", "vrt_ros/ros/node.py",
             '            topic = f"{name}/{_TOPIC_SUFFIX[cam.transport]}"\n', '            topic = f"{name}/image_raw"\n',
             (f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera",)),
    Mutation("transport: every camera's messages typed Image", "vrt_ros/ros/node.py",
             '            msg_type = CompressedImage if cam.transport == "compressed" else Image\n',
             "            msg_type = Image\n",
             (f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera",)),
    Mutation("transport: one raw-subscription reader for every camera", "vrt_ros/ros/worker.py",
             "                msg = self._readers[cam.transport](msg)\n", '                msg = self._readers["raw"](msg)\n',
             (f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera[raw_subscription]",)),
    Mutation("transport: a raw slot handed to the pipeline's decoder as a JPEG", "vrt_ros/ros/batch_input.py",
             '    if frame.cam.transport == "compressed":\n        return CompressedFrame',
             "    if True:\n        return CompressedFrame",
             (f"{NT}::test_a_batch_holds_a_jpeg_slot_and_a_raw_slot[pipeline_decodes]",)),
    Mutation("transport: the node's CPU decode by the node's any-compressed flag", "vrt_ros/ros/batch_input.py",
             '            if frame.cam.transport == "compressed" and not gpu_decodes:\n',
             "            if not gpu_decodes:\n",
             (f"{NT}::test_a_batch_holds_a_jpeg_slot_and_a_raw_slot[cpu_decode]",
              f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera")),
    Mutation("transport: the GPU decoder started only by input.compressed", "vrt_ros/inference/backends/cuda.py",
             "        self._router = self._make_router() if any_compressed(values) else None\n",
             '        self._router = self._make_router() if values.get("input.compressed") else None\n',
             (f"{CT}::test_the_gpu_path_starts_its_jpeg_decoder_when_any_camera_is_compressed",)),
    Mutation("transport: decode counts on every camera's status", "vrt_ros/ros/diagnostics.py",
             '        if transport == "compressed":\n            status.values += [KeyValue(key=f"decode.',
             '        if True:\n            status.values += [KeyValue(key=f"decode.',
             (f"{NT}::test_a_batch_holds_a_jpeg_slot_and_a_raw_slot[pipeline_decodes]",)),
    Mutation("transport: the start-up line without each camera's transport", "vrt_ros/ros/node.py",
             "f\"{', '.join(f'{c} ({_TOPIC_SUFFIX[transports[c]]})' for c in cameras)} \"",
             "f\"{cameras} \"",
             (f"{NT}::test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera[typed]",)),
    # issue 35: bench (3D CDR writer)
    Mutation("3D writer: quaternion z and w swapped", "vrt_ros/ros/cdr.py",
             "pose = _POSE_3D.pack(x, y, z, 0.0, 0.0, qz, qw)", "pose = _POSE_3D.pack(x, y, z, 0.0, 0.0, qw, qz)",
             ("test/test_cdr_3d.py::test_detections_3d_serialize_as_rclpy_does",)),
    Mutation("3D writer: the result's pose left at the message default", "vrt_ros/ros/cdr.py",
             "        out += pose  # the result's pose ...\n", "        out += _DEFAULT_POSE[:56]\n",
             ("test/test_cdr_3d.py::test_detections_3d_serialize_as_rclpy_does",)),
    # issue 35: bench (cameras bench target and scaling tables)
    Mutation("targets: met by the best repeat, not the median", "vrt_ros/bench/cameras/cameras_targets.py",
             "checks.append(None if v is None else v[0] <= limit)", "checks.append(None if v is None else v[1] <= limit)",
             ("test/test_bench_targets.py::test_target_table_says_met_or_missed_by_the_median",)),
    Mutation("scaling table: failed runs counted", "vrt_ros/bench/cameras/cameras_report.py",
             'if r.get("error") or r.get("size") != size', 'if r.get("size") != size',
             ("test/test_bench_cameras.py::test_scaling_table_takes_the_median_and_range_over_repeats",)),
    Mutation("targets: the budget not checked before a run", "vrt_ros/bench/cameras/cameras_e2e.py",
             "if args.budget_s is not None and walls and", "if False and",
             ("test/test_bench_targets.py::test_targets_budget_starts_no_run_that_would_end_past_it",)),
    Mutation("jpeg batch: streams a hardware batch refused as a whole not tried again one by one",
             "vrt_ros/intake/compressed_route.py", "        if refused and (whole or len(infos) > 1):\n",
             "        if refused and whole:\n",
             (f"{JB}::test_a_hardware_batch_one_bad_stream_fails_as_a_whole_still_decodes_the_good_ones_on_the_gpu",)),
    Mutation("one path: a batch whose every frame was refused still synchronises", "vrt_ros/inference/backends/cuda.py",
             "                if staged.taken:\n", "                if True:\n",
             ("test/test_onepath.py::test_a_batch_whose_every_frame_is_refused_queues_nothing_and_does_not_sync",)),
    Mutation("diagnostics: a camera whose 3D output is refused stays OK", "vrt_ros/ros/diagnostics.py",
             "        if depth:\n            depth_level(", "        if False:\n            depth_level(",
             ("test/test_diagnostics_depth.py::test_a_camera_whose_every_3d_output_is_refused_is_warn_and_ok_again_once_3d_flows",)),
    Mutation("one path: a batch refused after its uploads were queued is not synchronised", "vrt_ros/inference/backends/cuda.py",
             "                    if staged.enqueued:\n", "                    if False:\n",
             ("test/test_gpu_frame_buffers.py::test_two_hundred_frame_sizes_stay_within_the_frame_buffer_bound",)),
    # issue 35: one path (onepath: one process_batch for one frame or N, mixed kinds, depth per slot, parallel copies)
    Mutation("one path: a corrupt JPEG fails its whole batch", "vrt_ros/inference/backends/cuda_staging.py",
             "            if isinstance(got, FrameError):\n                staged.faults[i] = got\n            elif",
             "            if False:\n                staged.faults[i] = got\n            elif",
             ("test/test_onepath.py::test_a_corrupt_jpeg_in_a_batch_drops_its_slot_only",
              "test/test_onepath.py::test_the_worker_runs_a_mixed_batch_in_one_call_and_a_corrupt_jpeg_drops_only_its_frame")),
    Mutation("one path: a raw frame refused by the uploader fails its whole batch", "vrt_ros/gpu/upload.py",
             "            except FrameError as exc:\n                out.append(exc)\n                continue\n",
             "            except ZeroDivisionError as exc:\n                out.append(exc)\n                continue\n",
             ("test/test_gpu_batch.py::test_an_input_fault_drops_its_slot_only",)),
    Mutation("one path: every slot's depth statistic in slot 0's rows", "vrt_ros/inference/backends/cuda_run.py",
             "post.out_stride, params.max_detections, slot=j)", "post.out_stride, params.max_detections, slot=0)",
             ("test/test_onepath.py::test_depth_statistics_of_a_batch_are_computed_per_slot_inside_its_one_sync",)),
    Mutation("one path: a batch's depth statistic read over slot 0's result", "vrt_ros/inference/backends/cuda_run.py",
             "post.result_ptr + j * post.slot_stride", "post.result_ptr",
             ("test/test_onepath.py::test_depth_statistics_of_a_batch_are_computed_per_slot_inside_its_one_sync",)),
    Mutation("one path: a batch's depth left to the CPU loop (no GPU jobs)", "vrt_ros/ros/depth_input.py",
             "        if not any(job is not None for job in jobs):\n", "        if True:\n",
             ("test/test_onepath.py::test_the_batchs_depth_goes_to_the_gpu_route_per_slot",)),
    Mutation("one path: depth.wait_ms a deadline per frame in turn", "vrt_ros/ros/depth_input.py",
             "            self.pair(frame, deadline)\n", "            self.pair(frame)\n",
             ("test/test_onepath.py::test_depth_of_a_batch_is_paired_under_one_deadline",)),
    Mutation("one path: a batch's raw copies one after another", "vrt_ros/gpu/upload.py",
             "        if len(jobs) > 1 and self.parallel:", "        if False:",
             ("test/test_onepath.py::test_raw_copies_of_a_batch_run_at_the_same_time",)),
    Mutation("one path: the frame's kind from the node, not its camera", "vrt_ros/ros/batch_input.py",
             '    if frame.cam.transport == "compressed":\n', '    if False:\n',
             ("test/test_onepath.py::test_the_worker_runs_a_mixed_batch_in_one_call_and_a_corrupt_jpeg_drops_only_its_frame",)),
    Mutation("one path: a batch's JPEGs not given their slots", "vrt_ros/inference/backends/cuda_staging.py",
             "router().decode_batch(items, stream, compressed)", "router().decode_batch(items, stream, [0] * len(items))",
             ("test/test_onepath.py::test_each_slot_of_a_mixed_raw_and_jpeg_batch_equals_its_frame_alone",)),
    # issue 37: layout (engines/tensorrt.py split; a refused batch shape quoted its errors through a missing method)
    Mutation("TensorRT: a refused batch shape quotes errors logged before this enqueue", "vrt_ros/engines/tensorrt.py",
             "engine's batch profile? {self._router.quote(mark)})", "engine's batch profile? {self._router.quote(0)})",
             ("test/test_tensorrt.py::test_a_batch_size_tensorrt_refuses_is_a_model_error_quoting_its_errors",)),
    # issue 37: newuser (a new user's two-camera robot from the docs alone: results/newuser/account.md)
    Mutation("newuser: the checker skips depth.cameras", "vrt_ros/settings/config.py",
             '    if not errors and out["depth.enabled"]:', '    if False:',
             ("test/test_newuser_edges.py::test_the_checker_refuses_a_depth_camera_list_the_node_refuses",)),
    Mutation("newuser: record --count not enforced as messages arrive", "vrt_ros/tools/record.py",
             "if self._closed or (self._limit and self._taken >= self._limit):", "if self._closed:",
             ("test/test_newuser_edges.py::test_record_count_writes_exactly_that_many_messages",)),
    Mutation("newuser: depth_unpaired warning without the depth topic", "vrt_ros/ros/depth_input.py",
             'f"frame(s) in the ring ({cd.depth_received} received on {cd.depth_topic} since "\n'
             '                                 f"start), depth.max_skew_ms',
             'f"frame(s) in the ring, depth.max_skew_ms',
             ("test/test_newuser_edges.py::test_the_unpaired_depth_warning_names_the_depth_topic",)),
    # issue 35 follow-up: an absolute depth.topic / depth.camera_info_topic was silently made relative
    Mutation("depth topics: an absolute one accepted", "vrt_ros/settings/config.py",
             'for n in DEPTH_TOPICS if out[n].startswith("/")]', "for n in DEPTH_TOPICS if False]",
             ("test/test_newuser_edges.py::test_an_absolute_depth_topic_is_refused_naming_the_parameter",)),
)


def copy_tree(dest: Path) -> None:
    """The working tree's tracked and untracked-not-ignored files, into ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def run_tests(tree: Path, tests: tuple[str, ...], env: dict[str, str]) -> tuple[bool, float, str]:
    """``(passed, seconds, last output lines)`` of pytest on ``tests`` in ``tree``."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=tree, env=env, capture_output=True, text=True)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
    return proc.returncode == 0, time.monotonic() - t0, tail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "results" / "mutations.md"), help="where the table is written")
    p.add_argument("--only", nargs="*", help="run only the mutations whose name contains one of these words")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or any(w in m.name for w in args.only)]
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("ROS_DOMAIN_ID", "57")
    env.setdefault("VRT_TEST_DOMAIN_ID", env["ROS_DOMAIN_ID"])
    with tempfile.TemporaryDirectory(prefix="vrt_mutations_") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "test"), env.get("PYTHONPATH", "")])
        env["ROS_LOG_DIR"] = str(tree / "build" / "ros_log")
        where = subprocess.run([sys.executable, "-c", "import vrt_ros; print(vrt_ros.__file__)"], cwd=tree, env=env,
                               capture_output=True, text=True).stdout.strip()
        if not where.startswith(str(tree)):
            print(f"mutations: vrt_ros imports from {where}, not from the scratch copy {tree}", file=sys.stderr)
            return 1
        all_tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        ok, secs, tail = run_tests(tree, all_tests, env)
        print(f"baseline (unmutated): {len(all_tests)} tests {'pass' if ok else 'FAIL'} ({secs:.0f} s)", flush=True)
        if not ok:
            print(tail, file=sys.stderr)
            return 1
        rows = []
        for m in chosen:
            target = tree / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                print(f"mutations: {m.name!r}: the text to replace occurs {original.count(m.old)} times in {m.path}",
                      file=sys.stderr)
                return 1
            target.write_text(original.replace(m.old, m.new))
            try:
                passed, secs, tail = run_tests(tree, m.tests, env)
            finally:
                target.write_text(original)
            rows.append((m, not passed, secs))
            print(f"{'killed' if not passed else 'SURVIVED'}: {m.name} ({secs:.0f} s)", flush=True)
    lines = ["| mutation | file | tests run | failed |", "|---|---|---|---|"]
    for m, failed, _ in rows:
        tests = "<br>".join(t.split("::")[-1] for t in m.tests)
        lines.append(f"| {m.name} | `{m.path}` | {tests} | {'yes' if failed else '**no**'} |")
    survived = sum(1 for _, failed, _ in rows if not failed)
    lines.append("")
    lines.append(f"{len(rows)} mutations, {len(rows) - survived} made a test fail, {survived} survived "
                 f"(baseline: the {len(all_tests)} tests pass unmutated). Command: "
                 f"`ROS_DOMAIN_ID=<id> .venv/bin/python scripts/mutations.py`.")
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Mutations of the fault wiring (scripts/mutations.py, issue 26)\n\n" + table + "\n")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
