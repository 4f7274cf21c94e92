"""A reward module whose import fails."""

raise ImportError("this module is deliberately broken")
