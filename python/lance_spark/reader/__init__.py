"""A pure-Python reader for Lance datasets (file formats 0.1 "legacy" and 2.0).

An independent second implementation of the format (numpy + pyarrow, no pylance)::

    from lance_spark import reader
    ds = reader.dataset("/path/to/ds", version=3)
    ds.to_table(columns=["id"])
"""
from .dataset import DataFileInfo, DeletionFileInfo, FragmentInfo, LanceDataset, dataset
from .errors import LanceFormatError

__all__ = ["dataset", "LanceDataset", "FragmentInfo", "DataFileInfo", "DeletionFileInfo",
           "LanceFormatError"]
