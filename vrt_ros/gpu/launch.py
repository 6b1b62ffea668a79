"""Launch-configuration helpers (grid = ceil-div of the work by the block)."""

from __future__ import annotations

from cuda.core import LaunchConfig

# 32 x 8 threads: one warp wide along x (coalesced rows), 256 threads per block.
BLOCK_2D = (32, 8)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def cfg_1d(n: int, block: int = 256) -> LaunchConfig:
    """One thread per item of ``n`` items (at least one block, so a kernel can still write its outputs for n=0).

    Args:
        n: number of items (>= 0).
        block: threads per block (1..1024).
    """
    if not 1 <= block <= 1024:
        raise ValueError(f"block {block} is outside 1..1024 threads")
    return LaunchConfig(grid=max(1, _ceil_div(n, block)), block=block)


def cfg_2d(width: int, height: int) -> LaunchConfig:
    """One thread per pixel of a ``width`` x ``height`` image, in 32x8 blocks (ceil-div grid)."""
    bx, by = BLOCK_2D
    return LaunchConfig(grid=(max(1, _ceil_div(width, bx)), max(1, _ceil_div(height, by))), block=(bx, by))


def cfg_per_item(items: int, threads: int) -> LaunchConfig:
    """One block of ``threads`` threads per item (e.g. one block per candidate row)."""
    if not 1 <= threads <= 1024:
        raise ValueError(f"threads {threads} is outside 1..1024")
    return LaunchConfig(grid=max(1, items), block=threads)
