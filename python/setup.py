"""Build hooks for lance-spark (metadata lives in pyproject.toml).

build_py:
  * generates lance_spark/_proto/*_pb2.py from ../protos/*.proto (gen_protos.generate);
  * copies the connector bundle jar (build/sbt connector/assembly) into lance_spark/jars/.
Set LANCE_SPARK_BUNDLE_JAR=/path/to.jar to take the jar from elsewhere, or LANCE_SPARK_SKIP_JAR=1
to build without it (jar_path() then needs LANCE_SPARK_JAR at run time).
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
JAR_NAME = "lance-spark-bundle_2.13-0.1.0.jar"
JAR_SRC = Path(os.environ.get("LANCE_SPARK_BUNDLE_JAR")
               or REPO / "spark-connector" / "target" / "scala-2.13" / JAR_NAME)


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
            if not JAR_SRC.is_file():
                raise FileNotFoundError(
                    f"{JAR_SRC} not found: run `build/sbt connector/assembly` first "
                    "(or set LANCE_SPARK_SKIP_JAR=1 to build a wheel without the jar)")
            jars.mkdir(exist_ok=True)
            shutil.copy2(JAR_SRC, jars / JAR_NAME)
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtosAndJar})
