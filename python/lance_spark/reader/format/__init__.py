"""File level of the reader: one Lance data file at a time (0.1 legacy and 2.0 containers, the 2.0
encodings, the 2.1/2.2 layouts, codecs and rep/def, schemas and logical types). Knows nothing of
manifests or datasets."""
