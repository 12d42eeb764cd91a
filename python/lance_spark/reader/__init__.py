"""A pure-Python reader for Lance datasets (file formats 0.1 "legacy", 2.0, 2.1 and 2.2).

An independent second implementation of the format (numpy + pyarrow, no pylance)::

    from lance_spark import reader
    ds = reader.dataset("/path/to/ds", version=3)
    ds.to_table(columns=["id"])

Layout (as the Scala codec): ``format/`` reads single data files, ``table/`` reads datasets
(manifests, fragments, deletions) through it; ``errors`` is shared.
"""
from .errors import LanceFormatError
from .table.dataset import LanceDataset, dataset
from .table.fragment import DataFileInfo, DeletionFileInfo, FragmentInfo

__all__ = ["dataset", "LanceDataset", "FragmentInfo", "DataFileInfo", "DeletionFileInfo",
           "LanceFormatError"]
