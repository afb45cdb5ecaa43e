"""3D Gaussian Splatting rendering on rlx devices: scenes (.ply), cameras,
and ``Renderer``, whose ``render(camera)`` replays one compiled schedule
per frame (projection, binning, device radix sort, tile ranges, raster).
See docs/splat.md."""

from rlx.splat.renderer import Frame, Renderer, build_graph
from rlx.splat.scene import Camera, Scene, random_scene, read_cameras, read_ply, write_ply

__all__ = ["Camera", "Frame", "Renderer", "Scene", "build_graph", "random_scene", "read_cameras", "read_ply",
           "write_ply"]
