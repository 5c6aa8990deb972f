"""The runtime's inputs to the core: `Settings` (defined with the frameworks, which
read part of it, in `tfjob.frameworks.settings`; the runtimes import it from here)."""

from tfjob.frameworks.settings import Settings

__all__ = ["Settings"]
