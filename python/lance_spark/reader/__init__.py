"""A pure-Python reader for Lance datasets (file formats 0.1 "legacy", 2.0, 2.1 and 2.2).

An independent second implementation of the format (numpy + pyarrow, no pylance)::

    from lance_spark import reader
    ds = reader.dataset("/path/to/ds", version=3)
    ds.to_table(columns=["id"])

Blob columns are read as the Spark connector reads them:

- file version 2.1, a ``large_binary`` field with ``lance-encoding:blob`` (blob page layout): the
  column holds the values themselves (``large_binary``; pylance's ``to_table()`` returns their
  positions and ``take_blobs`` the values);
- file version 2.2, a ``lance.blob.v2`` column: ``struct<data: large_binary, uri: string[,
  position: uint64, size: uint64]>``, ``data`` the value wherever pylance stored it (the data
  file, its packed or dedicated blob files, an external ``file:`` URI), ``uri`` the uri of external
  values, ``position``/``size`` where the bytes are and how many (docs/blobs.md). What cannot be
  read exactly (a missing blob file, a range outside its file, a non-``file:`` external URI) is a
  ``LanceFormatError`` naming the file and column.

Datasets from old Lance releases are read as the reference reads them: a fragment's physical_rows of
0, or any when the manifest has no writer_version, is the row count of its first data file; a
deletion file's num_deleted_rows of 0 is counted from the file; file version 0.3 is 2.0, and a data
file is read by the version its footer states; a manifest without data_format has its files' version.
What cannot be read exactly (files of a fragment that disagree on their rows, a footer that
contradicts the manifest's 2.x version, a fragment of unknown row count) is a ``LanceFormatError``.

Layout (as the Scala codec): ``format/`` reads single data files, ``table/`` reads datasets
(manifests, fragments, deletions) through it; ``errors`` is shared.
"""
from .errors import LanceFormatError
from .table.dataset import LanceDataset, dataset
from .table.fragment import DataFileInfo, DeletionFileInfo, FragmentInfo

__all__ = ["dataset", "LanceDataset", "FragmentInfo", "DataFileInfo", "DeletionFileInfo",
           "LanceFormatError"]
