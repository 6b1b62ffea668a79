"""Class-name files: one name per line, in class-index order (e.g. coco80.names)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from vrt_ros.errors import ConfigError


def load_labels(path: str | Path) -> tuple[str, ...]:
    """Read a labels file; blank lines at the end are ignored.

    Returns:
        The class names, index i at position i ( empty tuple for an empty path).

    Raises:
        ConfigError: the file is missing or unreadable (names model.labels and the path).
    """
    if not str(path):
        return ()
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"model.labels: labels file {path} cannot be read ({e.strerror}); give one class name per line") from e
    while lines and not lines[-1].strip():
        lines.pop()
    return tuple(line.strip() for line in lines)


def class_name(labels: tuple[str, ...], class_id: int) -> str:
    """The name of ``class_id``, or its decimal index when there are no labels or it is out of range."""
    return labels[class_id] if 0 <= class_id < len(labels) else str(class_id)


def check_label_count(labels: tuple[str, ...], class_count: int | None, path: str | Path, head: str,
                      warn: Callable[[str], None]) -> None:
    """Refuse a labels file whose number of names is not the model's class count (checked once at start-up).

    Args:
        labels: the names read by :func:`load_labels` (empty: no labels file, nothing to check).
        class_count: classes the model scores, from its output shapes (``Head.label_count``), or None where the
            layout does not say (``end2end``: the class is a value in each row, not a channel).
        path: the labels file (for the messages).
        head: the ``model.head`` in use (for the messages).
        warn: where the warning goes when ``class_count`` is None (a ROS logger's ``warning``, or ``print``).

    Raises:
        ConfigError: ``len(labels) != class_count``, naming ``model.labels``, the file and both counts (a wrong file
            would publish the wrong names, or decimal indices past its end).
    """
    if not labels:
        return
    if class_count is None:
        warn(f"model.labels: {path} has {len(labels)} names; head {head!r} does not say how many classes the model "
             "scores (the class is a value in each output row), so the count is not checked: class ids past the "
             "file's end are published as their decimal index")
        return
    if len(labels) != class_count:
        raise ConfigError(f"model.labels: {path} has {len(labels)} names but the model scores {class_count} classes "
                          f"(head {head!r}, from its output shapes): give one name per class, in class-index order")
