"""Dataset level of the reader: versions and manifests, fragments, deletion files, and the dataset
that reads its fragments' data files through `..format`."""
