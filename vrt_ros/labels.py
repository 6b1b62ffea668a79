"""Class-name files: one name per line, in class-index order (e.g. coco80.names)."""

from __future__ import annotations

from pathlib import Path

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
