"""The Scala suites' pylance interpreter (tests/fixtures/pylance_server.py): each script runs
as it would as `python -c script args...` — its own argv and namespace, its output captured,
its exit code kept (SystemExit, a failed assertion) — and output written to file descriptor 1
never reaches the answers."""
from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parent / "fixtures" / "pylance_server.py"


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    yield proc
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def call(proc, script: str, *args: str, name: str = "-c") -> tuple[int, str]:
    fields = [name, script, *args]
    proc.stdin.write(" ".join(base64.b64encode(f.encode()).decode() for f in fields) + "\n")
    proc.stdin.flush()
    rc, out = proc.stdout.readline().rstrip("\n").split(" ")
    return int(rc), base64.b64decode(out).decode()


def test_arguments_output_and_exit_codes(server):
    assert call(server, "import sys; print(sys.argv[1:]); print('é', file=sys.stderr)", "a", "", "b c") == \
        (0, "['a', '', 'b c']\né\n")
    assert call(server, "import sys; sys.exit(3)") == (3, "")
    assert call(server, "raise SystemExit('no')") == (1, "no\n")
    rc, out = call(server, "assert 1 == 2, 'differs'")
    assert rc == 1 and "AssertionError: differs" in out


def test_each_script_has_its_own_namespace(server):
    assert call(server, "x = 1; print(__name__)") == (0, "__main__\n")
    rc, out = call(server, "print(x)")
    assert rc == 1 and "NameError" in out


def test_writes_to_descriptor_1_do_not_reach_the_answers(server):
    assert call(server, "import os; os.write(1, b'native\\n'); print('kept')") == (0, "kept\n")
    assert call(server, "print('next')") == (0, "next\n")


def test_a_script_file_runs_as_main(server, tmp_path):
    f = tmp_path / "s.py"
    f.write_text("import sys\nif __name__ == '__main__':\n    print(__file__ == sys.argv[0], sys.argv[1])\n")
    assert call(server, f.read_text(), "arg", name=str(f)) == (0, "True arg\n")
