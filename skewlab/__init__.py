"""skewlab's top-level package: the composition root (:mod:`skewlab.cli`, the ``skewlab`` command)
and the small module every layer may import (:mod:`skewlab.shared`).

Importing it imports nothing else, so ``skewlab.shared`` stays cheap for every layer.
"""
