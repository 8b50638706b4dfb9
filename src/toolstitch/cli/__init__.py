"""The ``toolstitch`` command: ``demo``, ``replay`` and ``check``. Every argparse line lives here.

* :mod:`._main`             the parser and its table of commands; fails closed (one line, exit 2).
* :mod:`._check_command`    ``toolstitch check``.
* :mod:`._replay_command`   ``toolstitch replay``.
* :mod:`._demo_command`     ``toolstitch demo``'s options; :mod:`._demo` is the conversation and
  its printing, :mod:`._demo_model` the scripted model it talks to without an API key,
  :mod:`._web` the ``--web`` page's server (``_web_page.html``: one file, inline JS, no build step).
* :mod:`._output`           one-line errors and output any terminal encodes.
"""

from __future__ import annotations

from ._main import main

__all__ = []
__all__ += [  # for the layers above only
    "main",
]
