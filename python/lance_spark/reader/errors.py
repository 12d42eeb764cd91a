from __future__ import annotations


class LanceFormatError(Exception):
    """A Lance dataset or file is malformed or uses something this reader does not support.

    The message names the offending file (or dataset) and the problem.
    """

    def __init__(self, where: str, problem: str):
        self.where = str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")
