"""The one compiled part of toolstitch: ``toolstitch.core._speedups`` (see its C file for why).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no
compiler, PyPy, free-threaded CPython) the install goes on and the same code runs in Python.
"""

import sys

from setuptools import Extension, setup

ext_modules = []
if sys.implementation.name == "cpython":
    ext_modules.append(
        Extension(
            "toolstitch.core._speedups",
            sources=["src/toolstitch/core/_speedups.c"],
            optional=True,
        )
    )

setup(ext_modules=ext_modules)
