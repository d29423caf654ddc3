"""The built-in tools, by name (workers/tools/builtin.py).

Loaded when first asked for: a command that runs no tool (`gaffer --help`, `gaffer
logs`) imports a helper module of this package without every tool's code and schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.tools.builtin import BUILTIN_TOOLS, AnyTool, pick

__all__ = ["BUILTIN_TOOLS", "AnyTool", "pick"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from workers.tools import builtin

        return getattr(builtin, name)
    raise AttributeError(f"module 'workers.tools' has no attribute {name!r}")
