"""skewlab's top-level package: the composition root (:mod:`skewlab.cli`, the ``skewlab`` command)
and, from the folder shared/ (pyproject.toml's package-dir), the small package every layer may
import (:mod:`skewlab.shared`).

Importing it imports nothing else, so ``skewlab.shared`` stays cheap for every layer.
"""
