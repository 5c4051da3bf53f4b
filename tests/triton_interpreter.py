"""The Triton interpreter without its repeated patching of ``triton.language`` inside a running kernel.

Under ``TRITON_INTERPRET=1`` a kernel launch patches the language modules its function sees (``triton.language``,
``triton.language.core``) for the launch and restores them after; every call of a ``@triton.jit`` helper inside
the kernel then patches them again (``inspect.getmembers`` over the whole language, per call, per program),
although they are patched already: a re-patch finds the builtins replaced and sets the same closures again. In
the kernel tests that was about a third of the interpreter's time. Here a helper whose language modules are patched
already in the running launch skips the re-patch; a launch, or the first helper seeing a module not yet patched,
patches as before.
"""
from __future__ import annotations

import inspect


def skip_repatching_inside_kernels() -> bool:
    """Wrap ``triton.runtime.interpreter._patch_lang``; False (and nothing changed) where this Triton lacks it."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang", None)
    scope_class = getattr(interpreter, "_LangPatchScope", None)
    if original is None or scope_class is None or getattr(original, "skips_repatching", False):
        return False
    patched: list[set[int]] = []   # the language modules (ids) of the running launch; launches do not nest

    def languages(fn) -> set[int]:
        return {id(value) for value in fn.__globals__.values()
                if inspect.ismodule(value) and (value is tl or value is tl.core)}

    def patch_lang(fn):
        seen = languages(fn)
        if patched:                # a helper called inside a running kernel: its patches last until the launch ends
            if seen <= patched[-1]:
                return scope_class()
            patched[-1] |= seen
            return original(fn)
        scope = original(fn)       # a launch: its scope is restored when the grid is done
        patched.append(seen)
        restore = scope.restore

        def restore_and_forget() -> None:
            patched.pop()
            restore()

        scope.restore = restore_and_forget
        return scope

    patch_lang.skips_repatching = True
    interpreter._patch_lang = patch_lang
    return True
