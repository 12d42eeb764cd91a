"""Build hooks for lance-spark (metadata lives in pyproject.toml).

build_py:
  * generates lance_spark/_proto/*_pb2.py from ../protos/*.proto (gen_protos.generate);
  * copies the connector's bundle jars, one per Spark line (`make jar`, which puts them in
    ../target/bundles/lance-spark-bundle-<line>_<scala>-<version>.jar), into lance_spark/jars/.
Set LANCE_SPARK_BUNDLE_DIR=/path/to/dir to take the jars from elsewhere, or LANCE_SPARK_SKIP_JAR=1
to build without them (jar_path() then needs LANCE_SPARK_JAR at run time).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUNDLE_DIR = Path(os.environ.get("LANCE_SPARK_BUNDLE_DIR") or REPO / "target" / "bundles")


def _generate_protos() -> None:
    sys.path.insert(0, str(HERE))
    try:
        from gen_protos import generate
    finally:
        sys.path.pop(0)
    generate(REPO / "protos", HERE / "lance_spark" / "_proto")


# setuptools lists the lance_spark._proto package before build_py runs, so it must exist.
if not (HERE / "lance_spark" / "_proto").is_dir():
    _generate_protos()


class BuildPyWithProtosAndJar(build_py):
    def run(self):
        _generate_protos()
        jars = HERE / "lance_spark" / "jars"
        if os.environ.get("LANCE_SPARK_SKIP_JAR") != "1":
            bundles = sorted(BUNDLE_DIR.glob("lance-spark-bundle-*.jar"))
            if not bundles:
                raise FileNotFoundError(
                    f"no bundle jars in {BUNDLE_DIR}: run `make jar` first "
                    "(or set LANCE_SPARK_SKIP_JAR=1 to build a wheel without them)")
            if jars.is_dir():
                shutil.rmtree(jars)  # no bundle of an earlier build is left behind
            jars.mkdir()
            for jar in bundles:
                shutil.copy2(jar, jars / jar.name)
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtosAndJar})
