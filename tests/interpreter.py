"""The one way tests run code in a fresh Python interpreter."""

import os
import subprocess
import sys
import textwrap


def run_python(code=None, env=None, flags=(), args=(), timeout=600, module=None):
    """Run ``code`` (dedented), or ``-m module``, in a fresh interpreter and return its
    CompletedProcess (stdout and stderr captured as text).

    ``env`` is added to this process's environment; ``flags`` go to the interpreter
    before ``-c`` (``("-W", "error")``); ``args`` are the program's ``sys.argv[1:]``."""
    e = dict(os.environ)
    e.update(env or {})
    what = ["-m", module] if module else ["-c", textwrap.dedent(code)]
    return subprocess.run(
        [sys.executable, *flags, *what, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
    )
