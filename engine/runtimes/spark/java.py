"""Is there a Java that Spark can start?  Checked before a Spark session is built, so a missing or
too old Java is one line naming the cause and the fix, not pyspark's ``JAVA_GATEWAY_EXITED``
traceback (whose cause is only in the JVM's log).

The Java looked up is the one Spark's launcher (``bin/spark-class``) runs: ``$JAVA_HOME/bin/java``
when ``JAVA_HOME`` is set, else ``java`` on ``PATH``.  Spark 4 needs Java 17 or newer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

__all__ = ["MIN_JAVA", "INSTALL_HINT", "java_executable", "java_major", "java_problem"]

#: the oldest Java release Spark 4 runs on
MIN_JAVA = 17
INSTALL_HINT = ("install Java 17 (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) "
                "or point JAVA_HOME at a Java 17+ installation")


def java_executable() -> tuple[str | None, str]:
    """``(path or None, where it was looked for)``, as Spark's launcher chooses it."""
    home = os.environ.get("JAVA_HOME")
    if home:
        path = os.path.join(home, "bin", "java")
        return (path if os.path.isfile(path) and os.access(path, os.X_OK) else None), f"JAVA_HOME={home}"
    return shutil.which("java"), "PATH (JAVA_HOME is not set)"


def java_major(version_text: str) -> int | None:
    """The major release in ``java -version`` output (``"1.8.0_392"`` → 8, ``"17.0.15"`` → 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def java_problem(timeout_s: float = 30.0) -> str | None:
    """``None`` when a Java ≥ :data:`MIN_JAVA` runs, else one line: the cause and :data:`INSTALL_HINT`."""
    path, where = java_executable()
    if path is None:
        return f"Spark needs Java {MIN_JAVA}+ but no java was found in {where}; {INSTALL_HINT}"
    try:
        out = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark needs Java {MIN_JAVA}+ but {path} does not run ({exc}); {INSTALL_HINT}"
    text = (out.stderr or "") + (out.stdout or "")
    major = java_major(text)
    if out.returncode != 0 or major is None:
        first = text.strip().splitlines()[0] if text.strip() else f"exit status {out.returncode}"
        return f"Spark needs Java {MIN_JAVA}+ but '{path} -version' failed: {first}; {INSTALL_HINT}"
    if major < MIN_JAVA:
        return f"Spark needs Java {MIN_JAVA}+ but {path} is Java {major}; {INSTALL_HINT}"
    return None
